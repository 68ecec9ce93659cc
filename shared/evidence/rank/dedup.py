"""Ranking stages that remove repetition: duplicate content, overlapping passages of one
document, and more than `max_chunks_per_document` chunks of one document.

They keep the order they are given (the convention of `rank/stages.py`, which re-exports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from evidence.ids import content_hash
from evidence.rank.candidate import Candidate, sort_key
from evidence.rank.context import RankContext
from evidence.records import ChunkKind


class DedupContent:
    """Drop chunks whose content hash was already seen, keeping the best-scored copy."""

    name = "dedup"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        best: dict[str, str] = {}
        for c in sorted(candidates, key=sort_key):
            best.setdefault(c.chunk.content_hash or content_hash(c.chunk.text), c.chunk_id)
        out = []
        for c in candidates:
            if best[c.chunk.content_hash or content_hash(c.chunk.text)] == c.chunk_id:
                out.append(c)
            else:
                ctx.trace.drop(ctx, c, "duplicate content")
        return out


class CollapseOverlaps:
    """Overlapping passages of one document become one hit, so the top hits do not repeat a sentence.

    Neighbouring passage windows share `overlap` tokens (docs/ingest.md), so when both match, the
    shared sentence fills two hits. A passage whose text overlaps a better-ranked passage of the
    same document is merged into it: the better one keeps its id, scores and rank and its text
    grows to the union of both (exact, since both are slices of one document text); the other
    is dropped. Passages that only touch, fact spans, and passages of other documents are left
    alone; the order is otherwise unchanged. A merged hit is longer than one window, at most the
    stretch of the document its windows cover.
    """

    name = "collapse_overlaps"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        out: list[Candidate | None] = []  # None: merged into a better-ranked hit
        kept: dict[str, list[int]] = {}  # document id -> positions in `out` of its passages
        merged = 0
        for c in candidates:
            if c.chunk.kind is not ChunkKind.PASSAGE:
                out.append(c)
                continue
            positions = kept.setdefault(c.chunk.document_id, [])
            hit = [i for i in positions if _overlaps(out[i], c)]
            if not hit:
                positions.append(len(out))
                out.append(c)
                continue
            # `c` may bridge two kept passages: all of them become the best-ranked one.
            group = [g for i in hit if (g := out[i]) is not None]
            out[hit[0]] = _union(group[0], [*group[1:], c])
            for i in hit[1:]:
                out[i] = None
                positions.remove(i)
            for g in [*group[1:], c]:
                merged += 1
                ctx.trace.drop(ctx, g, f"overlaps {group[0].chunk_id} of the same document: merged into it")
        ctx.trace.detail["merged"] = merged
        return [c for c in out if c is not None]


def _overlaps(a: Candidate | None, b: Candidate) -> bool:
    return a is not None and a.chunk.char_start < b.chunk.char_end and b.chunk.char_start < a.chunk.char_end


def _union(best: Candidate, rest: Sequence[Candidate]) -> Candidate:
    """`best` with its text widened to cover `rest`; together they form one contiguous stretch."""
    pieces = sorted((c.chunk for c in (best, *rest)), key=lambda ch: ch.char_start)
    text, start, end = pieces[0].text, pieces[0].char_start, pieces[0].char_end
    for ch in pieces[1:]:
        if ch.char_end > end:
            text += ch.text[end - ch.char_start :]
            end = ch.char_end
    chunk = replace(
        best.chunk,
        text=text,
        char_start=start,
        char_end=end,
        page=pieces[0].page,
        content_hash=content_hash(text),
    )
    return replace(best, chunk=chunk)


class PerDocumentCap:
    """At most `max_chunks_per_document` chunks of one document (None = off), best first."""

    name = "per_document_cap"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        cap = ctx.params.max_chunks_per_document
        if cap is None:
            return list(candidates)
        seen: dict[str, int] = {}
        out = []
        for c in candidates:
            n = seen.get(c.chunk.document_id, 0)
            if n >= cap:
                ctx.trace.drop(ctx, c, f"more than {cap} chunks of document {c.chunk.document_id}")
                continue
            seen[c.chunk.document_id] = n + 1
            out.append(c)
        return out
