"""Every profile on every backend: the same request returns the same hits and `path_used` on the
embedded store and on OpenSearch (osmem-server).

The indexes are lexical-only (`embed=False`): osmem has no k-NN, so the dense legs of `default`,
`vrm` and `coach` and the verbatim cascade's vector paths cannot run there; they are proven on the
embedded store by the functional tier and their OpenSearch request bodies on the API spec
(tests/unit/search/opensearch). Everything else a profile does runs here on both backends: the
plan (the verbatim planner reads the index's subjects), document scoping, the recall legs, the
cascade's section / attribute / lexical paths, span verification against the stored source, the
graph expansion, the answer signal, the evidence bundle and, for the coach, its own endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidence.coach.contract import CoachRequest
from evidence.config import Settings
from evidence.demo import DATA
from evidence.model import RetrieveRequest
from evidence.profiles import profile_names
from evidence.search.base import SearchBackend
from evidence.service import EvidenceService

#: (profile, index, question, how much of the answer must agree). Lexical scores are each engine's
#: own (osmem's BM25 is bleve's, not Lucene's: the backend contract checks lexical order loosely),
#: so where a profile orders by them the comparison is as strict as that allows:
#: "exact": the same hits in the same order at the same offsets, and the same evidence (verbatim:
#:          the winning path's hits; HYBRID_FACTSPAN's fill after them orders by the engine's BM25);
#: "set":   the same hits, in each engine's order (`default`'s focus cuts a hit by its rank, the
#:          first one keeping a longer window: the same offsets wherever both rank a hit alike);
#: "head":  the same two best hits (a graph walk from a different third hit reaches other nodes).
CASES = [
    ("default", "vendor", "Is customer data encrypted at rest?", "set"),
    ("vrm", "vendor", "Does the vendor encrypt customer data at rest?", "set"),
    ("verbatim", "label", "What are the contraindications for Lipravex?", "exact"),
    ("verbatim", "label", "What is the half-life of Lipravex?", "exact"),
    ("verbatim", "label", "How should Lipravex be stored?", "exact"),
    ("coach", "tutor", "How do I solve a quadratic equation?", "head"),
]


@pytest.fixture
def service(backend: SearchBackend, tmp_path: Path) -> EvidenceService:
    return EvidenceService(Settings(store_dir=tmp_path / "svc"), backend=backend)


def _indexed(svc: EvidenceService, index: str) -> EvidenceService:
    if index == "vendor":
        svc.index_paths("vendor", [DATA / "vendor"], embed=False)
    elif index == "label":
        svc.index_paths("label", [DATA / "label" / "lipravex.md"], embed=False)
    else:
        svc.index_graph_paths("tutor", [DATA / "coach" / "algebra-calculus.yaml"], embed=False)
    return svc


def _shape(service: EvidenceService, profile: str, index: str, question: str) -> dict[str, Any]:
    r = service.retrieve(index, RetrieveRequest(query=question, profile=profile))
    return {
        "hits": [(h.chunk_id, h.citation.char_start, h.citation.char_end) for h in r.hits],
        "path_used": r.telemetry.path_used,
        "can_answer": r.can_answer,
        "plan": (r.plan.query_mode, r.plan.entity, r.plan.filters),
        "evidence": r.evidence_xml,
        "rule_hits": _rule_hits(r.telemetry.stages, r.telemetry.path_used, len(r.hits)),
    }


def _rule_hits(stages: Any, path_used: str, hits: int) -> int:
    """How many hits the cascade's winning path gave, before `HYBRID_FACTSPAN` filled the rest of
    the bound (its order reads each engine's BM25): all of them for any other profile."""
    for stage in stages:
        tried = (stage.detail or {}).get("tried")
        if tried:
            return min(hits, next((t["found"] for t in tried if t["path"] == path_used), hits))
    return hits


def test_every_profile_has_a_case() -> None:
    assert {case[0] for case in CASES} == set(profile_names())


@pytest.fixture(scope="module")
def embedded_answers() -> dict[tuple[str, str], dict[str, Any]]:
    """What the embedded store answers, filled by the embedded variant, read by the OpenSearch one."""
    return {}


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}:{c[2]}" for c in CASES])
def test_profile_runs_the_same_on_every_backend(
    backend_kind: str,
    service: EvidenceService,
    embedded_answers: dict[tuple[str, str], dict[str, Any]],
    case: tuple[str, str, str, str],
) -> None:
    profile, index, question, agree = case
    got = _shape(_indexed(service, index), profile, index, question)
    assert got["hits"] and got["can_answer"], f"{profile} cannot answer {question!r} on {backend_kind}"
    key = (profile, question)
    if backend_kind == "embedded":
        embedded_answers[key] = got
        return
    want = embedded_answers.get(key) or _shape(_embedded(service, index), profile, index, question)
    assert got["path_used"] == want["path_used"]
    assert got["plan"] == want["plan"]
    if agree == "exact":
        # The rule path's spans are the same, in the same order; the safety net's fill after them
        # is ordered by each engine's own BM25 (lexical-only indexes), so only its presence agrees.
        n = want["rule_hits"]
        assert got["rule_hits"] == n
        assert got["hits"][:n] == want["hits"][:n]
        assert (len(got["hits"]) > n) == (len(want["hits"]) > n)
        if n == len(want["hits"]):
            assert got["hits"] == want["hits"]
            assert got["evidence"] == want["evidence"]
    elif agree == "set":
        assert sorted(h[0] for h in got["hits"]) == sorted(h[0] for h in want["hits"])
        same_rank = [(g, w) for g, w in zip(got["hits"], want["hits"], strict=True) if g[0] == w[0]]
        assert same_rank and all(g == w for g, w in same_rank)
    else:
        assert set(got["hits"][:2]) == set(want["hits"][:2])


def _embedded(like: EvidenceService, index: str) -> EvidenceService:
    """The embedded twin of an OpenSearch-backed service (when the embedded variant did not run
    first, e.g. `-k opensearch`)."""
    from evidence.search.embedded import EmbeddedBackend

    store = like.settings.store_dir.parent / "twin"
    twin = EvidenceService(Settings(store_dir=store), backend=EmbeddedBackend(store / "store"))
    return _indexed(twin, index)


def test_the_coach_endpoint_answers_on_every_backend(
    backend_kind: str, service: EvidenceService, embedded_answers: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """The coach's own endpoint runs the `coach` profile on the service's one path, on both.
    Without vectors the coach is unsure of the sense and asks back (clarify), on both."""
    request = CoachRequest(query="How do I solve a quadratic equation?", constraints={"timeout_ms": 30000})
    r = _indexed(service, "tutor").coach("tutor", request)
    got = {"mode": (r.can_answer, r.needs_clarification), "matched": [m.id for m in r.matched_los]}
    assert r.matched_los[0].id == "LO-ALG-021", f"the coach matched {got['matched']} on {backend_kind}"
    key = ("coach-endpoint", request.query)
    if backend_kind == "embedded":
        embedded_answers[key] = got
        return
    want = embedded_answers.get(key)
    if want is not None:
        assert got["mode"] == want["mode"] and got["matched"][0] == want["matched"][0]
