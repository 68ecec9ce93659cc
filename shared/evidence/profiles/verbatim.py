"""`verbatim`: verbatim spans from a planned cascade (seed 002; `evidence.verbatim`).

Its own planner (rules, or Bedrock with the rule fallback, knowing the index's subjects), its
own answer signal (the cascade's grounding), and evidence as one `[SECTION]` block per section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evidence.profiles.base import PipelinePlugin, ProfileEnv
from evidence.rank.pipeline import Profile, RankOutcome

if TYPE_CHECKING:
    from evidence.format.evidence import EvidenceDocument
    from evidence.model import Plan, PlanRequest
    from evidence.rank.candidate import Candidate
    from evidence.rank.confidence import AnswerSignal


class VerbatimPlugin(PipelinePlugin):
    name = "verbatim"
    scopes = True

    def build(self) -> Profile:
        from evidence.verbatim.profile import verbatim_profile

        return verbatim_profile()

    def pipeline(self, env: ProfileEnv | None = None) -> Profile:
        """The profile; with an index and a service, its cascade embeds spans for the span scorer
        with the index's document embedder (the store's embedding cache in front, so a span is
        embedded once)."""
        from dataclasses import replace

        from evidence.verbatim.profile import VerbatimCascadeStage
        from evidence.verbatim.span_rank import IndexEmbed

        base = super().pipeline(env)
        if env is None:
            return base
        first, *rest = base.stages
        if not isinstance(first, VerbatimCascadeStage):
            return base
        changes: dict[str, Any] = {}  # the settings the cascade's config reads
        if env.settings.verbatim_trim_spans_over != first.cascade.config.trim_spans_over:
            changes["trim_spans_over"] = env.settings.verbatim_trim_spans_over
        if env.settings.verbatim_span_mmr != first.cascade.config.span_mmr:
            changes["span_mmr"] = env.settings.verbatim_span_mmr
        if env.settings.verbatim_continue_intro != first.cascade.config.continue_intro:
            changes["continue_intro"] = env.settings.verbatim_continue_intro
        if env.settings.verbatim_continue_labels != first.cascade.config.continue_labels:
            changes["continue_labels"] = env.settings.verbatim_continue_labels
        services, index = env.services, env.index
        if services is not None and index is not None:
            # Built on first use only: a lexical-only index never loads the model.
            embedder = services.document_embedder
            first = replace(first, embed=IndexEmbed(lambda: embedder(index)))
            if env.settings.refusal_context_paraphrase:  # reads pieces with that embedder
                changes["context_paraphrase"] = True
        if changes:
            cascade = first.cascade
            first = replace(first, cascade=type(cascade)(replace(cascade.config, **changes), cascade.rules))
        return base if first is base.stages[0] else replace(base, stages=(first, *rest))

    def plan(self, request: PlanRequest, env: ProfileEnv) -> tuple[Plan, list[str]]:
        from evidence.verbatim.profile import index_subjects, plan_verbatim, to_plan_model

        known = index_subjects(env.backend, env.index, request.query) if env.index else []
        outcome = plan_verbatim(request.query, settings=env.settings, known_entities=known)
        return to_plan_model(request.query, outcome, filters=request.filters), outcome.degraded

    def answer_signal(self, query: str, outcome: RankOutcome, env: ProfileEnv) -> AnswerSignal:
        from evidence.verbatim.profile import cascade_signal

        return cascade_signal(query, outcome.hits)

    def bundle(self, kept: Sequence[Candidate], followups: Sequence[Candidate]) -> EvidenceDocument:
        from evidence.verbatim.profile import bundle_evidence

        return bundle_evidence(kept)


def plugin() -> VerbatimPlugin:
    return VerbatimPlugin()
