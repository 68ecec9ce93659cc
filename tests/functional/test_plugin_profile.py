"""A profile added at test time runs through `POST /retrieve` with nothing added to the service.

`glossary-test` owns every step the protocol has: its plan (the question's key phrases as the
filter-free plan of its own planner), its stages (a lexical recall stage of its own, then the
shared `top_k`), its answer signal, its evidence bundle (one `<term>` per hit) and its extras
(its own `path_used`, and asking back when it finds nothing). It is registered with one call,
as a profile package registers with one registry line (`evidence.profiles._FACTORIES`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest

from evidence.demo import DATA
from evidence.format.evidence import EvidenceDocument
from evidence.model import Plan, PlanRequest
from evidence.profiles import Extras, PipelinePlugin, ProfileEnv, register_profile, unregister_profile
from evidence.rank.candidate import Candidate
from evidence.rank.confidence import AnswerSignal
from evidence.rank.context import ProfileParams, RankContext
from evidence.rank.pipeline import Profile, RankOutcome
from evidence.rank.stages import TopK
from evidence.records import ChunkKind
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.retriever.handler import handler
from tests.functional.conftest import body

NAME = "glossary-test"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "evidence"


class LexicalRecall:
    """This profile's own recall stage: BM25 over passages, no vectors."""

    name = "glossary_recall"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        ctx.trace.path = "glossary"
        hits = ctx.backend.lexical(ctx.index, ctx.query, k=ctx.params.first_stage_k, kind=ChunkKind.PASSAGE)
        return [Candidate(chunk=h.chunk, score=h.score, first_stage_score=h.score) for h in hits]


class GlossaryPlugin(PipelinePlugin):
    name = NAME

    def build(self) -> Profile:
        return Profile(
            NAME, "test: lexical terms", ProfileParams(first_stage_k=20, top_k=2), (LexicalRecall(), TopK())
        )

    def plan(self, request: PlanRequest, env: ProfileEnv) -> tuple[Plan, list[str]]:
        plan, degraded = super().plan(request, env)
        return plan.model_copy(update={"query_mode": "GENERIC", "search_phrases": [request.query.lower()]}), [
            *degraded,
            "glossary:planned",
        ]

    def answer_signal(self, query: str, outcome: RankOutcome, env: ProfileEnv) -> AnswerSignal:
        n = len(outcome.hits)
        return AnswerSignal(1.0 if n else 0.0, bool(n), "lexical", {"hits": float(n)})

    def bundle(self, kept: Sequence[Candidate], followups: Sequence[Candidate]) -> EvidenceDocument:
        terms = "".join(f'<term n="{i}">{escape(c.chunk.text)}</term>' for i, c in enumerate(kept, 1))
        return EvidenceDocument(f"<glossary>{terms}</glossary>", list(range(1, len(kept) + 1)))

    def extras(self, outcome: RankOutcome) -> Extras:
        return Extras(
            path_used=f"{outcome.path_used}:{len(outcome.hits)}", needs_clarification=not outcome.hits
        )


@pytest.fixture
def glossary() -> Iterator[None]:
    register_profile(NAME, GlossaryPlugin)
    yield
    unregister_profile(NAME)


def call(name: str, context: LambdaContext, **overrides: Any) -> dict[str, Any]:
    response: dict[str, Any] = handler(load_event(f"apigw/{name}", **overrides), context)
    return response


def retrieve(context: LambdaContext, query: str) -> dict[str, Any]:
    response = call("retrieve", context, body=json.dumps({"query": query, "profile": NAME}))
    assert response["statusCode"] == 200, response["body"]
    got: dict[str, Any] = body(response)
    return got


def test_a_profile_registered_at_test_time_runs_through_post_retrieve(
    glossary: None, service: EvidenceService, context: LambdaContext
) -> None:
    service.index_paths("vendor-acme", [DATA / "vendor"])
    got = retrieve(context, "How is customer data encrypted at rest?")
    assert got["plan"]["profile"] == NAME and got["plan"]["query_mode"] == "GENERIC"
    assert got["plan"]["search_phrases"] == ["how is customer data encrypted at rest?"]
    assert [s["name"] for s in got["telemetry"]["stages"]] == ["glossary_recall", "top_k"]
    assert len(got["hits"]) == 2  # the profile's own top_k default
    assert got["telemetry"]["path_used"] == "glossary:2"
    assert got["telemetry"]["degraded"] == ["glossary:planned"]
    assert got["telemetry"]["answer"] == {"basis": "lexical", "features": {"hits": 2.0}, "withheld": False}
    assert got["can_answer"] is True and got["confidence"] == 1.0
    assert got["evidence_xml"].startswith('<glossary><term n="1">') and got["valid_indexes"] == [1, 2]
    assert got["needs_clarification"] is False

    nothing = retrieve(context, "zzzqx")
    assert nothing["hits"] == [] and nothing["needs_clarification"] is True
    assert nothing["telemetry"]["path_used"] == "glossary:0" and nothing["can_answer"] is False

    # A request's overrides still apply, through the profile's own defaults.
    top1 = call("retrieve", context, body=json.dumps({"query": "customer data", "profile": NAME, "top_k": 1}))
    assert len(body(top1)["hits"]) == 1


def test_an_unregistered_profile_is_a_400_naming_the_valid_ones(
    service: EvidenceService, context: LambdaContext
) -> None:
    assert call("index_document", context)["statusCode"] == 200
    response = call("retrieve", context, body=json.dumps({"query": "encryption", "profile": NAME}))
    assert response["statusCode"] == 422
    error = body(response)["error"]
    assert error["field"] == "profile" and "verbatim" in error["message"]


def test_the_service_planner_and_formatter_never_name_a_profile() -> None:
    """Issue 24's acceptance: profile behaviour lives in the profiles, not in these layers."""
    named = re.compile(r"profile\s*(==|!=|in\s*\(|not\s+in\s*\()")
    files = [SHARED / "service.py", *(SHARED / "plan").glob("*.py"), *(SHARED / "format").glob("*.py")]
    found = [
        f"{f.name}:{n}"
        for f in files
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if named.search(line)
    ]
    assert found == []
