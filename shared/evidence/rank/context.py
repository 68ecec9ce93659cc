"""What every ranking stage shares: its parameters, the run's context and trace, the Stage shape.

A profile runs an ordered list of stages on one `RankContext`; the first stage of a profile
is a recall stage (it ignores its empty input and returns the candidates it found), every
later stage reorders, rescores or drops what it is given. Stages never build API responses:
`Profile.run` returns a plain `RankOutcome`, and the service turns that into the edge model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from evidence.rank.candidate import Candidate

if TYPE_CHECKING:
    import numpy.typing as npt

    from evidence.rank.ahead import Ahead
    from evidence.rank.rerank import Reranker
    from evidence.search.base import SearchReader


@dataclass(frozen=True, slots=True)
class ProfileParams:
    """Every per-request knob (docs/ranking.md, "Knobs"). None switches the optional ones off."""

    first_stage_k: int = 100
    rerank_k: int = 70
    top_k: int = 10
    rerank_cutoff: float = 0.1
    followup_max_rounds: int = 0
    followup_boost: float = 1.0
    followup_boost_cap: float | None = 1.0
    min_similarity: float | None = None
    max_chars: int | None = None
    mmr_lambda: float | None = None
    max_chunks_per_document: int | None = None
    withhold_below: float | None = None
    #: First-stage fusion ("zscore", "minmax", "rrf"); None = the stage's own (z-score).
    fusion: str | None = None


@dataclass
class Trace:
    """Mutable per-run side channel shared by the stages of one `Profile.run`.

    `detail` and `considered` are per stage: `run_stage` resets them before each stage and
    reads them after it (`considered` lets a recall stage report how many hits its legs
    returned, since its input list is empty by construction).
    """

    followups: list[Candidate] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    considered: int | None = None
    path: str = "hybrid"
    reranked: bool = False
    #: A profile's own response body (the coach's answer / clarify / decline), for its extras.
    response: Any = None
    #: The hits the answer signal reads instead of the returned ones, when a stage returns them in
    #: another order than the one the signal was fitted on (`focus`'s `anchor_order`: the fused
    #: order, `rank.dedup.JUDGE_FUSED`); the guardrail cuts them as it cuts the hits. None: the hits.
    judged: list[Candidate] | None = None

    def degrade(self, marker: str) -> None:
        if marker not in self.degraded:
            self.degraded.append(marker)

    def drop(self, ctx: RankContext, candidate: Candidate, reason: str) -> None:
        if ctx.explain:
            self.detail.setdefault("dropped", []).append({"chunk_id": candidate.chunk_id, "reason": reason})


@dataclass(frozen=True)
class RankContext:
    """Everything a stage may read about the request; `trace` is the only mutable part."""

    index: str
    query: str
    query_vector: npt.NDArray[np.float32] | None
    criterion_question: str | None
    criterion_hash: str | None
    params: ProfileParams
    filters: Mapping[str, Any] | None
    explain: bool
    #: The index as the request may read it: on `run_profile`'s path the backend seen through the
    #: request's filters (`search.scoped`), so a stage's read stays within them whatever `filters`
    #: it passes (`filters` above are the plan's: the request's and the scope's documents).
    backend: SearchReader
    reranker: Reranker | None
    #: Use the backend's own hybrid query (OpenSearch's search pipeline) when it offers one.
    server_hybrid: bool = False
    #: The request's plan (`evidence.model.Plan`), for stages that follow it (the verbatim cascade).
    plan: Any = None
    #: Work the recall stage started before the query was embedded (`Profile.start`); the stage
    #: uses it only when its key matches what it would have run.
    ahead: Ahead[Any] | None = field(default=None, compare=False, repr=False)
    #: Per-run side channel; `Profile.run` installs a fresh one.
    trace: Trace = field(default_factory=Trace, compare=False, repr=False)


@runtime_checkable
class Stage(Protocol):
    """A ranking step: `run` returns a NEW list drawn from its input (recall stages: found)."""

    @property
    def name(self) -> str: ...

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]: ...


@dataclass(frozen=True, slots=True)
class StageRecord:
    """What one stage did, for telemetry: counts in and out, wall time, its own details."""

    name: str
    candidates_in: int
    candidates_out: int
    ms: float
    detail: Mapping[str, Any] | None = None


def run_stage(
    stage: Stage, candidates: Sequence[Candidate], ctx: RankContext
) -> tuple[list[Candidate], StageRecord]:
    ctx.trace.detail = {}
    ctx.trace.considered = None
    t0 = time.perf_counter()
    out = stage.run(candidates, ctx)
    ms = (time.perf_counter() - t0) * 1000.0
    considered = ctx.trace.considered
    return out, StageRecord(
        name=stage.name,
        candidates_in=len(candidates) if considered is None else considered,
        candidates_out=len(out),
        ms=round(ms, 3),
        detail=dict(ctx.trace.detail) or None,
    )


__all__ = ["ProfileParams", "RankContext", "Stage", "StageRecord", "Trace", "run_stage"]
