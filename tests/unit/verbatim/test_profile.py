"""The verbatim profile through the service: plan, cascade path, [SECTION] evidence, the span check."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from evidence.config import PlannerKind, Settings
from evidence.model import PlanRequest, RetrieveRequest, RetrieveResponse
from evidence.plan.llm import BedrockPlanner
from evidence.records import ChunkKind
from evidence.service import EvidenceService
from evidence.verbatim import profile as verbatim_profile
from evidence.verbatim.check import VerbatimMismatchError

INDEX = "label"


def retrieve(service: EvidenceService, query: str, **kw: Any) -> RetrieveResponse:
    return service.retrieve(INDEX, RetrieveRequest(query=query, profile="verbatim", **kw))


def test_hits_are_spans_with_their_path_and_the_plan_is_the_verbatim_plan(
    label_only_service: EvidenceService,
) -> None:
    resp = retrieve(label_only_service, "What is the half-life of Lipravex?")
    assert resp.telemetry.path_used == "ATTRIBUTE_LOOKUP"
    assert resp.plan.profile == "verbatim" and resp.plan.query_mode == "ATTRIBUTE"
    assert (
        resp.plan.attribute == "half_life" and resp.plan.entity == "lipravex" and resp.plan.planner == "rules"
    )
    top = resp.hits[0]
    assert top.text == "The terminal elimination half-life of ferlostatin is approximately 19 hours."
    assert top.citation.section == "Elimination" and top.citation.char_end - top.citation.char_start == len(
        top.text
    )
    assert top.metadata["section_canonical"] == "pharmacokinetics" and top.metadata["entity"] == "LIPRAVEX"
    stage = resp.telemetry.stages[0]
    assert stage.name == "verbatim_cascade" and stage.detail is not None
    # the winning path, then the safety net that filled the rest of the bundle
    assert [t["path"] for t in stage.detail["tried"]][-2:] == ["ATTRIBUTE_LOOKUP", "HYBRID_FACTSPAN"]
    assert "[SECTION: ELIMINATION]" in resp.evidence_xml


def test_multi_section_evidence_is_section_blocks_without_glue(label_only_service: EvidenceService) -> None:
    resp = retrieve(
        label_only_service, "Why is the Lipravex dose reduced in patients with severe renal impairment?"
    )
    assert resp.plan.query_mode == "MULTI_SECTION"
    sections = {h.citation.section for h in resp.hits}
    assert len(sections) >= 2
    assert resp.evidence_xml.count("[SECTION: ") == len(sections) == len(resp.valid_indexes)
    for hit in resp.hits:
        assert hit.text in resp.evidence_xml or hit.text.replace("&", "&amp;") in resp.evidence_xml


def test_no_result_is_an_empty_answer_not_a_guess(label_only_service: EvidenceService) -> None:
    resp = retrieve(label_only_service, "How much does a month of Lipravex cost?")
    assert resp.telemetry.path_used == "NO_RESULT" and resp.hits == [] and not resp.can_answer
    assert resp.evidence_xml.startswith("<no_evidence>")


def test_top_k_and_max_chars_bound_the_evidence(label_only_service: EvidenceService) -> None:
    assert len(retrieve(label_only_service, "Lipravex warnings and precautions", top_k=2).hits) == 2
    budget = retrieve(label_only_service, "Lipravex warnings and precautions", max_chars=300)
    assert sum(len(h.text) for h in budget.hits) <= 300


def test_plan_endpoint_payload_for_the_verbatim_profile(label_only_service: EvidenceService) -> None:
    plan = label_only_service.plan(
        PlanRequest(query="What are the contraindications of Lipravex?", profile="verbatim")
    )
    assert plan.query_mode == "SECTION" and plan.candidate_sections[0] == "contraindications"
    assert plan.entity == "Lipravex" and plan.planner == "rules"


def _stubbed_planner(settings: Settings) -> tuple[BedrockPlanner, Stubber]:
    client = boto3.client(
        "bedrock-runtime", region_name="eu-west-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    planner = BedrockPlanner(
        model_id=settings.bedrock_planner_model,
        region="eu-west-1",
        timeout_s=settings.planner_timeout_s,
        client=client,
    )
    key = (settings.bedrock_planner_model, settings.aws_region, settings.planner_timeout_s)
    verbatim_profile._PLANNERS[key] = planner
    return planner, Stubber(client)


def test_a_failing_llm_planner_degrades_to_the_rules(
    label_only_service: EvidenceService, tmp_path: Path
) -> None:
    settings = Settings(store_dir=label_only_service.settings.store_dir, planner=PlannerKind.BEDROCK)
    service = EvidenceService(settings, backend=label_only_service.backend)
    _, stub = _stubbed_planner(settings)
    stub.add_client_error("converse", service_error_code="ServiceUnavailableException", http_status_code=503)
    try:
        with stub:
            resp = retrieve(service, "What is the half-life of Lipravex?")
    finally:
        verbatim_profile._PLANNERS.clear()
    assert resp.telemetry.degraded == ["planner_error"]
    assert resp.plan.planner == "fallback" and resp.telemetry.path_used == "ATTRIBUTE_LOOKUP"


def test_an_llm_plan_drives_the_cascade(label_only_service: EvidenceService) -> None:
    settings = Settings(store_dir=label_only_service.settings.store_dir, planner=PlannerKind.BEDROCK)
    service = EvidenceService(settings, backend=label_only_service.backend)
    planner, stub = _stubbed_planner(settings)
    question = "how long is it around"
    plan = {
        "entity": "Lipravex",
        "query_mode": "ATTRIBUTE",
        "attribute": "half_life",
        "candidate_sections": ["pharmacokinetics"],
        "search_phrases": ["half-life", "elimination half-life"],
        "extraction_level": "sentence",
    }
    response = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "1", "name": "retrieval_plan", "input": plan}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    stub.add_response("converse", response, planner.request(question))
    try:
        with stub:
            resp = retrieve(service, question)
    finally:
        verbatim_profile._PLANNERS.clear()
    assert resp.plan.planner == "llm" and resp.telemetry.degraded == []
    assert resp.telemetry.path_used == "ATTRIBUTE_LOOKUP" and "19 hours" in resp.hits[0].text


def test_a_span_that_no_longer_matches_its_source_fails_the_request(
    label_only_service: EvidenceService, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(label_only_service.settings.store_dir, store)
    db = sqlite3.connect(store / "indexes" / INDEX / "records.sqlite3")
    n = db.execute(
        "UPDATE chunks SET text = replace(text, '19 hours', '91 hours') WHERE kind = ? AND text LIKE ?",
        (ChunkKind.SPAN.value, "The terminal elimination half-life%"),
    ).rowcount
    db.commit()
    db.close()
    assert n == 1
    service = EvidenceService(Settings(store_dir=store))
    with pytest.raises(VerbatimMismatchError, match="differs from the stored source"):
        retrieve(service, "What is the half-life of Lipravex?")


def test_can_answer_is_the_cascade_verdict(label_only_service: EvidenceService) -> None:
    found = retrieve(label_only_service, "What are the side effects of Lipravex?")
    assert found.can_answer and found.telemetry.answer is not None
    assert found.telemetry.answer.basis == "cascade" and 0.0 < found.confidence <= 1.0
    none = retrieve(label_only_service, "How much does a month of Lipravex cost?")
    assert not none.can_answer and none.confidence == 0.0
