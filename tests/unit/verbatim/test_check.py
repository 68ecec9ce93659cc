"""The verbatim guarantee: spans are checked against the stored passages at their offsets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evidence.records import Chunk, ChunkKind
from evidence.service import EvidenceService
from evidence.verbatim.check import VerbatimMismatchError, check_against, verify_spans

INDEX = "label"


def spans(service: EvidenceService) -> list[Chunk]:
    hits = service.backend.lookup(INDEX, {"kind": "span"}, limit=10_000, kind=ChunkKind.SPAN)
    return [h.chunk for h in hits]


def test_every_stored_span_of_the_label_checks_out(label_service: EvidenceService) -> None:
    all_spans = spans(label_service)
    assert len(all_spans) > 150
    assert verify_spans(label_service.backend, INDEX, all_spans) == len(all_spans)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: replace(c, text=c.text.replace("e", "é", 1)), "differs from the stored source"),
        (lambda c: replace(c, text=c.text + " "), "characters for a range"),
        (lambda c: replace(c, char_start=c.char_start + 1, char_end=c.char_end + 1), "differs"),
        (lambda c: replace(c, document_id="nope.md"), "no stored source"),
    ],
)
def test_a_span_that_is_not_its_source_is_an_error(
    label_service: EvidenceService, change, message: str
) -> None:
    span = next(c for c in spans(label_service) if "half-life" in c.text)
    with pytest.raises(VerbatimMismatchError, match=message) as info:
        verify_spans(label_service.backend, INDEX, [change(span)])
    assert info.value.status == 500 and info.value.code == "verbatim_mismatch"


def _chunk(text: str, start: int, kind: ChunkKind = ChunkKind.PASSAGE) -> Chunk:
    return Chunk(chunk_id=f"{kind.value}{start}", document_id="d", kind=kind, text=text,
                 char_start=start, char_end=start + len(text), sequence=0)  # fmt: skip


def test_spans_across_passages_and_whitespace_gaps() -> None:
    doc = "Alpha beta.\n\nGamma delta epsilon."
    p1 = _chunk(doc[:11], 0)
    p2 = _chunk(doc[13:], 13)
    across = _chunk(doc[6:19], 6, ChunkKind.SPAN)  # "beta.\n\nGamma ": the gap is whitespace only
    check_against(across, [p1, p2])
    bad = replace(across, text="beta.\nXGamma ")
    with pytest.raises(VerbatimMismatchError, match="no stored passage holds"):
        check_against(bad, [p1, p2])
