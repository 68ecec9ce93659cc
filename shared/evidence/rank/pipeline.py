"""Profiles run an explicit ordered list of stages after an injected first stage.

The service resolves a profile (`get_profile`), validates the request's overrides into
`ProfileParams` (`Profile.params`), builds a `RankContext` and calls `Profile.run(ctx,
first_stage)`. The first stage is a component like any other (`run([], ctx)` returns the fused
candidates), injected so the backend-specific recall can change without touching the profiles.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from annotated_types import Ge, Le

from evidence.errors import RequestValidationError
from evidence.model import Overrides, Plan, RetrieveRequest, RetrieveResponse, StageTelemetry, Telemetry
from evidence.rank.candidate import Candidate
from evidence.rank.stages import Stage, Trace

if TYPE_CHECKING:
    import numpy.typing as npt

    from evidence.rank.rerank import Reranker
    from evidence.search.base import SearchBackend


@dataclass(frozen=True, slots=True)
class ProfileParams:
    """Every knob of DESIGN.md §2. None switches the optional ones off."""

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


def _bounds() -> dict[str, tuple[float, float, bool]]:
    """(min, max, is_int) per override field, read from the API model so there is one source."""
    out: dict[str, tuple[float, float, bool]] = {}
    for name, f in Overrides.model_fields.items():
        lo = next(m.ge for m in f.metadata if isinstance(m, Ge))
        hi = next(m.le for m in f.metadata if isinstance(m, Le))
        out[name] = (float(lo), float(hi), "int" in str(f.annotation))  # type: ignore[arg-type]
    return out


BOUNDS = _bounds()


def validate_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Checked, typed overrides; RequestValidationError names the field and its range."""
    clean: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in BOUNDS:
            raise RequestValidationError(
                f"unknown override {key!r}; valid: {', '.join(sorted(BOUNDS))}", field=key
            )
        if value is None:
            continue
        lo, hi, is_int = BOUNDS[key]
        kind = "an integer" if is_int else "a number"
        ok_type = isinstance(value, int) if is_int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or (not is_int and not np.isfinite(value)):
            raise RequestValidationError(f"{key} must be {kind} in [{_fmt(lo)}, {_fmt(hi)}]", field=key)
        if not lo <= value <= hi:
            raise RequestValidationError(
                f"{key} must be in [{_fmt(lo)}, {_fmt(hi)}] (got {value})", field=key
            )
        clean[key] = int(value) if is_int else float(value)
    return clean


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class RankContext:
    index: str
    query: str
    query_vector: npt.NDArray[np.float32] | None
    criterion_question: str | None
    criterion_hash: str | None
    params: ProfileParams
    filters: Mapping[str, Any] | None
    explain: bool
    backend: SearchBackend
    reranker: Reranker | None
    #: Per-run side channel; `Profile.run` installs a fresh one.
    trace: Trace = field(default_factory=Trace, compare=False, repr=False)


@dataclass(frozen=True)
class RankOutcome:
    hits: list[Candidate]
    followups: list[Candidate]
    stages: list[StageTelemetry]
    degraded: list[str]
    path_used: str


def run_stage(
    stage: Stage, candidates: Sequence[Candidate], ctx: RankContext
) -> tuple[list[Candidate], StageTelemetry]:
    ctx.trace.detail = {}
    t0 = time.perf_counter()
    out = stage.run(candidates, ctx)
    ms = (time.perf_counter() - t0) * 1000.0
    detail = dict(ctx.trace.detail) or None
    return out, StageTelemetry(
        name=stage.name,
        candidates_in=len(candidates),
        candidates_out=len(out),
        ms=round(ms, 3),
        detail=detail,
    )


class FirstStageResultLike(Protocol):
    @property
    def candidates(self) -> list[Candidate]: ...

    @property
    def telemetry(self) -> StageTelemetry: ...


class BackendFirstStage(Protocol):
    """`rank.first_stage.FirstStage`'s shape: legs on the backend, fused."""

    @property
    def name(self) -> str: ...

    def retrieve(
        self,
        backend: SearchBackend,
        index: str,
        *,
        query: str,
        vector: Any,
        k: int,
        filters: Any = None,
    ) -> FirstStageResultLike: ...


def _run_first_stage(
    first_stage: Stage | BackendFirstStage, ctx: RankContext
) -> tuple[list[Candidate], StageTelemetry]:
    retrieve = getattr(first_stage, "retrieve", None)
    if retrieve is None:
        return run_stage(first_stage, [], ctx)  # type: ignore[arg-type]
    result = retrieve(
        ctx.backend,
        ctx.index,
        query=ctx.query,
        vector=ctx.query_vector,
        k=ctx.params.first_stage_k,
        filters=ctx.filters,
    )
    mode = getattr(first_stage, "mode", None)
    path = str(getattr(mode, "value", mode or "hybrid"))
    if path == "hybrid" and ctx.query_vector is None:
        path = "bm25"
    ctx.trace.path = path
    return list(result.candidates), result.telemetry


