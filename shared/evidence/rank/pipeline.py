"""A profile: a named, ordered list of stages with defaults for every knob.

The service resolves a profile (`evidence.profiles.get_plugin(name).pipeline()`), validates the request's
overrides into `ProfileParams` (`Profile.params`), builds a `RankContext` and calls
`Profile.run(ctx)`. The first stage is a recall stage like any other (it returns the
candidates it found), so a profile can start with the hybrid first stage, a cascade of
lexical paths or a graph walk without the pipeline knowing which. `run` returns a plain
`RankOutcome`; building the API response is the service's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args, get_origin

import numpy as np
from annotated_types import Ge, Le

from evidence.errors import RequestValidationError
from evidence.model import Overrides
from evidence.rank.ahead import Ahead, StartsEarly
from evidence.rank.candidate import Candidate
from evidence.rank.context import ProfileParams, RankContext, Stage, StageRecord, Trace, run_stage


def _choices() -> dict[str, tuple[str, ...]]:
    """The allowed values of each override that is a choice (a Literal in the API model)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, f in Overrides.model_fields.items():
        literal = next((a for a in get_args(f.annotation) if get_origin(a) is Literal), None)
        if literal is not None:
            out[name] = tuple(get_args(literal))
    return out


CHOICES = _choices()


def _bounds() -> dict[str, tuple[float, float, bool]]:
    """(min, max, is_int) per numeric override field, read from the API model so there is one source."""
    out: dict[str, tuple[float, float, bool]] = {}
    for name, f in Overrides.model_fields.items():
        if name in CHOICES:
            continue
        lo = next(m.ge for m in f.metadata if isinstance(m, Ge))
        hi = next(m.le for m in f.metadata if isinstance(m, Le))
        out[name] = (float(lo), float(hi), "int" in str(f.annotation))  # type: ignore[arg-type]
    return out


BOUNDS = _bounds()


def validate_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Checked, typed overrides; RequestValidationError names the field and its range."""
    clean: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in BOUNDS and key not in CHOICES:
            raise RequestValidationError(
                f"unknown override {key!r}; valid: {', '.join(sorted([*BOUNDS, *CHOICES]))}", field=key
            )
        if value is None:
            continue
        if key in CHOICES:
            if value not in CHOICES[key]:
                raise RequestValidationError(f"{key} must be one of: {', '.join(CHOICES[key])}", field=key)
            clean[key] = value
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
class RankOutcome:
    """What a profile run produced: ranked hits, the follow-ups to append, and its trace."""

    hits: list[Candidate]
    followups: list[Candidate]
    stages: list[StageRecord]
    degraded: list[str]
    path_used: str
    #: A profile's own response body (`Trace.response`), read by its extras.
    response: Any = None
    #: What the answer signal reads instead of `hits` (`Trace.judged`); None: `hits`.
    judged: list[Candidate] | None = None


@dataclass(frozen=True)
class Profile:
    """A named pipeline: defaults for every knob and an explicit ordered list of stages."""

    name: str
    description: str
    defaults: ProfileParams
    stages: tuple[Stage, ...]
    #: Whether the service embeds the query for the stages (a stage that embeds its own text,
    #: like the coach engine's, says no).
    embeds_query: bool = True

    def params(self, overrides: Mapping[str, Any] | None = None) -> ProfileParams:
        return replace(self.defaults, **validate_overrides(overrides or {}))

    def with_stage(self, name: str, stage: Stage) -> Profile:
        """This profile with the stage called `name` replaced (e.g. a fixed first stage in tests)."""
        if not any(s.name == name for s in self.stages):
            raise ValueError(f"profile {self.name!r} has no stage {name!r}")
        return replace(self, stages=tuple(stage if s.name == name else s for s in self.stages))

    def start(self, ctx: RankContext) -> Ahead[Any] | None:
        """What the first stage can start before the query is embedded (`ctx` has no vector yet):
        the service embeds meanwhile and hands it back in `RankContext.ahead`."""
        first = self.stages[0] if self.stages else None
        return first.start(ctx) if isinstance(first, StartsEarly) else None

    def run(self, ctx: RankContext) -> RankOutcome:
        """Each stage in order on one context, starting from an empty list."""
        ctx = replace(ctx, trace=Trace())
        records: list[StageRecord] = []
        candidates: list[Candidate] = []
        for stage in self.stages:
            candidates, record = run_stage(stage, candidates, ctx)
            records.append(record)
        if ctx.explain:
            candidates = [c.with_note(f"kept: rank {i}") for i, c in enumerate(candidates, start=1)]
        return RankOutcome(
            hits=candidates,
            followups=list(ctx.trace.followups),
            stages=records,
            degraded=list(ctx.trace.degraded),
            path_used=ctx.trace.path + ("+rerank" if ctx.trace.reranked else ""),
            response=ctx.trace.response,
            judged=ctx.trace.judged,
        )


__all__ = ["BOUNDS", "Profile", "RankOutcome", "validate_overrides"]
