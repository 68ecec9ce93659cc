"""The verbatim profile over the HTTP API: POST /v1/plan and retrieve with "profile": "verbatim"."""

from __future__ import annotations

import json
from typing import Any

from evidence.demo import DATA
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.retriever.handler import handler
from tests.functional.conftest import body


def call(name: str, context: LambdaContext, **overrides: Any) -> dict[str, Any]:
    response: dict[str, Any] = handler(load_event(f"apigw/{name}", **overrides), context)
    return response


def test_plan_and_retrieve_with_the_verbatim_profile(
    service: EvidenceService, context: LambdaContext
) -> None:
    label = (DATA / "label" / "lipravex.md").read_text(encoding="utf-8")
    upload = {"document_id": "lipravex", "filename": "lipravex.md", "text": label, "metadata": {}}
    indexed = call(
        "index_document",
        context,
        path="/v1/indexes/label/documents",
        pathParameters={"index": "label"},
        body=json.dumps(upload),
    )
    assert indexed["statusCode"] == 200, indexed["body"]

    plan = body(call("plan_verbatim", context))
    assert plan["profile"] == "verbatim" and plan["query_mode"] == "ATTRIBUTE"
    assert plan["attribute"] == "half_life" and plan["planner"] == "rules"

    result = body(call("retrieve_verbatim", context))
    assert result["plan"]["query_mode"] == "MULTI_SECTION"
    assert (
        result["telemetry"]["path_used"] == "MULTI_SECTION_EVIDENCE" and result["telemetry"]["degraded"] == []
    )
    assert result["evidence_xml"].count("[SECTION: ") >= 2
    for hit in result["hits"]:
        start, end = hit["citation"]["char_start"], hit["citation"]["char_end"]
        assert label[start:end] == hit["text"]  # verbatim, at its offsets in the uploaded text


def test_the_planner_function_plans_verbatim_requests(
    service: EvidenceService, context: LambdaContext
) -> None:
    from functions.planner.handler import handler as planner

    plan = planner(load_event("planner/plan_verbatim"), context)
    assert plan["profile"] == "verbatim"
    assert plan["query_mode"] in ("SECTION", "MULTI_SECTION")
    assert plan["candidate_sections"][:2] == ["renal_impairment", "dosage"]
    assert "renal" in plan["search_phrases"]
