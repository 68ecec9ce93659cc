"""`verbatim`: verbatim spans from a planned cascade (seed 002; `evidence.verbatim`).

Its own planner (rules, or Bedrock with the rule fallback, knowing the index's subjects), its
own answer signal (the cascade's grounding), and evidence as one `[SECTION]` block per section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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

        from evidence.verbatim.cascade import VerbatimCascade
        from evidence.verbatim.profile import VerbatimCascadeStage
        from evidence.verbatim.span_rank import IndexEmbed

        base = super().pipeline(env)
        if env is None:
            return base
        first, *rest = base.stages
        if not isinstance(first, VerbatimCascadeStage):
            return base
        trim = env.settings.verbatim_trim_spans_over
        if trim != first.cascade.config.trim_spans_over:
            cascade = first.cascade
            config = replace(cascade.config, trim_spans_over=trim)
            first = replace(first, cascade=VerbatimCascade(config, cascade.rules))
            base = replace(base, stages=(first, *rest))
        services = env.services
        if env.index is None or services is None:
            return base
        index = env.index
        # Built on first use only: a lexical-only index never loads the model.
        embedder = services.document_embedder
        stage = replace(first, embed=IndexEmbed(lambda: embedder(index)))
        if env.settings.refusal_context_paraphrase:
            cascade = stage.cascade
            config = replace(cascade.config, context_paraphrase=True)
            stage = replace(stage, cascade=type(cascade)(config, cascade.rules))
        return replace(base, stages=(stage, *rest))

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
