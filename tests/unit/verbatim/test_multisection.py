"""[SECTION: NAME] bundles: grouping, order, and nothing but the spans' own text."""

from __future__ import annotations

from evidence.records import Chunk, ChunkKind
from evidence.verbatim.multisection import format_bundle, section_blocks


def span(text: str, section: str, doc: str = "d", start: int = 0) -> Chunk:
    return Chunk(chunk_id=f"{doc}:{start}", document_id=doc, kind=ChunkKind.SPAN, text=text,
                 char_start=start, char_end=start + len(text), sequence=start, section=section)  # fmt: skip


def test_blocks_follow_the_rank_of_their_best_span() -> None:
    a = span("Exposure is increased 2.1-fold.", "8.6 Renal Impairment", start=10)
    b = span("Start at 5 mg once daily.", "2.2 Dosage in Renal Impairment", start=20)
    c = span("Reduce the dosage.", "8.6 Renal Impairment", start=30)
    blocks = section_blocks([a, b, c])
    assert [blk.name for blk in blocks] == ["8.6 Renal Impairment", "2.2 Dosage in Renal Impairment"]
    assert blocks[0].spans == (a, c)
    assert format_bundle([a, b, c]) == (
        "[SECTION: 8.6 RENAL IMPAIRMENT]\nExposure is increased 2.1-fold.\nReduce the dosage.\n\n"
        "[SECTION: 2.2 DOSAGE IN RENAL IMPAIRMENT]\nStart at 5 mg once daily."
    )


def test_every_non_header_line_is_a_span() -> None:
    spans = [span("One.", "A", start=1), span("Two.", "", start=2), span("Three.", "A", doc="e", start=3)]
    text = format_bundle(spans)
    lines = [ln for ln in text.split("\n") if ln and not ln.startswith("[SECTION: ")]
    assert lines == ["One.", "Two.", "Three."]
    assert "[SECTION: DOCUMENT]" in text  # a span outside any heading
    assert format_bundle([]) == ""
