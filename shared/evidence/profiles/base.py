"""The profile protocol: everything that differs between profiles, behind one small interface.

The service runs every request the same way (`EvidenceService.run_profile`):

    plan → scope → stages → answer signal → withhold floor → span check → bundle → extras

and asks the request's profile for each step that can differ. A profile is one module in
`evidence.profiles` with a `plugin()` factory and one line in the registry
(`evidence.profiles._FACTORIES`); the service never names one.

`PipelinePlugin` is the shared behaviour (rule plan, the dense/lexical answer signal, the
`<index_N>` evidence bundle, `path_used` as the only extra): a profile overrides what it changes.
A profile registered as a bare `rank.pipeline.Profile` (`register_profile`) gets it unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evidence.errors import EvidenceError

if TYPE_CHECKING:
    import numpy as np

    from evidence.coach.service import CoachAnswering
    from evidence.config import Settings
    from evidence.embed.base import Embedder
    from evidence.embed.pieces import EmbedTokens
    from evidence.format.evidence import EvidenceDocument
    from evidence.model import Plan, PlanRequest
    from evidence.rank.candidate import Candidate
    from evidence.rank.confidence import AnswerSignal
    from evidence.rank.pipeline import Profile, RankOutcome
    from evidence.rank.rerank import Reranker
    from evidence.search.base import SearchReader

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProfileServices:
    """What a profile may use of the service beyond its view of the index: the index's document
    embedder (the verbatim cascade's span embeddings, through the store's embedding cache) and
    the coach's answering (`CoachRuntime.answering`: the runtime's `coach` alone; the runtime,
    whose warm-up and per-stage cost estimates live as long as the process, stays the service's).

    Functions, not the service: the service holds the backend itself (its writes, the whole
    index), and a profile that reached it there would read past the request's filters. Python
    is no sandbox (a closure's cells can be read), so this keeps honest code honest: no attribute
    of a profile's environment is the unfiltered backend, and mypy refuses one."""

    document_embedder: Callable[[str], Embedder]
    coach_runtime: Callable[[], CoachAnswering]


@dataclass
class ProfileEnv:
    """What a profile may use, handed down by the service (a profile never calls back up).

    `backend` is the index seen through the request's filters (`search.scoped.bind_filters`):
    every read a profile makes, and every read of its ranking, stays within the request's
    documents without passing the filters on; it reads only. `services` is what else a profile
    may use of the service (`ProfileServices`: the document embedder, the coach's runtime), never
    the service itself; `payload` is the request of a profile's own
    endpoint (the coach's `CoachRequest`), None on `POST /retrieve`.
    """

    backend: SearchReader
    settings: Settings
    index: str | None = None
    embedder_id: str = ""
    reranker: Reranker | None = None
    query_vector: np.ndarray | None = None
    services: ProfileServices | None = None
    payload: Any = None
    degraded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Extras:
    """What a profile adds to the response: the path it took, whether it asks back, and the body
    of its own endpoint (the coach's answer / clarify / decline), if it has one."""

    path_used: str
    needs_clarification: bool = False
    response: Any = None


class ProfilePlugin(Protocol):
    """One profile's whole behaviour (see the module docstring for when each step runs)."""

    name: str

    def pipeline(self, env: ProfileEnv | None = None) -> Profile:
        """The stages and their defaults (`env` None: the profile as listed, for tools and tests)."""
        ...

    def plan(self, request: PlanRequest, env: ProfileEnv) -> tuple[Plan, list[str]]:
        """The plan and any degradation markers (an LLM planner that fell back to the rules)."""
        ...

    def scope(self, query: str, plan: Plan, env: ProfileEnv) -> Plan:
        """The plan with any filters the question implies (the document it names)."""
        ...

    def answer_signal(self, query: str, outcome: RankOutcome, env: ProfileEnv) -> AnswerSignal:
        """`can_answer` / `confidence` of this outcome."""
        ...

    def bundle(self, kept: Sequence[Candidate], followups: Sequence[Candidate]) -> EvidenceDocument:
        """The evidence an LLM reads (`evidence_xml`, `valid_indexes`)."""
        ...

    def extras(self, outcome: RankOutcome) -> Extras:
        """The response's profile-specific parts."""
        ...


class PipelinePlugin:
    """The shared behaviour; a profile subclasses it and overrides what it changes.

    `scopes`: a question naming a document is scoped to it (`verbatim.scope`), unless the caller
    chose documents. `grounded`: the grounding check may refuse (`verbatim.grounding`).
    `criterion_from_query`: the question is its own criterion (the follow-up cache key).
    """

    name: str = ""
    scopes: bool = False
    grounded: bool = False
    criterion_from_query: bool = False

    def __init__(self, profile: Profile | None = None) -> None:
        self._profile = profile
        self.name = profile.name if profile is not None else type(self).name

    def build(self) -> Profile:
        raise NotImplementedError(f"profile {self.name!r} has no stages")

    def pipeline(self, env: ProfileEnv | None = None) -> Profile:
        if self._profile is None:
            self._profile = self.build()
        return self._profile

    def plan(self, request: PlanRequest, env: ProfileEnv) -> tuple[Plan, list[str]]:
        from evidence.plan.rules import rule_plan

        return rule_plan(request, criterion_from_query=self.criterion_from_query), []

    def scope(self, query: str, plan: Plan, env: ProfileEnv) -> Plan:
        # seed 003's defaults must not change which references `vrm` selects; a caller's own
        # `document_id` filter wins.
        if not self.scopes or env.index is None or "document_id" in (plan.filters or {}):
            return plan
        from evidence.verbatim.scope import named_documents

        ids = named_documents(env.backend, env.index, query)
        if not ids:
            return plan
        # The plan's filters are the request's (returned to the caller) and the scope's documents.
        return plan.model_copy(update={"filters": {**(plan.filters or {}), "document_id": ids}})

    def answer_signal(self, query: str, outcome: RankOutcome, env: ProfileEnv) -> AnswerSignal:
        from evidence.rank.confidence import answer_signal

        # The hits in the order the signal's models were fitted on, when a stage returned them in
        # another (`RankOutcome.judged`: `focus`'s `anchor_order`); else the hits returned.
        hits = outcome.hits if outcome.judged is None else outcome.judged
        signal = answer_signal(
            query,
            hits,
            outcome.followups,
            cosines=head_cosines(env, hits),
            embedder_id=env.embedder_id,
            min_confidence=env.settings.answer_min_confidence,
        )
        if self.grounded and hits:
            from evidence.verbatim.cascade import question_groups
            from evidence.verbatim.grounding import apply_grounding

            floor = env.settings.answer_min_grounding
            signal = apply_grounding(
                query,
                hits,
                signal,
                floor,
                question_groups(query),
                ranker=agreement_ranker(env, query),
                counter=index_counter(env, query),
                tokens=refusal_tokens(env),
            )
        return signal

    def bundle(self, kept: Sequence[Candidate], followups: Sequence[Candidate]) -> EvidenceDocument:
        from evidence.format.evidence import evidence_from_candidates

        return evidence_from_candidates(kept, followups)

    def extras(self, outcome: RankOutcome) -> Extras:
        return Extras(path_used=outcome.path_used)


def agreement_ranker(env: ProfileEnv, query: str) -> Callable[[Sequence[str]], float | None] | None:
    """The refusal signal's `agreement` over given documents, bound to the index and the query
    (`verbatim.grounding.passage_agreement`); None without an index or a query vector."""
    if env.index is None or env.query_vector is None:
        return None
    from evidence.verbatim.grounding import passage_agreement

    index, vector = env.index, env.query_vector
    return lambda documents: passage_agreement(env.backend, index, query, vector, documents)


def refusal_tokens(env: ProfileEnv) -> EmbedTokens | None:
    """The word-piece embedder the refusal signal reads paraphrases in context with
    (`EVIDENCE_REFUSAL_CONTEXT_PARAPHRASE`, `verbatim.grounding.paraphrased_in_context`): the
    index's document embedder's (the store's word-piece cache in front), on a dense index; else
    None (the static table)."""
    if not env.settings.refusal_context_paraphrase or env.index is None or env.query_vector is None:
        return None
    if env.services is None:
        return None
    from evidence.verbatim.span_rank import IndexEmbed

    build, index = env.services.document_embedder, env.index
    return IndexEmbed(lambda: build(index)).tokens()


def index_counter(env: ProfileEnv, query: str) -> Callable[[Sequence[str]], Mapping[str, int] | None] | None:
    """The refusal signal's passage counts of the question's terms in the index
    (`verbatim.grounding.index_df`), bound to the index and the query; within the request's
    filters, as every read of `env.backend` is. None without an index."""
    if env.index is None:
        return None
    from evidence.verbatim.grounding import index_df

    index = env.index
    return lambda words: index_df(env.backend, index, words, query)


def head_cosines(env: ProfileEnv, hits: Sequence[Candidate]) -> list[float]:
    """The answerability signal's cosines: the first stage's dense scores, else the stored
    vectors' (server-side hybrid without explain returns fused scores only)."""
    from evidence.rank.confidence import head_cosines as cosines
    from evidence.rank.confidence import missing_cosines

    stored: dict[str, np.ndarray] = {}
    missing = missing_cosines(hits)
    if missing and env.query_vector is not None and env.index is not None:
        try:
            stored = dict(env.backend.vectors(env.index, missing))
        except EvidenceError as exc:
            log.warning("answerability: vectors unavailable: %s", exc)
            env.degraded.append("answer:vectors_unavailable")
    return cosines(hits, stored, env.query_vector)


__all__ = ["Extras", "PipelinePlugin", "ProfileEnv", "ProfilePlugin", "head_cosines"]
