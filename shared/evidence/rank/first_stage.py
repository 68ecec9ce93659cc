"""The first stage: lexical and dense legs on the backend, fused into one candidate list."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from evidence.errors import RequestValidationError
from evidence.model import StageTelemetry
from evidence.rank.candidate import Candidate, sort_key
from evidence.rank.fusion import FusionConfig, fuse
from evidence.records import ChunkKind, SearchHit
from evidence.search.base import Filters, SearchBackend, Vector


class RetrievalMode(StrEnum):
    LEXICAL = "bm25"
    DENSE = "dense"
    HYBRID = "hybrid"

    @classmethod
    def parse(cls, value: str) -> RetrievalMode:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise RequestValidationError(f"unknown mode {value!r}; valid: {valid}", field="mode") from None


@dataclass(frozen=True, slots=True)
class FirstStageResult:
    candidates: list[Candidate]
    telemetry: StageTelemetry


@dataclass(frozen=True, slots=True)
class FirstStage:
    """Runs each leg for `k` results (OpenSearch's hybrid does the same per sub-query) and fuses.

    Each leg fetches `max(k, leg_depth)` so fusion sees enough of both lists even for small k.
    """

    mode: RetrievalMode = RetrievalMode.HYBRID
    fusion: FusionConfig = field(default_factory=FusionConfig)
    leg_depth: int = 100
    name: str = "first_stage"

    def retrieve(
        self,
        backend: SearchBackend,
        index: str,
        *,
        query: str,
        vector: Vector | None,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> FirstStageResult:
        start = time.perf_counter()
        depth = max(k, self.leg_depth)
        legs: dict[str, Sequence[SearchHit]] = {}
        leg_ms: dict[str, float] = {}
        if self.mode in (RetrievalMode.LEXICAL, RetrievalMode.HYBRID):
            t = time.perf_counter()
            legs["lexical"] = backend.lexical(index, query, k=depth, filters=filters, kind=kind)
            leg_ms["lexical_ms"] = (time.perf_counter() - t) * 1000
        if self.mode in (RetrievalMode.DENSE, RetrievalMode.HYBRID) and vector is not None:
            t = time.perf_counter()
            legs["dense"] = backend.dense(index, vector, k=depth, filters=filters, kind=kind)
            leg_ms["dense_ms"] = (time.perf_counter() - t) * 1000
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
            **{f"{n}_hits": len(h) for n, h in legs.items()},
            **{n: round(v, 3) for n, v in leg_ms.items()},
        }
        tel = StageTelemetry(
            name=self.name,
            candidates_in=sum(len(h) for h in legs.values()),
            candidates_out=len(cands),
            ms=round((time.perf_counter() - start) * 1000, 3),
            detail=detail,
        )
        return FirstStageResult(cands, tel)


def describe(stage: FirstStage) -> Mapping[str, Any]:
    return {"mode": stage.mode.value, "fusion": stage.fusion.method.value, "leg_depth": stage.leg_depth}
