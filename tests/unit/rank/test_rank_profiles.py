"""Profiles: registry, constants, override validation, telemetry and explain."""

from __future__ import annotations

from pathlib import Path

import pytest
from rankkit import FailingReranker, ScriptedReranker, chunk, ctx, first_stage, followup, new_backend, vec

from evidence.errors import RequestValidationError
from evidence.model import Overrides
from evidence.rank import profiles
from evidence.rank.pipeline import BOUNDS, Profile, ProfileParams, get_profile, validate_overrides

VRM_STAGES = [
    "followup_extraction",
    "dedup",
    "min_similarity",
    "candidate_limit",
    "rerank",
    "followup_boost",
    "rerank_cutoff",
    "per_document_cap",
    "mmr",
    "top_k",
    "max_chars",
]


def test_vrm_carries_the_seed_constants() -> None:
    vrm = get_profile("vrm")
    d = vrm.defaults
    assert (d.first_stage_k, d.rerank_k, d.top_k, d.rerank_cutoff) == (100, 70, 6, 0.1)
    assert (d.followup_max_rounds, d.followup_boost, d.followup_boost_cap) == (3, 1.15, 1.0)
    assert d.min_similarity is None and d.max_chars is None and d.mmr_lambda is None
    assert vrm.stage_names == VRM_STAGES


def test_default_profile() -> None:
    d = get_profile("default").defaults
    got = (d.first_stage_k, d.rerank_k, d.top_k, d.followup_max_rounds, d.followup_boost)
    assert got == (100, 70, 10, 0, 1.0)


def test_unknown_profile_lists_valid_names() -> None:
    with pytest.raises(RequestValidationError) as e:
        get_profile("nope")
    assert e.value.field == "profile" and "default" in e.value.message and "vrm" in e.value.message


def test_registry_accepts_later_profiles() -> None:
    custom = Profile("custom-test", "test", ProfileParams(), ())
    profiles.register_profile("custom-test", lambda: custom)
    try:
        assert get_profile("custom-test") is custom
        assert "custom-test" in profiles.profile_names()
    finally:
        profiles._FACTORIES.pop("custom-test")
        profiles._CACHE.pop("custom-test", None)


def test_overrides_apply() -> None:
    p = get_profile("vrm").params(
        {"top_k": 3, "followup_boost": 1.5, "max_chars": 800, "min_similarity": 0.2}
    )
    assert (p.top_k, p.followup_boost, p.max_chars, p.min_similarity, p.rerank_k) == (3, 1.5, 800, 0.2, 70)
    assert get_profile("vrm").params({"top_k": None}).top_k == 6


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("top_k", 0),
        ("top_k", 201),
        ("rerank_cutoff", 1.5),
        ("followup_boost", 0.5),
        ("min_similarity", -2.0),
        ("max_chars", -1),
        ("mmr_lambda", 1.1),
        ("first_stage_k", 10_000),
    ],
)
def test_out_of_range_names_field_and_range(field: str, value: float) -> None:
    with pytest.raises(RequestValidationError) as e:
        get_profile("default").params({field: value})
    _, hi, _ = BOUNDS[field]
    assert e.value.field == field and e.value.status == 422
    assert field in e.value.message and str(int(hi) if float(hi).is_integer() else hi) in e.value.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_k", True), ("top_k", 2.5), ("rerank_cutoff", "x"), ("rerank_cutoff", float("nan"))],
)
def test_wrong_types_rejected(field: str, value: object) -> None:
    with pytest.raises(RequestValidationError) as e:
        validate_overrides({field: value})
    assert e.value.field == field


def test_unknown_override_rejected() -> None:
    with pytest.raises(RequestValidationError) as e:
        validate_overrides({"top_kk": 3})
    assert e.value.field == "top_kk"


def test_bounds_mirror_the_api_model() -> None:
    assert set(BOUNDS) == set(Overrides.model_fields)
    assert set(BOUNDS) <= set(ProfileParams.__dataclass_fields__)


def _corpus() -> list:  # type: ignore[type-arg]
    return [chunk(f"c{i}", f"encryption at rest policy {i}") for i in range(12)] + [
        followup("f1", "Do you encrypt data?", 1),
        followup("f2", "Do you encrypt data?", 2),
    ]


