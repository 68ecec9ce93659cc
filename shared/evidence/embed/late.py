"""Late-chunked span vectors (`EVIDENCE_EMBED_SPANS_AT_INDEX=late`, docs/ingest.md#late-span-vectors).

A fact span's vector pooled out of its passage's forward pass at indexing: the mean of the last
hidden state over the passage input's word pieces that cover the span's characters, L2-normalised
(`MiniLMEmbedder.embed_documents_and_late`). These differ from a span's own vector (its text
embedded alone), so they live in a key space of their own in the store's embedding cache: the
model key `<document key>+late` (`LATE_SUFFIX`) and a hash of the span's place in its document
and of the document's content (`late_key`), never the hash of its scoring text that the
`verbatim` scorer reads. Only the `default` profile's focus span anchor reads them
(`verbatim.span_rank.LateVectors`, `CachedEmbedder.cached_late`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import TypeVar

from evidence.ids import content_hash
from evidence.records import Chunk

V = TypeVar("V")

#: Appended to the cache's model key (`embed.base.document_key`) for late vectors.
LATE_SUFFIX = "+late"

#: The version of the code that makes a late vector from its passage: the pooling
#: (`MiniLMEmbedder.embed_documents_and_late`: the mean of the last hidden state over the word
#: pieces covering the span, L2-normalised) and the passage choice (`late_ranges`). **Bump it
#: when either changes what a span's vector is**: keys then name the new version, so no vector
#: pooled by the older code is read (the anchor finds none for a document until it is written
#: again, as for a span without a vector), and `evidence eval` fingerprints re-index their
#: suites. Version 1 is the code since session 46, whose keys carry no version (`_key`), so the
#: stores written so far keep reading theirs (docs/ingest.md#late-span-vectors, "Key space").
LATE_VERSION = 1


@lru_cache(maxsize=65536)
def _key(document_hash: str, document_id: str, start: int, end: int, text: str, *, version: int) -> str:
    if not document_hash:  # the key of stores written before session 47 (`legacy_late_key`)
        return content_hash(f"late\x00{document_id}\x00{start}\x00{end}\x00{text}")
    # Version 1's keys name no version (they were written before there was one); later ones do.
    tag = "late" if version == 1 else f"late{version}"
    return content_hash(f"{tag}\x00{document_hash}\x00{document_id}\x00{start}\x00{end}\x00{text}")


def late_key(span: Chunk, document_hash: str, version: int | None = None) -> str:
    """A span's key among late vectors: the pooling code's version (`LATE_VERSION`), its
    document's content hash (`DocumentChunks.content_hash`, as the index stores it), its document
    id, offsets and text. The content hash covers all that the span's passage input is made of
    (the document's text, title, metadata, chunking parameters, every chunk's offsets, the header
    rule), so a key never names a vector pooled in other passages: a document re-indexed with
    other content, under any setting, or another index's document of the same id in a shared
    cache scope, has other keys; nor one pooled by other code: another version has other keys.
    `version`: `LATE_VERSION` (read at the call) unless given."""
    assert document_hash, "a late key names its document's content hash"
    version = LATE_VERSION if version is None else version
    assert version >= 1, "late vector versions start at 1"
    return _key(document_hash, span.document_id, span.char_start, span.char_end, span.text, version=version)


def legacy_late_key(span: Chunk) -> str:
    """The key stores written before session 47 hold a span's late vector under: its document id,
    offsets and text, not its content. Read only when `late_key` finds nothing (an existing
    store keeps its answers without re-indexing), and deleted for the spans of every document
    written since (`Indexing.write_documents`), so that it is read only for a document that no
    later write changed (docs/ingest.md#late-span-vectors). Its vectors were pooled by version 1's
    code: `read_late` reads it only while `LATE_VERSION` is 1."""
    return _key("", span.document_id, span.char_start, span.char_end, span.text, version=1)


def read_late(
    read: Callable[[list[str]], Sequence[V | None]],
    spans: Sequence[Chunk],
    hashes: Sequence[str],
    version: int | None = None,
) -> list[V | None]:
    """Each span's late vector as `read` (a cache's `cached_late`) holds it: under `late_key` with
    its document's content hash (`hashes`, one a span) and `version`, else (version 1 only: the
    code that pooled them) under a pre-session-47 store's `legacy_late_key`; None for one held
    under neither, or whose document's hash is unknown (""). `version`: `LATE_VERSION` unless given."""
    version = LATE_VERSION if version is None else version
    known = [k for k, h in enumerate(hashes) if h]
    out: list[V | None] = [None] * len(spans)
    for k, v in zip(known, read([late_key(spans[k], hashes[k], version) for k in known]), strict=True):
        out[k] = v
    missed = [k for k in known if out[k] is None]
    if missed and version == 1:
        for k, v in zip(missed, read([legacy_late_key(spans[k]) for k in missed]), strict=True):
            out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class LateRange:
    """Where a span's late vector is pooled: passage `passage` (a position in the document's
    passages), characters `[start, end)` of that passage's embedded input."""

    passage: int
    start: int
    end: int


def late_ranges(
    passages: Sequence[Chunk],
    inputs: Sequence[str],
    first_chars: Sequence[int],
    spans: Sequence[Chunk],
    *,
    past_window: bool = True,
) -> list[LateRange | None]:
    """The passage each span is pooled in, and its characters in that passage's input (a change to
    this choice bumps `LATE_VERSION`).

    `passages`: one document's passages in document order; `inputs[p]` what passage p's vector
    embeds (`SectionHeaders.dense_text`: title and header, then the passage's text, which is its
    last `len(text)` characters); `first_chars[p]` how many characters of it the first model
    window reads (`MiniLMEmbedder.first_window_chars`). The rule, deterministic: of the passages
    overlapping the span, the first in document order that holds it whole within its first
    window; else the first that holds it whole (its further window is run for it); else the one
    holding most of its characters (first on a tie), over the part it holds. None: no passage
    overlaps it, or (`past_window` false) none holds it whole within its first window."""
    # Only the passages that can overlap a span are visited (bisection), so a long document
    # costs O(spans x log passages), not O(spans x passages): 3,000 passages and 12,000 spans took
    # 9 s a call scanning every passage. Passages come in document order, so starts ascend; the
    # running maximum of their ends lets a passage contained in another stay correct.
    starts = [c.char_start for c in passages]
    reach = list(accumulate((c.char_end for c in passages), max))
    out: list[LateRange | None] = []
    for s in spans:
        a, b = s.char_start, s.char_end
        whole_first = whole = part = None
        most = 0
        for p in range(bisect_right(reach, a), bisect_left(starts, b)):
            c = passages[p]
            lo, hi = max(a, c.char_start), min(b, c.char_end)
            if hi <= lo:
                continue
            off = len(inputs[p]) - len(c.text) - c.char_start
            rng = LateRange(p, lo + off, hi + off)
            if lo == a and hi == b:
                if whole_first is None and rng.end <= first_chars[p]:
                    whole_first = rng
                    break
                if whole is None:
                    whole = rng
            if hi - lo > most:
                most, part = hi - lo, rng
        out.append(whole_first or (whole or part if past_window else None))
    return out
