"""The coach engine on a real embedded store: invariants, budgets, deadlines, rerank, HyDE.

The embedder here is the hashing test embedder, so the decisions are not the calibrated ones
(tests/functional/coach covers those with MiniLM); what is under test is the mechanics.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from evidence.coach.budget import StageCosts
from evidence.coach.contract import CoachRequest, Constraints
from evidence.coach.engine import CoachEngine, CoachSettings, content_family
from evidence.coach.llm import LLMError
from evidence.config import CoachGuard, Settings, coach_guard
from evidence.errors import IndexNotFoundError
from evidence.graph import index_graph, parse_graph
from evidence.rank.rerank import RerankError
from evidence.search.embedded import EmbeddedBackend
from evidence.testing import HashingEmbedder
from tests.unit.coach.coachkit import check_invariants, nodes_of
from tests.unit.graph.graphkit import edge, item, lo, sample_bytes

INDEX = "kg"
EMB = HashingEmbedder(64)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend(tmp_path_factory.mktemp("coach") / "store")
    index_graph(b, EMB, INDEX, parse_graph(sample_bytes(), filename="sample.yaml"), graph_id="sample.yaml")
    yield b
    b.close()


def engine(backend: EmbeddedBackend, **kw: object) -> CoachEngine:
    return CoachEngine(backend, embed_query=EMB.embed_query, **kw)  # type: ignore[arg-type]


REQUESTS = [
    {"query": "How do I solve a quadratic equation by factoring?"},
    {
        "query": "explain the chain rule for derivatives",
        "constraints": {"graph_depth": {"prereq": 2, "content": 2}},
    },
    {"query": "give me practice problems on integrals", "constraints": {"content_types": ["Exercise"]}},
    {"query": "factoring trinomials examples", "constraints": {"difficulty": "intro", "token_budget": 300}},
    {
        "query": "Taylor series error bound",
        "constraints": {"graph_depth": {"prereq": 3, "content": 1}, "top_k": {"lo": 2, "content": 1}},
    },
    {"query": "limits", "seek_clarification": True},
    {"query": "How do I bake bread?"},
    {
        "query": "that last step again",
        "conversation_snippet": "We worked through EX-342 (completing the square).",
    },
    {"query": "exponent rules", "subject": "Algebra", "constraints": {"token_budget": 128}},
    {"query": "derivative of sin", "subject": "chemistry"},
    {"query": "explain", "intent": "definition"},
]


@pytest.mark.parametrize("body", REQUESTS, ids=lambda b: b["query"][:30])
def test_invariants_hold(backend: EmbeddedBackend, body: dict) -> None:  # type: ignore[type-arg]
    request = CoachRequest.model_validate(body)
    r = engine(backend).run(INDEX, request)
    check_invariants(backend, INDEX, request, r)
    assert set(r.telemetry.stages) >= {"intent", "hybrid"}


@pytest.mark.parametrize("budget", [128, 160, 250, 400, 900, 2000])
def test_every_budget_is_met(backend: EmbeddedBackend, budget: int) -> None:
    request = CoachRequest.model_validate(
        {
            "query": "explain the chain rule for derivatives",
            "intent": "tutoring",
            "constraints": {"token_budget": budget, "graph_depth": {"prereq": 2, "content": 1}},
        }
    )
    r = engine(backend).run(INDEX, request)
    check_invariants(backend, INDEX, request, r)


def test_unknown_index(backend: EmbeddedBackend) -> None:
    with pytest.raises(IndexNotFoundError):
        engine(backend).run("nope", CoachRequest(query="x"))


def test_filters_are_reported(backend: EmbeddedBackend) -> None:
    r = engine(backend).run(
        INDEX,
        CoachRequest.model_validate(
            {
                "query": "quadratic",
                "subject": "algebra",
                "constraints": {"content_types": ["Example", "Exercise"], "difficulty": ["intro"]},
            }
        ),
    )
    assert r.telemetry.applied_filters == ["subject:algebra", "types:Example,Exercise", "difficulty:intro"]


def test_an_unmatched_subject_never_widens_silently(backend: EmbeddedBackend) -> None:
    """Issue 25 item 1: a subject the index lacks is asked back, naming the index's subjects; the
    closest LOs of other subjects are suggestions only (no facts, no content, nothing cited)."""
    request = CoachRequest(query="How do I solve a quadratic equation?", subject="chemistry")
    r = engine(backend).run(INDEX, request)
    check_invariants(backend, INDEX, request, r)
    assert not r.can_answer and r.needs_clarification and r.confidence == 0.0
    assert r.clarification_question is not None
    assert "chemistry" in r.clarification_question
    assert all(s in r.clarification_question for s in ("algebra", "calculus", "precalculus"))
    assert r.minimal_context == [] and r.content_items == [] and r.citations == [] and r.supporting_los == []
    assert all(m.reason.startswith("closest LO outside the subject") for m in r.matched_los)
    assert "subject:unmatched" in r.telemetry.degraded
    assert r.telemetry.applied_filters == ["subject:chemistry (unmatched)"]
    assert r.telemetry.detail["subjects"] == ["algebra", "calculus", "precalculus"]
    # A subject the index has, in any case, is applied and answered from.
    ok = engine(backend).run(
        INDEX, CoachRequest(query="How do I solve a quadratic equation?", subject="Algebra")
    )
    assert "subject:unmatched" not in ok.telemetry.degraded and ok.telemetry.applied_filters == [
        "subject:Algebra"
    ]


def _guarded(backend: EmbeddedBackend, **guard: object) -> CoachEngine:
    return engine(backend, settings=CoachSettings(guard=CoachGuard.model_validate(guard)))


def test_the_subject_allowlist_bounds_every_search(backend: EmbeddedBackend) -> None:
    """Seed 004's "filtered subject domains", per index: a subject outside the list is refused
    (asked back with the allowed ones); without a subject, only allowed subjects are searched."""
    eng = _guarded(backend, subjects=["Calculus"])
    r = eng.run(INDEX, CoachRequest(query="How do I solve a quadratic equation?", subject="algebra"))
    assert not r.can_answer and r.needs_clarification and "subject:not_allowed" in r.telemetry.degraded
    assert r.clarification_question is not None and "calculus" in r.clarification_question
    assert r.matched_los == [] and r.citations == []
    free = eng.run(INDEX, CoachRequest(query="How do I solve a quadratic equation?"))
    assert free.telemetry.applied_filters == ["subjects:calculus"]
    cited = nodes_of(backend, INDEX, [c.id for c in free.citations] + [m.id for m in free.matched_los])
    assert cited and {v.subject for v in cited.values()} == {"calculus"}
    # The default guard allows the index's own subjects.
    assert CoachGuard().allows_subject("anything") and not CoachGuard(subjects=["a"]).allows_subject("b")


def test_the_unsafe_content_guard_is_on_by_default_and_configurable(tmp_path: Path) -> None:
    """Seed 004's "block unsafe content types": an `Unsafe` item is never recalled, linked or
    cited by default; an index whose guard lists no blocked types gets it like any content."""
    graph = {
        "nodes": [
            lo("LO-A", "Solve linear equations", "A linear equation ax + b = c is solved by subtracting b."),
            item("EX-A", "Example", "Solving 2x + 3 = 11", "Subtract 3 to get 2x = 8 and divide by 2."),
            item(
                "BAD-A",
                "Unsafe",
                "Solving linear equations, unsafe",
                "Solve linear equations by subtracting b.",
            ),
        ],
        "edges": [edge("LO-A", "EX-A", "ASSESSED_BY"), edge("LO-A", "BAD-A", "ASSESSED_BY", 1.0)],
    }
    b = EmbeddedBackend(tmp_path / "guard")
    index_graph(b, EMB, "g", parse_graph(json.dumps(graph).encode(), filename="g.json"), graph_id="g.json")
    request = CoachRequest(query="solve linear equations by subtracting b", intent="definition")
    safe = CoachEngine(b, embed_query=EMB.embed_query).run("g", request)
    assert "BAD-A" not in {c.id for c in safe.citations} | {c.id for c in safe.content_items}
    blocked = safe.telemetry.detail["blocked"]
    assert "BAD-A" not in safe.minimal_context_sources and isinstance(blocked, list) and "BAD-A" in blocked
    open_guard = CoachSettings(guard=CoachGuard(blocked_types=[]))
    allowed = CoachEngine(b, embed_query=EMB.embed_query, settings=open_guard).run("g", request)
    assert "BAD-A" in {c.id for c in allowed.citations}
    b.close()


def test_coach_guards_are_configured_per_index() -> None:
    s = Settings(coach_guards={"tutor": {"subjects": ["algebra"]}, "*": {"blocked_types": ["Private"]}})
    assert coach_guard(s, "tutor").subjects == ["algebra"] and coach_guard(s, "tutor").blocks_type("unsafe")
    assert coach_guard(s, "other").blocked_types == ["Private"] and coach_guard(s, "other").subjects is None
    assert coach_guard(Settings(), "x") == CoachGuard()


def test_a_budget_too_small_for_one_cited_fact_declines(backend: EmbeddedBackend) -> None:
    """Issue 25 item 3: token_budget 128 used to answer can_answer true with no content."""
    request = CoachRequest.model_validate(
        {"query": "How do I solve a quadratic equation by factoring?", "constraints": {"token_budget": 128}}
    )
    r = engine(backend).run(INDEX, request)
    check_invariants(backend, INDEX, request, r)
    assert not r.can_answer and not r.needs_clarification and r.minimal_context == []
    assert "token_budget:too_small" in r.telemetry.degraded
    assert r.telemetry.detail["reason"] == "token_budget 128 is too small for one cited fact"
    # With room for one fact it answers.
    roomy = engine(backend).run(
        INDEX, request.model_copy(update={"constraints": Constraints(token_budget=400)})
    )
    assert roomy.can_answer and roomy.minimal_context


PRACTICE = [
    "give me problems on the power rule",
    "give me practice problems on integrals",
    "practice exercises on quadratic equations",
    "give me problems on definite integrals and signed area",
]


@pytest.mark.parametrize("query", PRACTICE)
def test_practice_gets_exercises_not_quizzes(backend: EmbeddedBackend, query: str) -> None:
    """Seed 004's practice playbook: exercises only (a Quiz assesses), unless the request names Quiz."""
    r = engine(backend).run(INDEX, CoachRequest(query=query, intent="practice"))
    assert r.content_items, query
    assert "assessment" not in {content_family(c.type) for c in r.content_items}
    asked = engine(backend).run(
        INDEX,
        CoachRequest.model_validate(
            {"query": query, "intent": "practice", "constraints": {"content_types": ["Quiz", "Exercise"]}}
        ),
    )
    assert {c.type for c in asked.content_items} <= {"Quiz", "Exercise"}


