"""Recall stages: lexical and dense legs on the backend, fused into one candidate list.

`HybridRecall` is the first stage of the `default` and `vrm` profiles: our own fusion
(`FirstStage`), or the backend's server-side hybrid query (`ServerHybridFirstStage`) when the
context asks for it and the backend offers it. Both also have `retrieve(...)`, the same recall
outside a profile (evaluation, benchmarks).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from evidence.errors import ChoiceEnum
from evidence.rank.ahead import Ahead
from evidence.rank.candidate import Candidate, sort_key
from evidence.rank.context import RankContext
from evidence.rank.fusion import FusionConfig, FusionMethod, fuse
from evidence.records import ChunkKind, SearchHit
from evidence.search.base import Filters, HybridSearch, SearchReader, Vector


class RetrievalMode(ChoiceEnum):
    __field__ = "mode"

    LEXICAL = "bm25"
    DENSE = "dense"
    HYBRID = "hybrid"


@dataclass(frozen=True, slots=True)
class FirstStageResult:
    """Fused candidates, how many leg hits they came from, and what the stage did."""

    candidates: list[Candidate]
    considered: int
    detail: dict[str, Any]
    #: What recall actually ran: "hybrid", or the one leg there was ("bm25", "dense").
    path: str = "hybrid"


def _record(ctx: RankContext, result: FirstStageResult) -> list[Candidate]:
    """A recall stage's bookkeeping on the run's trace."""
    ctx.trace.path = result.path
    ctx.trace.considered = result.considered
    ctx.trace.detail.update(result.detail)
    return list(result.candidates)


def default_fusion() -> FusionConfig:
    """z-score normalisation, equal weights: the best untuned option measured (README, Quality)."""
    return FusionConfig(method=FusionMethod.ZSCORE)


def _vectors_of_hits(backend: SearchReader, index: str, lexical: Ahead[list[SearchHit]]) -> dict[str, Vector]:
    """The stored vectors of the lexical leg's hits, once it has them (none read for no hits)."""
    ids = [h.chunk.chunk_id for h in lexical.result()]
    return backend.vectors(index, ids) if ids else {}


