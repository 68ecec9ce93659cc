"""Test kit for the ranking tests: chunks, candidates, a real embedded store, contexts, rerankers.

Imported by package path (`from tests.unit.rank.rankkit import ...`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidence.ids import content_hash, normalize_and_hash
from evidence.rank.candidate import Candidate
from evidence.rank.context import ProfileParams, RankContext
from evidence.rank.rerank import RerankError, RerankResult
from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.search.embedded import EmbeddedBackend

DIM = 8
INDEX = "ranktest"


def vec(key: str) -> np.ndarray:
    """A deterministic unit vector per key."""
    raw = np.frombuffer(hashlib.sha256(key.encode()).digest()[: DIM * 4], dtype=np.uint32)
    v = (raw.astype(np.float64) / 2**32 - 0.5).astype(np.float32)
    return v / np.linalg.norm(v)


def chunk(
    cid: str,
    text: str | None = None,
    *,
    doc: str | None = None,
    type: str = "tc_files",
    meta: dict[str, Any] | None = None,
    source: str | None = None,
    seq: int = 0,
) -> Chunk:
    text = text if text is not None else f"text of {cid}"
    metadata: dict[str, Any] = {"type": type, **(meta or {})}
    return Chunk(
        chunk_id=cid,
        document_id=doc or f"doc-{cid}",
        kind=ChunkKind.PASSAGE,
        text=text,
        char_start=0,
        char_end=len(text),
        sequence=seq,
        source=source or f"{doc or cid}.pdf",
        metadata=metadata,
        content_hash=content_hash(text),
    )


def followup(
    cid: str,
    criterion: str,
    round_number: int,
    *,
    question: str | None = None,
    answer: str = "Yes, see policy.",
    filename: str = "followups.xlsx",
) -> Chunk:
    q = question if question is not None else criterion
    return chunk(
        cid,
        f"Question: {q}\nAnswer: {answer}",
        doc=f"fu-{cid}",
        type=f"followup_response:{round_number}",
        meta={
            "round_number": round_number,
            "criterion_question": criterion,
            "criterion_question_hash": normalize_and_hash(criterion),
            "question": q,
            "answer": answer,
            "FILENAME": filename,
        },
    )


def cand(c: Chunk, score: float, first: float | None = None, **scores: float) -> Candidate:
    fs = score if first is None else first
    return Candidate(chunk=c, score=score, first_stage_score=fs, scores={"fused": fs, **scores})


def store(backend: EmbeddedBackend, chunks: Iterable[Chunk], index: str = INDEX) -> None:
    backend.create_index(index, embedder_id="test-hash", dimension=DIM)
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.document_id, []).append(c)
    docs = [
        DocumentChunks(
            document_id=d,
            content_hash=content_hash("".join(c.text for c in cs)),
            source=cs[0].source,
            chunks=tuple(cs),
            # filters match document metadata (a chunk's metadata is its document's)
            metadata=dict(cs[0].metadata),
        )
        for d, cs in by_doc.items()
    ]
    vectors = [np.stack([vec(c.text) for c in d.chunks]) for d in docs]
    backend.upsert(index, docs, vectors)


def new_backend(path: Path, chunks: Iterable[Chunk] = (), index: str = INDEX) -> EmbeddedBackend:
    backend = EmbeddedBackend(path)
    store(backend, chunks, index)
    return backend


def ctx(
    backend: Any,
    *,
    params: ProfileParams | None = None,
    criterion: str | None = None,
    query: str = "query",
    query_vector: np.ndarray | None = None,
    reranker: Any = None,
    explain: bool = False,
    filters: dict[str, Any] | None = None,
    index: str = INDEX,
    **overrides: Any,
) -> RankContext:
    from dataclasses import replace

    p = replace(params or ProfileParams(), **overrides)
    return RankContext(
        index=index,
        query=query,
        query_vector=query_vector,
        criterion_question=criterion,
        criterion_hash=normalize_and_hash(criterion) if criterion else None,
        params=p,
        filters=filters,
        explain=explain,
        backend=backend,
        reranker=reranker,
    )


class ScriptedReranker:
    """In-process reranker: a score per text (or a function of query and text)."""

    name = "scripted"

    def __init__(self, scores: dict[str, float] | Callable[[str, str], float]) -> None:
        self.scores = scores
        self.calls: list[tuple[str, list[str], int | None]] = []

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> RerankResult:
        self.calls.append((query, list(texts), top_n))
        fn = self.scores
        scored = [(i, fn(query, t) if callable(fn) else fn.get(t, 0.0)) for i, t in enumerate(texts)]
        scored.sort(key=lambda r: (-r[1], r[0]))
        return scored[: top_n or len(texts)]


class FailingReranker:
    name = "failing"

    def __init__(self, reason: str = "timeout") -> None:
        self.reason = reason

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> RerankResult:
        raise RerankError("boom", reason=self.reason)


def overlap_score(query: str, text: str) -> float:
    """Word-overlap relevance in [0, 1], like a tiny reranker."""
    q = set(query.lower().split())
    t = set(text.lower().split())
    return round(len(q & t) / len(q), 4) if q else 0.0


class ListFirstStage:
    """A first stage that returns a fixed candidate list (the lead's FirstStage is tested elsewhere)."""

    name = "first_stage"

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        self.candidates = list(candidates)

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        return self.candidates[: ctx.params.first_stage_k]


class LegsFirstStage:
    """Lexical + dense legs on the backend fused by RRF (k=60): stands in for the lead's
    FirstStage only while that module cannot be imported."""

    name = "first_stage"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        k = ctx.params.first_stage_k
        legs = {"lexical": ctx.backend.lexical(ctx.index, ctx.query, k=k, filters=ctx.filters)}
        if ctx.query_vector is not None:
            legs["dense"] = ctx.backend.dense(ctx.index, ctx.query_vector, k=k, filters=ctx.filters)
        fused: dict[str, float] = {}
        per_leg: dict[str, dict[str, float]] = {}
        chunks: dict[str, Chunk] = {}
        for name, hits in legs.items():
            for rank, h in enumerate(hits, start=1):
                fused[h.chunk.chunk_id] = fused.get(h.chunk.chunk_id, 0.0) + 1.0 / (60 + rank)
                per_leg.setdefault(h.chunk.chunk_id, {})[name] = h.score
                chunks[h.chunk.chunk_id] = h.chunk
        out = [Candidate(chunks[cid], s, s, {**per_leg[cid], "fused": s}) for cid, s in fused.items()]
        out.sort(key=lambda c: (-c.score, c.chunk_id))
        return out[:k]


def first_stage() -> Any:
    try:
        from evidence.rank.first_stage import FirstStage
    except (ImportError, ValueError):  # pragma: no cover - only while first_stage.py is broken
        return LegsFirstStage()
    return FirstStage()
