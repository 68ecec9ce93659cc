"""The stage lists of `default` and `vrm` (the registry of every profile is `evidence.profiles`).

Stage lists (the first stage fetches `first_stage_k` per leg and fuses them):

default  first_stage → followup_extraction → dedup → min_similarity → candidate_limit → rerank →
         followup_boost → rerank_cutoff → collapse_overlaps → per_document_cap → mmr → top_k → focus →
         guardrail
vrm      the same without focus, reranking against the criterion question when one is given
verbatim verbatim_cascade → guardrail (seed 002; evidence.verbatim.profile)
coach    first_stage → candidate_limit → rerank → graph → mmr → top_k → guardrail over knowledge-graph
         nodes (evidence/coach/profile.py; the coach endpoint runs its first three stages, docs/coach.md)

Every profile ends with the same `guardrail` stage (`rank.guardrail`: min_similarity, top_k,
max_chars), so the caller's bounds hold whatever the profile's own stages did.

The boost runs before the cutoff, as seed 001's own code orders it (`boosted[:n] if score >=
cutoff`): a follow-up document just under the cutoff is lifted over it. Every knob works in
every profile; the defaults decide what is on. `default` has follow-up extraction and boost
switched off (rounds 0, boost 1.0) and takes top 10; `vrm` carries seeds 000/001/003's
constants (docs/ranking.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evidence.rank.context import ProfileParams
from evidence.rank.dedup import ValueKind
from evidence.rank.first_stage import HybridRecall
from evidence.rank.guardrail import Guardrail
from evidence.rank.pipeline import Profile
from evidence.rank.stages import (
    MMR,
    CandidateLimit,
    CollapseOverlaps,
    DedupContent,
    FocusHits,
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


def _tail(*, calibrated_cutoff: bool = False, focus: FocusHits | None = None) -> tuple[Stage, ...]:
    return (
        FollowupDocumentBoost(),
        RelevancyCutoff(calibrated=calibrated_cutoff),
        CollapseOverlaps(),
        PerDocumentCap(),
        MMR(),
        TopK(),
        *((focus,) if focus is not None else ()),
        Guardrail(),
    )


def default_profile(*, expected: Callable[[str], Sequence[ValueKind]] | None = None) -> Profile:
    """`expected`: the kinds of value a question expects, for `focus` (the `default` plug-in
    passes the answer-type lexicon's, `profiles.default`)."""
    return Profile(
        name="default",
        description="hybrid first stage, rerank, top-k",
        defaults=DEFAULT_PARAMS,
        stages=(
            HybridRecall(),
            FollowupExtraction(),
            DedupContent(),
            MinSimilarity(),
            CandidateLimit(),
            Rerank(),
            *_tail(focus=FocusHits(expected=expected)),
        ),
    )


def vrm_profile() -> Profile:
    return Profile(
        name="vrm",
        description="vendor risk: linked follow-ups last, follow-up documents boosted (seeds 000/001/003)",
        defaults=VRM_PARAMS,
        stages=(
            HybridRecall(),
            FollowupExtraction(),
            DedupContent(),
            MinSimilarity(),
            CandidateLimit(),
            Rerank(use_criterion=True),
            # Without a reranker the cutoff reads a calibrated relevance (issue 25 item 6).
            *_tail(calibrated_cutoff=True),
        ),
    )