@dataclass(frozen=True, slots=True)
class FirstStage:
    """Runs each leg for `max(k, leg_depth)` results and fuses them.

    With `complete` (the default), every candidate either leg found is scored by the other leg
    too before fusing: its cosine from the stored vector, its BM25 score from a lexical query
    restricted to those chunks (0 when no query term occurs in it). Fusion then compares true
    scores instead of imputing a floor for "not in that leg's top k", which is what lifts hybrid
    above both legs on SciFact (0.7331 → 0.7412 nDCG@10 with z-scores).

    The legs overlap where they wait on native code (`rank/ahead.py`): the lexical leg starts
    before the query is embedded (`start`), the dense leg starts when the query vector is there
    (the lexical leg may still be running), and the stored vectors of the lexical hits are read
    as soon as it ends, while the dense leg searches. The result is the same as running them one
    after another.
    """

    mode: RetrievalMode = RetrievalMode.HYBRID
    fusion: FusionConfig = field(default_factory=default_fusion)
    leg_depth: int = 100
    complete: bool = True
    name: str = "first_stage"

    def start(self, ctx: RankContext) -> Ahead[list[SearchHit]] | None:
        """The lexical leg, started while the service embeds the query (`Profile.start`)."""
        if self.mode is RetrievalMode.DENSE:
            return None
        backend, index, query, filters = ctx.backend, ctx.index, ctx.query, ctx.filters
        k = ctx.params.first_stage_k
        depth = max(k, self.leg_depth)
        return Ahead(
            lambda: backend.lexical(index, query, k=depth, filters=filters, kind=ChunkKind.PASSAGE),
            key=self._lexical_key(index, query, k, filters, ChunkKind.PASSAGE),
        )

    def _lexical_key(
        self, index: str, query: str, k: int, filters: Filters | None, kind: ChunkKind | None
    ) -> tuple[Any, ...]:
        return ("lexical", index, query, max(k, self.leg_depth), dict(filters or {}), kind)

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        stage = self
        if ctx.params.fusion is not None:
            method = FusionMethod.parse(ctx.params.fusion)
            stage = replace(self, fusion=replace(self.fusion, method=method))
        result = stage.retrieve(
            ctx.backend,
            ctx.index,
            query=ctx.query,
            vector=ctx.query_vector,
            k=ctx.params.first_stage_k,
            filters=ctx.filters,
            ahead=ctx.ahead,
        )
        return _record(ctx, result)

    def _complete_legs(
        self,
        *,
        backend: SearchReader,
        index: str,
        query: str,
        vector: Vector,
        legs: dict[str, Sequence[SearchHit]],
        filters: Filters | None,
        kind: ChunkKind | None,
        stored: Ahead[dict[str, Vector]] | None = None,
    ) -> dict[str, Sequence[SearchHit]]:
        lex = {h.chunk.chunk_id: h for h in legs["lexical"]}
        den = {h.chunk.chunk_id: h for h in legs["dense"]}
        need_lex = [cid for cid in den if cid not in lex]
        if need_lex:
            restricted = {**(filters or {}), "chunk_id": need_lex}
            for h in backend.lexical(index, query, k=len(need_lex), filters=restricted, kind=kind):
                lex[h.chunk.chunk_id] = h
            for cid in need_lex:
                if cid not in lex:  # no query term in it: BM25 is 0, not unknown
                    lex[cid] = SearchHit(chunk=den[cid].chunk, score=0.0, lexical=0.0)
        need_den = [cid for cid in lex if cid not in den]
        if need_den:
            q = np.asarray(vector, dtype=np.float32)
            # `stored`: the vectors of every lexical hit, read while the dense leg searched.
            found = stored.result() if stored is not None else backend.vectors(index, need_den)
            for cid in need_den:
                vec = found.get(cid)
                if vec is None:
                    continue
                sim = float(np.asarray(vec, dtype=np.float32) @ q)
                den[cid] = SearchHit(chunk=lex[cid].chunk, score=sim, dense=sim)
        elif stored is not None:
            stored.abandon()

        def ranked(hits: dict[str, SearchHit]) -> list[SearchHit]:
            return sorted(hits.values(), key=lambda h: (-h.score, h.chunk.chunk_id))

        return {"lexical": ranked(lex), "dense": ranked(den)}

    def retrieve(
        self,
        backend: SearchReader,
        index: str,
        *,
        query: str,
        vector: Vector | None,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
        ahead: Ahead[Any] | None = None,
    ) -> FirstStageResult:
        """`ahead`: the lexical leg `start` began, used when it was started for these inputs.
        Telemetry's `lexical_ms` is then the time waited for it (`lexical_ahead` says so)."""
        depth = max(k, self.leg_depth)
        legs: dict[str, Sequence[SearchHit]] = {}
        leg_ms: dict[str, float] = {}
        early = ahead is not None and ahead.matches(self._lexical_key(index, query, k, filters, kind))
        runs_dense = self.mode in (RetrievalMode.DENSE, RetrievalMode.HYBRID) and vector is not None
        # A lexical leg started early may outlast the embedding (at 1M passages it did, by 2-5 ms
        # on average, 7-9 at p95): the dense leg does not wait for it; it is joined after.
        pending = ahead if early and runs_dense and self.mode is RetrievalMode.HYBRID else None
        if self.mode in (RetrievalMode.LEXICAL, RetrievalMode.HYBRID) and pending is None:
            t = time.perf_counter()
            if early:
                assert ahead is not None
                legs["lexical"] = ahead.result()
            else:
                legs["lexical"] = backend.lexical(index, query, k=depth, filters=filters, kind=kind)
            leg_ms["lexical_ms"] = (time.perf_counter() - t) * 1000
        stored: Ahead[dict[str, Vector]] | None = None
        if runs_dense:
            assert vector is not None
            if self.complete and pending is not None:
                # Read as soon as the lexical leg ends, on the pool, while dense searches.
                stored = Ahead(partial(_vectors_of_hits, backend, index, pending))
            elif self.complete and legs.get("lexical"):
                ids = [h.chunk.chunk_id for h in legs["lexical"]]
                stored = Ahead(lambda: backend.vectors(index, ids))
            t = time.perf_counter()
            try:
                legs["dense"] = backend.dense(index, vector, k=depth, filters=filters, kind=kind)
                leg_ms["dense_ms"] = (time.perf_counter() - t) * 1000
                if pending is not None:
                    t = time.perf_counter()
                    legs = {"lexical": pending.result(), **legs}  # the legs' order as ever: fusion's too
                    leg_ms["lexical_ms"] = (time.perf_counter() - t) * 1000
            except BaseException:
                if stored is not None:
                    stored.abandon()
                raise
        result = self.fuse_legs(
            backend,
            index,
            query=query,
            vector=vector,
            k=k,
            legs=legs,
            filters=filters,
            kind=kind,
            leg_ms=leg_ms,
            stored=stored,
        )
        if early:
            result.detail["lexical_ahead"] = True
        return result

    def fuse_legs(
        self,
        backend: SearchReader,
        index: str,
        *,
        query: str,
        vector: Vector | None,
        k: int,
        legs: dict[str, Sequence[SearchHit]],
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
        leg_ms: dict[str, float] | None = None,
        stored: Ahead[dict[str, Vector]] | None = None,
    ) -> FirstStageResult:
        """Complete (when on) and fuse legs already fetched, by this stage or by a backend.
        `stored`: the lexical hits' vectors, already being read (`retrieve`)."""
        leg_ms = dict(leg_ms or {})
        if len(legs) == 2 and self.complete and vector is not None:
            t = time.perf_counter()
            legs = self._complete_legs(
                backend=backend,
                index=index,
                query=query,
                vector=vector,
                legs=legs,
                filters=filters,
                kind=kind,
                stored=stored,
            )
            leg_ms["complete_ms"] = (time.perf_counter() - t) * 1000
        elif stored is not None:
            stored.abandon()
        if len(legs) == 1:
            ((name, hits),) = legs.items()
            cands = [
                Candidate(
                    chunk=h.chunk,
                    score=h.score,
                    first_stage_score=h.score,
                    scores=MappingProxyType({name: h.score, "fused": h.score}),
                )
                for h in hits
            ]
            cands.sort(key=sort_key)
        else:
            cands = fuse(legs, self.fusion)
        cands = cands[:k]
        detail: dict[str, Any] = {
            "mode": self.mode.value,
            "fusion": self.fusion.method.value,
            "complete": self.complete,
            **{f"{n}_hits": len(h) for n, h in legs.items()},
            **{n: round(v, 3) for n, v in leg_ms.items()},
        }
        path = "bm25" if self.mode is RetrievalMode.HYBRID and vector is None else self.mode.value
        return FirstStageResult(cands, sum(len(h) for h in legs.values()), detail, path)


