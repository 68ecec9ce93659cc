"""The profile registry: `default` and `vrm` now; `verbatim` and `coach` register here later.

Stage lists (after the injected first stage, which fetches `first_stage_k` per leg and fuses):

default  dedup → min_similarity → candidate_limit → rerank → rerank_cutoff → followup_boost →
         per_document_cap → mmr → top_k → max_chars
vrm      followup_extraction → dedup → min_similarity → candidate_limit → rerank(criterion) →
         rerank_cutoff → followup_boost → per_document_cap → mmr → top_k → max_chars

Every knob works in every profile; the defaults decide what is on. `default` has follow-up
extraction and boost switched off (rounds 0, boost 1.0) and takes top 10; `vrm` carries seeds
000/001/003's constants.
"""

from __future__ import annotations

from collections.abc import Callable

from evidence.errors import RequestValidationError
from evidence.rank.pipeline import Profile, ProfileParams
from evidence.rank.stages import (
    MMR,
    CandidateLimit,
    CharBudget,
    DedupContent,
    FollowupDocumentBoost,
    FollowupExtraction,
    MinSimilarity,
    PerDocumentCap,
    RelevancyCutoff,
    Rerank,
    Stage,
    TopK,
)

DEFAULT_PARAMS = ProfileParams(
    first_stage_k=100,
    rerank_k=70,
    top_k=10,
    rerank_cutoff=0.1,
    followup_max_rounds=0,
    followup_boost=1.0,
    followup_boost_cap=1.0,
)

#: Seeds 000 (first stage 100, rerank top 70, top 6, cutoff 0.1, 3 rounds), 001 (boost 1.15
#: capped at 1.0 on reranker scores) and 003 (min_similarity and max_chars off).
VRM_PARAMS = ProfileParams(
    first_stage_k=100,
    rerank_k=70,
    top_k=6,
    rerank_cutoff=0.1,
    followup_max_rounds=3,
    followup_boost=1.15,
    followup_boost_cap=1.0,
    min_similarity=None,
    max_chars=None,
)


def _tail() -> tuple[Stage, ...]:
    return (FollowupDocumentBoost(), RelevancyCutoff(), PerDocumentCap(), MMR(), TopK(), CharBudget())


def default_profile() -> Profile:
    return Profile(
        name="default",
        description="hybrid first stage, rerank, top-k",
        defaults=DEFAULT_PARAMS,
        stages=(
            FollowupExtraction(),
            DedupContent(),
            MinSimilarity(),
            CandidateLimit(),
            Rerank(),
            *_tail(),
        ),
    )


def vrm_profile() -> Profile:
    return Profile(
        name="vrm",
        description="vendor risk: linked follow-ups last, follow-up documents boosted (seeds 000/001/003)",
        defaults=VRM_PARAMS,
        stages=(
            FollowupExtraction(),
            DedupContent(),
            MinSimilarity(),
            CandidateLimit(),
            Rerank(use_criterion=True),
            *_tail(),
        ),
    )


_FACTORIES: dict[str, Callable[[], Profile]] = {"default": default_profile, "vrm": vrm_profile}
_CACHE: dict[str, Profile] = {}


def register_profile(name: str, factory: Callable[[], Profile]) -> None:
    """Later issues add `verbatim` and `coach` here."""
    _FACTORIES[name] = factory
    _CACHE.pop(name, None)


def profile_names() -> list[str]:
    return sorted(_FACTORIES)


def get_profile(name: str) -> Profile:
    if name not in _FACTORIES:
        raise RequestValidationError(
            f"unknown profile {name!r}; valid profiles: {', '.join(profile_names())}", field="profile"
        )
    if name not in _CACHE:
        _CACHE[name] = _FACTORIES[name]()
    return _CACHE[name]