@dataclass(frozen=True)
class Profile:
    """A named pipeline: defaults for every knob and an explicit ordered list of stages."""

    name: str
    description: str
    defaults: ProfileParams
    stages: tuple[Stage, ...]

    def params(self, overrides: Mapping[str, Any] | None = None) -> ProfileParams:
        return replace(self.defaults, **validate_overrides(overrides or {}))

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]

    def run(self, ctx: RankContext, first_stage: Stage | BackendFirstStage) -> RankOutcome:
        """First stage, then each stage in order. `first_stage` is either a `Stage` (`run([], ctx)`
        returns the candidates) or an object with the lead's `retrieve(backend, index, query=,
        vector=, k=, filters=)` returning `.candidates` and `.telemetry`."""
        ctx = replace(ctx, trace=Trace())
        telemetry: list[StageTelemetry] = []
        candidates, tel = _run_first_stage(first_stage, ctx)
        telemetry.append(tel)
        for stage in self.stages:
            candidates, tel = run_stage(stage, candidates, ctx)
            telemetry.append(tel)
        if ctx.explain:
            candidates = [c.with_note(f"kept: rank {i}") for i, c in enumerate(candidates, start=1)]
        path = ctx.trace.path + ("+rerank" if ctx.trace.reranked else "")
        return RankOutcome(
            hits=candidates,
            followups=list(ctx.trace.followups),
            stages=telemetry,
            degraded=list(ctx.trace.degraded),
            path_used=path,
        )


def get_profile(name: str) -> Profile:
    """The registered profile; unknown names raise RequestValidationError listing valid ones."""
    from evidence.rank import profiles

    return profiles.get_profile(name)


__all__ = [
    "BOUNDS",
    "BackendFirstStage",
    "Profile",
    "ProfileParams",
    "RankContext",
    "RankOutcome",
    "get_profile",
    "run_request",
    "run_stage",
    "validate_overrides",
]


def _confidence(outcome: RankOutcome) -> float:
    """Top hit's reranker relevance if one ran, else its dense cosine (clipped to [0, 1])."""
    if not outcome.hits:
        return 1.0 if outcome.followups else 0.0
    top = outcome.hits[0].scores
    value = top.get("rerank", top.get("dense", 0.0))
    return round(min(1.0, max(0.0, float(value))), 4)


def run_request(
    service: Any, index: str, request: RetrieveRequest, plan: Plan, *, started: float
) -> RetrieveResponse:
    """retrieve(): profile + overrides → first stage → stages → evidence XML and JSON hits.

    `service` provides `backend`, `reranker` and `query_vector(index, text)` (EvidenceService).
    """
    from evidence.config import BackendKind, HybridMode
    from evidence.format.evidence import evidence_from_candidates
    from evidence.format.hits import to_followups, to_hits
    from evidence.rank.first_stage import first_stage_for

    profile = get_profile(request.profile)
    params = profile.params(request.overrides())
    criterion = request.criterion_question or (request.query if plan.criterion_hash else None)
    ctx = RankContext(
        index=index,
        query=request.query,
        query_vector=service.query_vector(index, request.query),
        criterion_question=criterion,
        criterion_hash=plan.criterion_hash,
        params=params,
        filters=plan.filters or None,
        explain=request.explain,
        backend=service.backend,
        reranker=service.reranker,
    )
    settings = service.settings
    server_hybrid = (
        settings.backend is BackendKind.OPENSEARCH and settings.opensearch_hybrid_mode is HybridMode.SERVER
    )
    outcome = profile.run(
        ctx, first_stage_for(ctx.backend, server_hybrid=server_hybrid, explain=request.explain)
    )
    doc = evidence_from_candidates(outcome.hits, outcome.followups)
    hits = to_hits(outcome.hits, explain=request.explain)
    return RetrieveResponse(
        hits=hits,
        followups=to_followups(outcome.followups),
        evidence_xml=doc.xml,
        valid_indexes=doc.valid_indexes,
        plan=plan,
        telemetry=Telemetry(
            stages=outcome.stages,
            path_used=outcome.path_used,
            degraded=outcome.degraded,
            total_ms=round((time.perf_counter() - started) * 1000.0, 3),
        ),
        can_answer=bool(hits or outcome.followups),
        confidence=_confidence(outcome),
        needs_clarification=False,
    )
