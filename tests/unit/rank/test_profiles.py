"""Profiles: registry, constants, override validation, telemetry and explain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidence import profiles
from evidence.errors import RequestValidationError
from evidence.model import Overrides
from evidence.profiles import get_profile, unregister_profile
from evidence.rank.context import ProfileParams
from evidence.rank.pipeline import BOUNDS, CHOICES, Profile, validate_overrides
from tests.unit.rank.rankkit import FailingReranker, ScriptedReranker, chunk, ctx, followup, new_backend, vec

VRM_STAGES = [
    "followup_extraction",
    "dedup",
    "min_similarity",
    "candidate_limit",
    "rerank",
    "followup_boost",
    "rerank_cutoff",
    "collapse_overlaps",
    "per_document_cap",
    "mmr",
    "top_k",
    "guardrail",
]


def test_vrm_carries_the_seed_constants() -> None:
    vrm = get_profile("vrm")
    d = vrm.defaults
    assert (d.first_stage_k, d.rerank_k, d.top_k, d.rerank_cutoff) == (100, 70, 6, 0.1)
    assert (d.followup_max_rounds, d.followup_boost, d.followup_boost_cap) == (3, 1.15, 1.0)
    assert d.min_similarity is None and d.max_chars is None and d.mmr_lambda is None
    assert [s.name for s in vrm.stages] == ["first_stage", *VRM_STAGES]


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
        unregister_profile("custom-test")


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
    assert set(BOUNDS) | set(CHOICES) == set(Overrides.model_fields)
    assert set(BOUNDS) | set(CHOICES) <= set(ProfileParams.__dataclass_fields__)
    assert CHOICES == {"fusion": ("zscore", "minmax", "rrf")}


def test_fusion_is_a_choice_naming_its_values() -> None:
    assert get_profile("default").params({"fusion": "rrf"}).fusion == "rrf"
    assert get_profile("default").params({}).fusion is None
    for bad in ("borda", 1, True):
        with pytest.raises(RequestValidationError) as e:
            validate_overrides({"fusion": bad})
        assert e.value.field == "fusion" and "zscore, minmax, rrf" in e.value.message


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
    out = vrm.run(c)
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
    out = vrm.run(c)
    assert out.degraded == ["rerank:timeout"]
    assert len(out.hits) == 6 and out.path_used == "bm25"
    assert all("rerank" not in h.scores for h in out.hits)
    firsts = [h.first_stage_score for h in out.hits]
    assert firsts == sorted(firsts, reverse=True)


def test_context_trace_is_fresh_per_run(tmp_path: Path) -> None:
    backend = new_backend(tmp_path, _corpus())
    vrm = get_profile("vrm")
    c = ctx(backend, params=vrm.params({}), criterion="Do you encrypt data?", query="encryption")
    a = vrm.run(c)
    b = vrm.run(c)
    assert a.followups == b.followups and a.hits == b.hits and c.trace.followups == []


class _VecEmbedder:
    """The test kit's deterministic vectors as an embedder (the backend's index was built with them)."""

    model_id = "test-hash"
    dimension = 8

    def embed_query(self, text: str) -> Any:
        return vec(text)


def test_service_builds_the_retrieve_response_from_the_outcome(tmp_path: Path) -> None:
    """EvidenceService.retrieve: the profile's outcome becomes XML, JSON hits, follow-ups, telemetry."""
    import xml.etree.ElementTree as ET

    from evidence.config import Settings
    from evidence.model import RetrieveRequest
    from evidence.service import EvidenceService

    crit = "Do you encrypt data?"
    backend = new_backend(tmp_path, _corpus())
    service = EvidenceService(
        Settings(store_dir=tmp_path),
        backend=backend,
        embedder=_VecEmbedder(),  # type: ignore[arg-type]
        reranker=ScriptedReranker(lambda q, t: 0.9 if "policy 3" in t else 0.2),
    )
    req = RetrieveRequest(
        query="encryption at rest policy", criterion_question=crit, profile="vrm", top_k=4, explain=True
    )
    resp = service.retrieve("ranktest", req)
    assert [h.rank for h in resp.hits] == [1, 2, 3, 4] and resp.hits[0].chunk_id == "c3"
    assert resp.hits[0].scores is not None and resp.hits[0].scores["rerank"] == 0.9
    assert [f.round_number for f in resp.followups] == [1, 2]
    assert resp.valid_indexes == [1, 2, 3, 4, 5]
    root = ET.fromstring(f"<r>{resp.evidence_xml}</r>")
    assert root[-1].tag == "index_5" and "(Multiple Rounds)" in (root[-1].findtext("source") or "")
    assert resp.telemetry.path_used == "hybrid+rerank" and resp.telemetry.degraded == []
    # The test embedder has no calibration: the coverage-only model decides; the reranker's
    # score is recorded, never read (its scale is its own).
    answer = resp.telemetry.answer
    assert answer is not None and answer.basis == "lexical" and answer.features["rerank"] == 0.9
    assert resp.can_answer and resp.confidence > 0.9
    assert resp.telemetry.stages[0].name == "first_stage" and resp.telemetry.stages[0].candidates_in > 0
    with pytest.raises(RequestValidationError):
        service.retrieve("ranktest", req.model_copy(update={"top_k": 0}))


