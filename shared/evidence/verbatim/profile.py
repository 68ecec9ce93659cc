"""The `verbatim` profile (seed 002): plan → cascade stage → top-k / budget; evidence as `[SECTION]` blocks.

The service plans a verbatim request with `plan_verbatim` (rules, or Bedrock with the rule
fallback), puts the plan on the `RankContext`, and runs the profile: `VerbatimCascadeStage` is its
recall stage (it returns the spans of the first cascade path that found evidence and names that
path in `trace.path`), bounded by the request's `top_k` and `max_chars` (the cascade's caps, 8
spans and 1,500 characters, are the profile's defaults), then the `guardrail` every profile ends
with (`rank.guardrail`: the similarity floor). Before the response
leaves, `verify_spans` checks every span against the stored source, and `bundle_evidence` turns
the spans into one evidence entry per section.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evidence.ids import normalize_question
from evidence.ingest.sections import ENTITY_NAMES_KEY
from evidence.plan.llm import PlanOutcome, rule_outcome
from evidence.plan.verbatim import RulePlan
from evidence.rank.candidate import Candidate
from evidence.records import ChunkKind
from evidence.verbatim.cascade import CascadeConfig, VerbatimCascade
from evidence.verbatim.grounding import grounding_confidence
from evidence.verbatim.multisection import section_blocks

if TYPE_CHECKING:
    from evidence.config import Settings
    from evidence.format.evidence import EvidenceDocument
    from evidence.model import Plan
    from evidence.rank.confidence import AnswerSignal
    from evidence.rank.context import RankContext
    from evidence.rank.pipeline import Profile

PROFILE = "verbatim"


def named_ids(value: Any) -> list[str] | None:
    """The document ids a `document_id` filter names, as the backends compare them
    (`search.base.filter_value`: a request's `5` names document "5"); None for no filter or an
    empty list. A request's filter value may be any JSON scalar (`model.MetaScalar`), and
    `list(5)` was a 500."""
    from evidence.search.base import filter_value, filter_values

    if value is None:
        return None
    return [filter_value(v) for v in filter_values(value)] or None


def index_subjects(backend: Any, index: str, question: str, *, k: int = 10) -> list[str]:
    """Subject names of the documents best matching the question (what the rule planner may
    recognise as the entity): one lexical query over passages, of the documents `backend` reads
    (on a request, those within its filters, `search.scoped`: the plan is returned to the caller,
    and another tenant's product name must not appear in it)."""
    names: dict[str, None] = {}
    for h in backend.lexical(index, question, k=k, kind=ChunkKind.PASSAGE):
        listed = h.chunk.metadata.get(ENTITY_NAMES_KEY)
        if isinstance(listed, list):
            for n in listed:
                names.setdefault(str(n), None)
    return list(names)


def plan_verbatim(
    question: str,
    *,
    settings: Settings | None = None,
    known_entities: Sequence[str] = (),
    planner: Any = None,
) -> PlanOutcome:
    """Bedrock when the settings ask for it (`EVIDENCE_PLANNER=bedrock`), else the rules."""
    if planner is None and settings is not None:
        planner = get_llm_planner(settings)
    if planner is not None:
        outcome: PlanOutcome = planner.plan(question, known_entities=known_entities)
        return outcome
    return rule_outcome(question, known_entities=known_entities)


_PLANNERS: dict[tuple[str, str | None, float], Any] = {}


def get_llm_planner(settings: Settings) -> Any:
    """The Bedrock planner for these settings (cached: warm Lambdas reuse the client), or None."""
    from evidence.config import PlannerKind

    if settings.planner is not PlannerKind.BEDROCK:
        return None
    key = (settings.bedrock_planner_model, settings.aws_region, settings.planner_timeout_s)
    if key not in _PLANNERS:
        from evidence.plan.llm import BedrockPlanner

        _PLANNERS[key] = BedrockPlanner(
            model_id=settings.bedrock_planner_model,
            region=settings.aws_region,
            timeout_s=settings.planner_timeout_s,
        )
    return _PLANNERS[key]


def to_plan_model(question: str, outcome: PlanOutcome, *, filters: dict[str, Any] | None = None) -> Plan:
    from evidence.model import Plan

    p = outcome.plan
    return Plan(
        query=question,
        normalized_query=normalize_question(question),
        criterion_hash=None,
        profile=PROFILE,
        query_mode=p.query_mode,
        entity=p.entity,
        attribute=p.attribute,
        candidate_sections=list(p.candidate_sections),
        search_phrases=list(p.search_phrases),
        extraction_level=p.extraction_level,
        filters=dict(filters or {}),
        planner=outcome.planner,
    )


def rule_plan_of(plan: Any) -> RulePlan:
    return RulePlan(
        entity=plan.entity,
        query_mode=plan.query_mode,
        attribute=plan.attribute,
        candidate_sections=tuple(plan.candidate_sections),
        search_phrases=tuple(plan.search_phrases),
        extraction_level=plan.extraction_level,
    )


@dataclass(frozen=True)
class VerbatimCascadeStage:
    """Recall stage of the verbatim profile: the cascade, on the plan the service made."""

    cascade: VerbatimCascade = field(default_factory=VerbatimCascade)
    name: str = "verbatim_cascade"
    #: Embeds span texts for the span scorer's cosines (the index's embedder behind the store's
    #: cache); None: spans are ranked without them.
    embed: Any = None

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        plan: Any = getattr(ctx, "plan", None)
        if plan is None or getattr(plan, "profile", PROFILE) != PROFILE:
            known = index_subjects(ctx.backend, ctx.index, ctx.query)
            plan = rule_outcome(ctx.query, known_entities=known).plan
        named = named_ids((ctx.filters or {}).get("document_id"))
        # The cascade's caps are the profile's defaults; the request's top_k and budget bound it.
        cascade = VerbatimCascade(
            self.cascade.config.bounded(ctx.params.top_k, ctx.params.max_chars), self.cascade.rules
        )
        result = cascade.run(
            ctx.backend,
            ctx.index,
            ctx.query,
            rule_plan_of(plan),
            query_vector=ctx.query_vector,
            documents=named,
            embed=self.embed,
        )
        ctx.trace.path = result.path_used
        ctx.trace.considered = sum(t.found for t in result.tried)
        ctx.trace.detail = {
            "path_used": result.path_used,
            "entity": result.entity,
            "sections": result.sections,
            "grounding": result.grounding,
            "missing": result.missing,
            **({"refused": result.refused} if result.refused else {}),
            "tried": [{"path": t.path, "found": t.found, "ms": t.ms, "note": t.note} for t in result.tried],
        }
        return [
            Candidate(
                chunk=h.chunk,
                score=h.score,
                first_stage_score=h.score,
                scores={
                    "cascade": h.score,
                    "grounding": result.grounding,
                    "confidence": grounding_confidence(
                        result.grounding, self.cascade.floor(result.path_used)
                    ),
                },
            )
            for h in result.hits
        ]


def verbatim_profile(config: CascadeConfig | None = None) -> Profile:
    from evidence.rank.context import ProfileParams
    from evidence.rank.guardrail import Guardrail
    from evidence.rank.pipeline import Profile

    cascade = VerbatimCascade(config)
    cfg = cascade.config
    return Profile(
        name=PROFILE,
        description="verbatim spans from a planned cascade: section, attribute, lexical, vector (seed 002)",
        defaults=ProfileParams(first_stage_k=100, top_k=cfg.max_spans, max_chars=cfg.max_chars or None),
        stages=(VerbatimCascadeStage(cascade), Guardrail()),
    )


def cascade_signal(query: str, hits: Sequence[Candidate]) -> AnswerSignal:
    """Answerability of a verbatim response (basis `cascade`): the cascade already refused, with
    the signal every profile shares (`verbatim.grounding.judge`), evidence that does not carry what
    the question asks (NO_RESULT), so `can_answer` is whether evidence is left and `confidence` is
    the answer probability on the shared scale (`grounding_confidence`: at least 0.5 exactly when
    there is evidence): the three agree. `grounding` in the features is that probability."""
    from evidence.rank.confidence import AnswerSignal, term_coverage

    if not hits:
        return AnswerSignal(0.0, False, "none", {})
    coverage = term_coverage(query, " ".join(c.chunk.search_text for c in hits))
    g = float(hits[0].scores.get("grounding", coverage))
    confidence = float(hits[0].scores.get("confidence", g))
    return AnswerSignal(
        round(confidence, 4), True, "cascade", {"coverage": round(coverage, 6), "grounding": round(g, 6)}
    )


def bundle_evidence(hits: Sequence[Candidate]) -> EvidenceDocument:
    """One evidence entry per section: `[SECTION: NAME]` and the section's spans, verbatim."""
    from evidence.format.evidence import EvidenceEntry, build_evidence, hit_source

    by_id = {c.chunk.chunk_id: c for c in hits}
    entries = []
    for block in section_blocks([c.chunk for c in hits]):
        first = by_id[block.spans[0].chunk_id]
        entries.append(EvidenceEntry(hit_source(first), block.text))
    return build_evidence(entries, [])
