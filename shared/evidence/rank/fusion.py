"""Fusion of the lexical and dense legs: the options OpenSearch's processors offer.

- `rrf`: reciprocal rank fusion, sum of w / (rank_constant + rank) (score-ranker-processor).
- `minmax`: per-leg min-max normalisation, then the weighted arithmetic mean
  (normalization-processor, `min_max` + `arithmetic_mean`).
- `zscore`: per-leg z-score normalisation, then the weighted mean (`z_score`).

A chunk missing from a leg contributes that leg's floor (0 after min-max, the
leg's minimum z-score for z-score), so being found by one leg only is never
rewarded. Zero variance in a leg gives every chunk of that leg the same
normalised score (1.0 for min-max, 0.0 for z-score). Ties are broken by chunk id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from evidence.errors import ChoiceEnum, RequestValidationError
from evidence.rank.candidate import Candidate, sort_key
from evidence.records import SearchHit


class FusionMethod(ChoiceEnum):
    __field__ = "fusion"

    RRF = "rrf"
    MINMAX = "minmax"
    ZSCORE = "zscore"


@dataclass(frozen=True, slots=True)
class FusionConfig:
    method: FusionMethod = FusionMethod.RRF
    weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"lexical": 1.0, "dense": 1.0})
    )
    rank_constant: int = 60

    def __post_init__(self) -> None:
        if self.rank_constant < 1:
            raise RequestValidationError("rank_constant must be ≥ 1", field="rank_constant")
        if any(w < 0 for w in self.weights.values()) or not any(w > 0 for w in self.weights.values()):
            raise RequestValidationError("fusion weights must be ≥ 0 with at least one > 0", field="weights")


def _normalise(scores: Sequence[float], method: FusionMethod) -> tuple[list[float], float]:
    """Normalised scores and the floor given to chunks the leg did not return."""
    lo, hi = min(scores), max(scores)
    if method is FusionMethod.MINMAX:
        if hi == lo:
            return [1.0] * len(scores), 0.0
        return [(s - lo) / (hi - lo) for s in scores], 0.0
    n = len(scores)
    mean = sum(scores) / n
    var = sum((s - mean) ** 2 for s in scores) / n
    if var == 0.0:
        return [0.0] * n, 0.0
    std = var**0.5
    z = [(s - mean) / std for s in scores]
    return z, min(z)


def fuse(legs: Mapping[str, Sequence[SearchHit]], config: FusionConfig | None = None) -> list[Candidate]:
    """Fuse ranked legs (each best-first) into Candidates ordered by fused score."""
    config = config or FusionConfig()
    chunks: dict[str, SearchHit] = {}
    per_leg: dict[str, dict[str, float]] = {}
    fused: dict[str, float] = {}
    active = {name: hits for name, hits in legs.items() if hits and config.weights.get(name, 0.0) > 0}
    total_w = sum(config.weights.get(name, 0.0) for name in active) or 1.0
    for name, hits in active.items():
        w = config.weights.get(name, 0.0)
        raw = {h.chunk.chunk_id: h.score for h in hits}
        per_leg[name] = raw
        for h in hits:
            chunks.setdefault(h.chunk.chunk_id, h)
        if config.method is FusionMethod.RRF:
            for rank, h in enumerate(hits, start=1):
                fused[h.chunk.chunk_id] = fused.get(h.chunk.chunk_id, 0.0) + w / (config.rank_constant + rank)
            continue
        norm, floor = _normalise([h.score for h in hits], config.method)
        seen = dict(zip((h.chunk.chunk_id for h in hits), norm, strict=True))
        per_leg[name + ":floor"] = {"": floor}
        for cid, value in seen.items():
            fused[cid] = fused.get(cid, 0.0) + w * value / total_w
    if config.method is not FusionMethod.RRF:
        # Chunks a leg missed get that leg's floor.
        for name in active:
            floor = per_leg[name + ":floor"][""]
            if floor:
                w = config.weights.get(name, 0.0)
                for cid in fused:
                    if cid not in per_leg[name]:
                        fused[cid] += w * floor / total_w
    out: list[Candidate] = []
    for cid, score in fused.items():
        scores = {name: per_leg[name][cid] for name in active if cid in per_leg[name]}
        scores["fused"] = score
        out.append(
            Candidate(
                chunk=chunks[cid].chunk, score=score, first_stage_score=score, scores=MappingProxyType(scores)
            )
        )
    out.sort(key=sort_key)
    return out