@dataclass(frozen=True, slots=True)
class ServerHybridFirstStage:
    """OpenSearch's server-side hybrid: one `hybrid` query through the search pipeline.

    Used when the backend offers `hybrid` and `opensearch_hybrid_mode=server`; the fused
    ranking comes from the cluster's processors. Without a query vector it degrades to the
    lexical leg.
    """

    explain: bool = False
    name: str = "first_stage"
    mode: RetrievalMode = RetrievalMode.HYBRID

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        result = replace(self, explain=ctx.explain).retrieve(
            ctx.backend,
            ctx.index,
            query=ctx.query,
            vector=ctx.query_vector,
            k=ctx.params.first_stage_k,
            filters=ctx.filters,
        )
        return _record(ctx, result)

    def retrieve(
        self,
        backend: SearchReader,
        index: str,
        *,
        query: str,
        vector: Vector | None,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> FirstStageResult:
        if not isinstance(backend, HybridSearch) or vector is None:
            return FirstStage(
                mode=RetrievalMode.LEXICAL if vector is None else RetrievalMode.HYBRID
            ).retrieve(backend, index, query=query, vector=vector, k=k, filters=filters, kind=kind)
        result = backend.hybrid(
            index, query, vector, k=k, filters=filters, kind=kind, pagination_depth=k, explain=self.explain
        )
        if result.fused is None:  # the backend chose client mode: fuse its two legs here
            return FirstStage().fuse_legs(
                backend,
                index,
                query=query,
                vector=vector,
                k=k,
                filters=filters,
                kind=kind,
                legs={"lexical": result.lexical, "dense": result.dense},
            )
        lex = {h.chunk.chunk_id: h.score for h in result.lexical}
        den = {h.chunk.chunk_id: h.score for h in result.dense}
        cands: list[Candidate] = []
        for h in result.fused[:k]:
            scores = {"fused": h.score}
            if h.chunk.chunk_id in lex:
                scores["lexical"] = lex[h.chunk.chunk_id]
            if h.chunk.chunk_id in den:
                scores["dense"] = den[h.chunk.chunk_id]
            cands.append(
                Candidate(
                    chunk=h.chunk, score=h.score, first_stage_score=h.score, scores=MappingProxyType(scores)
                )
            )
        cands.sort(key=sort_key)
        detail = {"mode": "server-hybrid", "fusion": result.fusion or "pipeline"}
        return FirstStageResult(cands, len(result.fused), detail)


@dataclass(frozen=True, slots=True)
class HybridRecall:
    """The first stage of `default` and `vrm`: the cluster's hybrid pipeline when the context
    asks for it (`server_hybrid`) and the backend offers one, else our own fusion."""

    ours: FirstStage = field(default_factory=FirstStage)
    name: str = "first_stage"

    def _server(self, ctx: RankContext) -> bool:
        # A fusion the request names is ours to run: the cluster's pipeline has its own, fixed.
        return ctx.server_hybrid and isinstance(ctx.backend, HybridSearch) and ctx.params.fusion is None

    def start(self, ctx: RankContext) -> Ahead[list[SearchHit]] | None:
        return None if self._server(ctx) else self.ours.start(ctx)

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        if self._server(ctx):
            return ServerHybridFirstStage().run(candidates, ctx)
        return self.ours.run(candidates, ctx)