def _service(tmp_path: Path, **settings: Any) -> Any:
    from evidence.config import Settings
    from evidence.service import EvidenceService

    return EvidenceService(
        Settings(store_dir=tmp_path, **settings),
        backend=new_backend(tmp_path, _corpus()),
        embedder=_VecEmbedder(),  # type: ignore[arg-type]
    )


def test_deployment_settings_set_profile_defaults_and_requests_still_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence.config import Settings
    from evidence.model import RetrieveRequest

    # seed 003 configures its knobs per deployment: EVIDENCE_MAX_CHARS, EVIDENCE_MIN_SIMILARITY
    monkeypatch.setenv("EVIDENCE_MAX_CHARS", "40")
    monkeypatch.setenv("EVIDENCE_PROFILE_DEFAULTS", '{"vrm": {"top_k": 2}}')
    s = Settings(store_dir=tmp_path)
    assert s.max_chars == 40 and s.profile_defaults == {"vrm": {"top_k": 2}}
    service = _service(tmp_path, max_chars=s.max_chars, profile_defaults=s.profile_defaults)
    req = RetrieveRequest(query="encryption at rest policy", profile="vrm")
    budgeted = service.retrieve("ranktest", req)
    assert 0 < sum(len(h.text) for h in budgeted.hits) <= 40
    assert next(t for t in budgeted.telemetry.stages if t.name == "guardrail").detail is not None
    unbudgeted = service.retrieve("ranktest", req.model_copy(update={"max_chars": 0}))
    assert len(unbudgeted.hits) == 2  # the profile default from settings, the budget off per request
    wide = service.retrieve("ranktest", req.model_copy(update={"max_chars": 0, "top_k": 5}))
    assert len(wide.hits) == 5
    default_profile = service.retrieve("ranktest", req.model_copy(update={"profile": "default"}))
    assert sum(len(h.text) for h in default_profile.hits) <= 40  # the global knob: every profile
    # a floor no cosine reaches: nothing survives, and the evidence says so explicitly
    strict = _service(tmp_path / "strict", min_similarity=1.0)
    empty = strict.retrieve("ranktest", RetrieveRequest(query="encryption at rest policy"))
    assert empty.hits == [] and empty.valid_indexes == [] and "No valid evidence found" in empty.evidence_xml


def test_bad_profile_defaults_are_a_configuration_error(tmp_path: Path) -> None:
    from evidence.errors import ConfigurationError
    from evidence.model import RetrieveRequest

    service = _service(tmp_path, profile_defaults={"vrm": {"top_k": 0}})
    with pytest.raises(ConfigurationError) as info:
        service.retrieve("ranktest", RetrieveRequest(query="encryption", profile="vrm"))
    assert "EVIDENCE_PROFILE_DEFAULTS" in info.value.message and "top_k" in info.value.message
