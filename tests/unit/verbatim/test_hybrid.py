from __future__ import annotations

from evidence.records import Chunk, ChunkKind
from evidence.verbatim.hybrid import passage_scores, same_text
from evidence.verbatim.scoring import SpanStats, terms


def chunk(cid: str, doc: str, start: int, end: int, kind: ChunkKind = ChunkKind.SPAN) -> Chunk:
    return Chunk(
        chunk_id=cid,
        document_id=doc,
        kind=kind,
        text="x" * (end - start),
        char_start=start,
        char_end=end,
        sequence=0,
        section="",
    )


def test_a_span_takes_the_best_passage_holding_it_min_max_normalised() -> None:
    spans = [
        chunk("s1", "d", 10, 20),
        chunk("s2", "d", 95, 105),
        chunk("s3", "d", 300, 310),
        chunk("s4", "e", 0, 5),
    ]
    passages = [
        (chunk("p1", "d", 0, 100, ChunkKind.PASSAGE), 0.2),
        (chunk("p2", "d", 90, 200, ChunkKind.PASSAGE), 0.6),
        (chunk("p3", "d", 0, 50, ChunkKind.PASSAGE), 0.4),
    ]
    scores = passage_scores(spans, passages)
    assert abs(scores[0] - 0.5) < 1e-9  # p1 (0.0) and p3 (0.5) hold it: the better one
    assert scores[1] == 1.0  # only p2 holds it whole
    assert scores[2] == 0.0 and scores[3] == 0.0  # no passage scored holds them
    assert passage_scores(spans, []) == [0.0] * 4


def test_a_span_is_read_with_its_heading() -> None:
    texts = ["The default value of this macro is 1 billion.", "The default value is 100.", "Unrelated words."]
    heads = ["Maximum length of a string or BLOB", "Maximum number of arguments", "Other"]
    headed = SpanStats(texts).with_headings(heads)
    q = list(terms("maximum length of a string"))
    scores = [headed.bm25(i, q) for i in range(3)]
    assert scores[0] > scores[1] > 0 == scores[2]
    # the same statistics as analysing "heading text" afresh: one BM25, not two near-duplicates
    fresh = SpanStats([f"{h} {t}" for h, t in zip(heads, texts, strict=True)])
    assert [fresh.bm25(i, q) for i in range(3)] == scores
    assert SpanStats([]).with_headings([]).n == 0


def test_repeats_compare_without_bullets_case_or_spacing() -> None:
    assert same_text("• Offer  naloxone\nwhen prescribing.") == same_text("offer naloxone when prescribing.")
    assert same_text("Offer naloxone.") != same_text("Offer naltrexone.")
