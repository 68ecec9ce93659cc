"""Passage-then-sentence span ranking: find the right passages first, then the right sentences in them.

Spans alone are found lexically (they have no vectors), and a sentence is short: BM25 over one
sentence is noisy, and the words that tie it to the question are often in its neighbours. The
passages it sits in are ranked far better (the hybrid first stage: fused BM25 + dense, with
score completion). So:

1. rank passages with the hybrid first stage (or BM25 when the index has no vectors);
2. take the spans of the top `passages` passages (one `lookup` by document), and their sentence
   BM25 against the question (one lexical query restricted to those documents);
3. score each span `passage_weight * p + (1 - passage_weight) * s`, where `p` is its passage's
   fused score min-max normalised over the top passages and `s` its sentence BM25 divided by
   the best sentence BM25 among the candidates; ties keep document then text order.

A span's passage is the top-ranked passage of its document that contains it (a document's
best passage when none does). Spans outside the top passages are not considered: the point is
to trust the passage ranking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evidence.records import Chunk, ChunkKind
from evidence.verbatim.spans import inside


@dataclass(frozen=True, slots=True)
class RankedSpan:
    chunk: Chunk
    score: float
    passage: float  # normalised passage score
    sentence: float  # normalised sentence BM25


@dataclass(frozen=True)
class SpanRanking:
    passages: int = 10
    first_stage_k: int = 100
    passage_weight: float = 0.5
    max_spans_per_document: int = 500

    def __post_init__(self) -> None:
        if self.passages < 1 or self.first_stage_k < self.passages:
            raise ValueError("passages must be >= 1 and first_stage_k >= passages")
        if not 0.0 <= self.passage_weight <= 1.0:
            raise ValueError("passage_weight must be in [0, 1]")

    def rank(
        self,
        backend: Any,
        index: str,
        query: str,
        *,
        vector: Any = None,
        k: int = 20,
        filters: Mapping[str, Any] | None = None,
    ) -> list[RankedSpan]:
        from evidence.rank.first_stage import FirstStage, RetrievalMode
        from evidence.search.scoped import bind_filters

        # Every read below stays within `filters`, the passages' and the spans' alike.
        backend = bind_filters(backend, filters)
        mode = RetrievalMode.HYBRID if vector is not None else RetrievalMode.LEXICAL
        found = FirstStage(mode=mode).retrieve(
            backend, index, query=query, vector=vector, k=self.first_stage_k
        )
        top = found.candidates[: self.passages]
        if not top:
            return []
        scores = [c.score for c in top]
        lo, hi = min(scores), max(scores)
        span_ = hi - lo
        pnorm = [(s - lo) / span_ if span_ > 0 else 1.0 for s in scores]
        docs = list(dict.fromkeys(c.chunk.document_id for c in top))
        doc_filter: dict[str, Any] = {"document_id": docs}
        spans = [
            h.chunk
            for h in backend.lookup(
                index, doc_filter, limit=self.max_spans_per_document * len(docs), kind=ChunkKind.SPAN
            )
        ]
        if not spans:
            return []
        lexical = backend.lexical(index, query, k=len(spans), filters=doc_filter, kind=ChunkKind.SPAN)
        bm25 = {h.chunk.chunk_id: float(h.score) for h in lexical}
        best_bm25 = max(bm25.values(), default=0.0)
        out = []
        for c in spans:
            p = _passage_score(c, top, pnorm)
            s = bm25.get(c.chunk_id, 0.0) / best_bm25 if best_bm25 > 0 else 0.0
            w = self.passage_weight
            out.append(RankedSpan(c, w * p + (1 - w) * s, p, s))
        out.sort(key=lambda r: (-r.score, r.chunk.document_id, r.chunk.char_start))
        return out[:k]


def _passage_score(span: Chunk, top: list[Any], pnorm: list[float]) -> float:
    best = None
    for c, p in zip(top, pnorm, strict=True):
        ch = c.chunk
        if ch.document_id != span.document_id:
            continue
        if inside(span, ch):
            return p
        if best is None:
            best = p
    return best if best is not None else 0.0