class _SlowReranker:
    """Answers only when released: a reranker that would overrun any budget."""

    name = "slow"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[tuple[int, float]]:
        self.started.set()
        self.release.wait(30)
        return [(i, 0.5) for i in range(len(texts))]


def test_the_rerank_budget_is_enforced_and_reported(backend: EmbeddedBackend) -> None:
    """Seed 004's 250 ms for re-rank: a reranker still busy at the budget is cut, the fused order
    is kept, and telemetry says so."""
    rr = _SlowReranker()
    try:
        r = engine(backend, reranker=rr).run(INDEX, CoachRequest(query="explain the chain rule"))
    finally:
        rr.release.set()
    assert rr.started.is_set()
    assert "rerank:over_budget" in r.telemetry.degraded
    assert r.telemetry.detail["rerank_budget_ms"] == 250.0
    assert r.matched_los and all("rerank" not in m.reason for m in r.matched_los)


class Clock:
    """Each reading moves time on by `step` seconds: later stages find the deadline spent."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_tiny_timeout_skips_the_optional_stages_and_still_answers(backend: EmbeddedBackend) -> None:
    costs = StageCosts({"embed": 10.0, "rerank": 250.0, "mmr": 10.0, "graph": 10.0, "compress": 10.0})
    request = CoachRequest.model_validate(
        {"query": "explain the chain rule", "intent": "tutoring", "constraints": {"timeout_ms": 5}}
    )
    r = engine(backend, costs=costs, reranker=_Reranker()).run(INDEX, request)
    assert {"dense:skipped_timeout", "rerank:skipped_timeout", "mmr:skipped_timeout"} <= set(
        r.telemetry.degraded
    )
    assert "embed" not in r.telemetry.stages and "rerank" not in r.telemetry.stages
    assert r.matched_los, "partial results: what lexical recall found"
    check_invariants(backend, INDEX, request, r)


def test_stages_that_would_overrun_are_skipped_as_time_runs_out(backend: EmbeddedBackend) -> None:
    # 100 ms pass at every deadline check: embed (at 100 ms) and MMR (200 ms) fit in 400 ms, graph
    # expansion (300 ms, 150 expected) and compression (400 ms) do not.
    costs = StageCosts({"embed": 1.0, "mmr": 1.0, "graph": 150.0, "compress": 150.0})
    request = CoachRequest.model_validate(
        {
            "query": "How do I solve a quadratic equation by factoring?",
            "intent": "tutoring",
            "constraints": {"timeout_ms": 400},
        }
    )
    r = engine(backend, costs=costs, clock=Clock(0.1)).run(INDEX, request)
    assert {"embed", "hybrid", "mmr"} <= set(r.telemetry.stages)
    assert {"graph:skipped_timeout", "compress:skipped_timeout"} <= set(r.telemetry.degraded)
    assert "graph" not in r.telemetry.stages and "compress" not in r.telemetry.stages
    assert r.supporting_los == [] and r.minimal_context, "partial: first sentences of the matched LOs"
    check_invariants(backend, INDEX, request, r)


class _Reranker:
    name = "fake"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[int] = []

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[tuple[int, float]]:
        if self.fail:
            raise RerankError("down", reason="unavailable")
        self.calls.append(len(texts))
        # Prefers texts about the chain rule, then keeps the given order.
        scored = [(i, (0.9 if "chain rule" in t else 0.3) - i * 1e-4) for i, t in enumerate(texts)]
        return sorted(scored, key=lambda x: -x[1])[: top_n or len(texts)]


def test_rerank_window_and_scores(backend: EmbeddedBackend) -> None:
    rr = _Reranker()
    r = engine(backend, reranker=rr).run(
        INDEX, CoachRequest(query="composition of functions derivative", intent="tutoring")
    )
    assert rr.calls and max(rr.calls) <= 40, "seed 004: rerank the top 30-50"
    assert "rerank" in r.telemetry.stages
    assert r.matched_los[0].reason == "semantic match + rerank"


def test_a_failing_reranker_degrades(backend: EmbeddedBackend) -> None:
    r = engine(backend, reranker=_Reranker(fail=True)).run(INDEX, CoachRequest(query="chain rule"))
    assert "rerank:unavailable" in r.telemetry.degraded


class _Hyde:
    name = "hyde"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[float] = []

    def passage(self, query: str, *, subject: str | None, timeout_s: float) -> str:
        self.asked.append(timeout_s)
        if self.fail:
            raise LLMError("slow", reason="timeout")
        return "The chain rule multiplies the derivative of the outer function by that of the inner one."


def test_hyde_has_its_own_budget_and_degrades(backend: EmbeddedBackend) -> None:
    hyde = _Hyde()
    r = engine(backend, hyde=hyde).run(INDEX, CoachRequest(query="chain rule?"))
    assert r.telemetry.detail.get("hyde") is True and "hyde" in r.telemetry.stages
    assert 0 < hyde.asked[0] <= 0.2, "at most 200 ms (seed 004: LLM rewrite budget)"
    failing = _Hyde(fail=True)
    r = engine(backend, hyde=failing).run(INDEX, CoachRequest(query="chain rule?"))
    assert "hyde:timeout" in r.telemetry.degraded


def test_prerequisite_depth_is_honoured(backend: EmbeddedBackend) -> None:
    for depth in (0, 1, 2, 3):
        request = CoachRequest.model_validate(
            {
                "query": "Taylor series error bounds",
                "intent": "tutoring",
                "constraints": {"graph_depth": {"prereq": depth, "content": 1}, "token_budget": 2000},
            }
        )
        r = engine(backend).run(INDEX, request)
        check_invariants(backend, INDEX, request, r)
        if depth == 0:
            assert r.supporting_los == []


def test_content_families() -> None:
    assert [
        content_family(t)
        for t in (
            "Exercise",
            "Practice problem",
            "Quiz",
            "Worked Example",
            "Video",
            "Misconception",
            "Unit test",
        )
    ] == ["practice", "practice", "assessment", "example", "explanation", "pitfall", "assessment"]


def test_the_engine_holds_no_request_state(backend: EmbeddedBackend) -> None:
    """One engine serves concurrent requests (a server's threads): results match serial runs."""
    from concurrent.futures import ThreadPoolExecutor

    eng = engine(backend)
    bodies = [CoachRequest.model_validate(b) for b in REQUESTS[:6]]
    serial = [eng.run(INDEX, b).model_dump(exclude={"telemetry"}) for b in bodies]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(
            pool.map(lambda b: eng.run(INDEX, b).model_dump(exclude={"telemetry"}), itertools.chain(bodies))
        )
    assert parallel == serial


def test_an_index_without_a_graph_has_nothing_to_coach_from(tmp_path: Path) -> None:
    from evidence.ingest import chunk_document
    from evidence.records import ParsedDocument

    b = EmbeddedBackend(tmp_path / "plain")
    b.create_index("docs", embedder_id=EMB.model_id, dimension=EMB.dimension)
    doc = chunk_document(
        ParsedDocument(text="The chain rule differentiates compositions."),
        document_id="d",
        source="d.txt",
        metadata={},
    )
    b.upsert("docs", [doc], [EMB.embed_documents([c.search_text for c in doc.chunks])])
    r = CoachEngine(b, embed_query=EMB.embed_query).run("docs", CoachRequest(query="explain the chain rule"))
    assert not r.can_answer and not r.needs_clarification
    assert r.matched_los == [] and r.citations == [] and r.telemetry.detail["candidates"] == 0
    b.close()


def test_ids_in_the_conversation_are_found() -> None:
    from evidence.coach.common import _ID_IN_TEXT

    text = "We did LO-ALG-021, then ex_342 and calc.lo.7; see LO42 (not step-by-step? that is a word too)."
    assert [m.group(0) for m in _ID_IN_TEXT.finditer(text)] == [
        "LO-ALG-021",
        "ex_342",
        "calc.lo.7",
        "LO42",
        "step-by-step",
    ]


@pytest.mark.parametrize(
    ("body", "reason", "expected"),
    [
        ({"query": "teach me algebra"}, "broad", True),
        ({"query": "give me practice problems on algebra"}, "broad", False),
        ({"query": "derivatives?"}, "bare_topic", True),
        ({"query": "do derivatives use limits?"}, "bare_topic", True),
        ({"query": "does a derivative always exist at a sharp corner?"}, "bare_topic", False),
    ],
)
def test_ambiguity_rules(backend: EmbeddedBackend, body: dict, reason: str, expected: bool) -> None:  # type: ignore[type-arg]
    seen: dict[str, object] = {}
    eng = CoachEngine(backend, embed_query=EMB.embed_query, observer=seen.__setitem__)
    eng.run(INDEX, CoachRequest.model_validate(body))
    assert getattr(seen["features"], reason) is expected