def test_telemetry_per_stage_and_explain(tmp_path: Path) -> None:
    backend = new_backend(tmp_path, _corpus())
    vrm = get_profile("vrm")
    rr = ScriptedReranker(lambda q, t: 0.5 if "policy 1" in t else 0.3)
    c = ctx(
        backend,
        params=vrm.params({}),
        criterion="Do you encrypt data?",
        query="encryption at rest",
        query_vector=vec("encryption"),
        reranker=rr,
        explain=True,
    )
    out = vrm.run(c, first_stage())
    assert [s.name for s in out.stages] == ["first_stage", *VRM_STAGES]
    for prev, nxt in zip(out.stages[1:], out.stages[2:], strict=False):
        assert nxt.candidates_in == prev.candidates_out
    assert all(s.ms >= 0 for s in out.stages)
    assert len(out.hits) == 6 and [f.chunk_id for f in out.followups] == ["f1", "f2"]
    top = out.hits[0]
    assert {"fused", "rerank"} <= set(top.scores) and top.notes[-1] == "kept: rank 1"
    dropped = next(s for s in out.stages if s.name == "top_k").detail
    assert dropped is not None and all(d["reason"].startswith("beyond top_k") for d in dropped["dropped"])
    assert out.degraded == [] and out.path_used == "hybrid+rerank"


def test_reranker_failure_degrades_not_fails(tmp_path: Path) -> None:
    backend = new_backend(tmp_path, _corpus())
    vrm = get_profile("vrm")
    c = ctx(backend, params=vrm.params({}), query="encryption at rest", reranker=FailingReranker("timeout"))
    out = vrm.run(c, first_stage())
    assert out.degraded == ["rerank:timeout"]
    assert len(out.hits) == 6 and out.path_used == "bm25"
    assert all("rerank" not in h.scores for h in out.hits)
    firsts = [h.first_stage_score for h in out.hits]
    assert firsts == sorted(firsts, reverse=True)


def test_context_trace_is_fresh_per_run(tmp_path: Path) -> None:
    backend = new_backend(tmp_path, _corpus())
    vrm = get_profile("vrm")
    c = ctx(backend, params=vrm.params({}), criterion="Do you encrypt data?", query="encryption")
    a = vrm.run(c, first_stage())
    b = vrm.run(c, first_stage())
    assert a.followups == b.followups and a.hits == b.hits and c.trace.followups == []


def test_run_request_builds_the_retrieve_response(tmp_path: Path) -> None:
    """What EvidenceService.retrieve delegates to: XML, JSON hits, follow-ups, telemetry."""
    import time
    import xml.etree.ElementTree as ET
    from types import SimpleNamespace

    from evidence.model import PlanRequest, RetrieveRequest
    from evidence.plan.rules import rule_plan
    from evidence.rank.pipeline import run_request

    crit = "Do you encrypt data?"
    backend = new_backend(tmp_path, _corpus())
    from evidence.config import Settings

    service = SimpleNamespace(
        settings=Settings(),
        backend=backend,
        reranker=ScriptedReranker(lambda q, t: 0.9 if "policy 3" in t else 0.2),
        query_vector=lambda index, text: vec(text),
    )
    req = RetrieveRequest(
        query="encryption at rest policy", criterion_question=crit, profile="vrm", top_k=4, explain=True
    )
    plan = rule_plan(PlanRequest(query=req.query, criterion_question=crit, profile="vrm"))
    resp = run_request(service, "ranktest", req, plan, started=time.perf_counter())
    assert [h.rank for h in resp.hits] == [1, 2, 3, 4] and resp.hits[0].chunk_id == "c3"
    assert resp.hits[0].scores is not None and resp.hits[0].scores["rerank"] == 0.9
    assert [f.round_number for f in resp.followups] == [1, 2]
    assert resp.valid_indexes == [1, 2, 3, 4, 5]
    root = ET.fromstring(f"<r>{resp.evidence_xml}</r>")
    assert root[-1].tag == "index_5" and "(Multiple Rounds)" in (root[-1].findtext("source") or "")
    assert resp.telemetry.path_used == "hybrid+rerank" and resp.telemetry.degraded == []
    assert resp.confidence == 0.9 and resp.can_answer
    with pytest.raises(RequestValidationError):
        run_request(service, "ranktest", req.model_copy(update={"top_k": 0}), plan, started=0.0)
