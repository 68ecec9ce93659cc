"""The verbatim guarantee, in code: every span is checked against its stored source at its offsets.

A span's text must equal its document's text at `[char_start, char_end)`. The document text is not
stored whole, but its passages are, each with `text == document[char_start:char_end]`, and together
they cover it (overlapping windows; only whitespace between them is left out). So the check
rebuilds, from the stored passages of the span's document, every character of the span's range
and compares. A character no passage covers must be whitespace (the gaps passages leave); any
other difference, or a document with no stored passages, is a `VerbatimMismatchError` — raised,
never logged and skipped, because a response that quotes a source must quote it exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from evidence.errors import EvidenceError
from evidence.records import Chunk, ChunkKind

#: Passages read per document for the check (a document has far fewer; this only bounds a bad store).
MAX_PASSAGES = 10_000


class VerbatimMismatchError(EvidenceError):
    """A span does not match its stored source: the store or the pipeline is broken, not the request."""

    status = 500
    code = "verbatim_mismatch"


class PassageSource(Protocol):
    def lookup(
        self, index: str, filters: Any, *, limit: int = 100, kind: ChunkKind | None = None
    ) -> list[Any]: ...


def _mismatch(chunk: Chunk, why: str) -> VerbatimMismatchError:
    return VerbatimMismatchError(
        f"span {chunk.chunk_id} of {chunk.document_id!r} [{chunk.char_start}:{chunk.char_end}] {why}",
        field="hits",
    )


def check_against(span: Chunk, passages: Sequence[Chunk]) -> None:
    """Raise unless `span.text` is what the passages hold at the span's offsets."""
    start, end = span.char_start, span.char_end
    if end - start != len(span.text) or start < 0:
        raise _mismatch(span, f"has {len(span.text)} characters for a range of {end - start}")
    covered = [False] * len(span.text)
    for p in passages:
        if p.char_end <= start or p.char_start >= end:
            continue
        if p.char_end - p.char_start != len(p.text):
            raise _mismatch(span, f"lies in passage {p.chunk_id}, whose own offsets do not match its text")
        a, b = max(start, p.char_start), min(end, p.char_end)
        if span.text[a - start : b - start] != p.text[a - p.char_start : b - p.char_start]:
            raise _mismatch(span, f"differs from the stored source (passage {p.chunk_id})")
        for i in range(a - start, b - start):
            covered[i] = True
    if not any(covered):
        raise _mismatch(span, "has no stored source text to be checked against")
    for i, ok in enumerate(covered):
        if not ok and not span.text[i].isspace():
            raise _mismatch(span, f"has text at offset {start + i} that no stored passage holds")


def verify_spans(backend: PassageSource, index: str, spans: Iterable[Chunk]) -> int:
    """Check every span against the stored passages of its document; returns how many were checked."""
    by_doc: dict[str, list[Chunk]] = {}
    for s in spans:
        by_doc.setdefault(s.document_id, []).append(s)
    n = 0
    for document_id, items in by_doc.items():
        hits = backend.lookup(index, {"document_id": document_id}, limit=MAX_PASSAGES, kind=ChunkKind.PASSAGE)
        passages = sorted((h.chunk for h in hits), key=lambda c: c.char_start)
        for s in items:
            check_against(s, passages)
            n += 1
    return n
