"""The HTTP API through the retriever handler, driven by the events/ fixture library."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from evidence.api.openapi import openapi_document
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from evidence.version import package_version
from functions.retriever.handler import handler
from tests.functional.conftest import body

ROOT = Path(__file__).resolve().parents[2]


def call(name: str, context: LambdaContext, **overrides: Any) -> dict[str, Any]:
    response: dict[str, Any] = handler(load_event(f"apigw/{name}", **overrides), context)
    return response


@pytest.fixture
def indexed(service: EvidenceService, context: LambdaContext) -> EvidenceService:
    for name in ("index_document", "index_followup"):
        assert call(name, context)["statusCode"] == 200
    return service


def test_health_and_openapi(service: EvidenceService, context: LambdaContext) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert package_version() == declared
    assert body(call("health", context)) == {"status": "ok", "version": declared}
    doc = body(call("openapi", context))
    assert doc["openapi"] == "3.1.0"
    assert set(doc["paths"]) == {
        "/v1/health",
        "/v1/openapi.json",
        "/v1/indexes",
        "/v1/indexes/{index}/documents",
        "/v1/indexes/{index}/documents/{document_id}",
        "/v1/indexes/{index}/eval-sets",
        "/v1/indexes/{index}/evaluate",
        "/v1/indexes/{index}/retrieve",
        "/v1/indexes/{index}/coach",
        "/v1/indexes/{index}/assessments",
        "/v1/assessments/{assessment_id}",
        "/v1/uploads/{upload_id}",
        "/v1/plan",
        "/v1/format",
    }
    assert doc == openapi_document()


def test_index_retrieve_delete(indexed: EvidenceService, context: LambdaContext) -> None:
    again = body(call("index_document", context))
    assert again == {
        "index": "vendor-acme",
        "document_id": "acme/soc2-summary-2026",
        "status": "unchanged",
        "chunks": again["chunks"],
        "spans": again["spans"],
    }
    response = call("retrieve", context)
    assert response["statusCode"] == 200
    assert response["multiValueHeaders"]["Content-Type"] == ["application/json"]
    result = body(response)
    assert {h["document_id"] for h in result["hits"]} == {
        "acme/soc2-summary-2026",
        "acme/followup-round-2-q7",
    }
    assert result["hits"][0]["rank"] == 1
    assert "<index_1>" in result["evidence_xml"]
    assert result["telemetry"]["stages"]

    deleted = body(call("delete_document", context))
    assert deleted["document_id"] == "acme/soc2-summary-2026" and deleted["deleted_chunks"] >= 1
    after = body(call("retrieve", context))
    assert {h["document_id"] for h in after["hits"]} == {"acme/followup-round-2-q7"}
    gone = call("delete_document", context)
    assert gone["statusCode"] == 404
    assert body(gone)["error"]["code"] == "document_not_found"


def test_delete_url_encoded_s3_document_id(service: EvidenceService, context: LambdaContext) -> None:
    doc_id = "s3://acme-evidence-uploads/indexes/vendor-acme/a b+c.txt"
    create = load_event("apigw/index_document")
    create["body"] = json.dumps(
        {"document_id": doc_id, "filename": "a b+c.txt", "text": "Encryption at rest."}
    )
    assert handler(create, context)["statusCode"] == 200
    from urllib.parse import quote

    path = f"/v1/indexes/vendor-acme/documents/{quote(doc_id, safe='')}"
    response = call("delete_document", context, path=path)
    assert response["statusCode"] == 200, response["body"]
    assert body(response)["document_id"] == doc_id


@pytest.mark.parametrize(
    ("event", "status", "code", "field"),
    [
        ("bad_request", 400, "bad_request", "body"),
        ("validation_error", 422, "validation_error", "top_k"),
        ("bad_index_name", 422, "validation_error", "index"),
        ("unknown_route", 404, "not_found", "path"),
        ("unknown_index", 404, "index_not_found", "index"),
    ],
)
def test_errors_use_the_envelope(  # noqa: PLR0917
    service: EvidenceService, context: LambdaContext, event: str, status: int, code: str, field: str
) -> None:
    response = call(event, context)
    assert response["statusCode"] == status
    error = body(response)
    assert set(error) == {"error"}
    assert error["error"]["code"] == code
    assert error["error"]["field"] == field
    assert error["error"]["message"]


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"body": "x" * (6 * 1024 * 1024 + 1)}, 413, "payload_too_large"),
        ({"body": None}, 400, "bad_request"),
        ({"body": "[1, 2]"}, 422, "validation_error"),
        ({"body": "!!!", "isBase64Encoded": True}, 400, "bad_request"),
        ({"httpMethod": "PUT"}, 405, "method_not_allowed"),
    ],
)
def test_body_limits_and_methods(
    service: EvidenceService, context: LambdaContext, overrides: dict[str, Any], status: int, code: str
) -> None:
    response = call("oversized_body", context, **overrides)
    assert response["statusCode"] == status
    assert body(response)["error"]["code"] == code


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/indexes/vendor-acme/retrieve", "POST"),
        ("PUT", "/v1/indexes/vendor-acme/documents", "GET, POST"),
        ("POST", "/v1/health", "GET"),
        ("POST", "/v1/indexes/vendor-acme/documents/a%2Fb.pdf", "DELETE, GET"),
    ],
)
def test_a_wrong_method_on_a_known_path_is_405_with_allow(
    service: EvidenceService, context: LambdaContext, method: str, path: str, allow: str
) -> None:
    response = call("retrieve", context, httpMethod=method, path=path)
    assert response["statusCode"] == 405
    assert response["multiValueHeaders"]["Allow"] == [allow]
    error = body(response)["error"]
    assert error["code"] == "method_not_allowed" and error["field"] == "method"
    assert error["message"] == f"{method} is not allowed on {path}; allowed: {allow}"


def test_an_unknown_path_stays_404(service: EvidenceService, context: LambdaContext) -> None:
    response = call("retrieve", context, httpMethod="GET", path="/v1/indexes/vendor-acme/nothing")
    assert response["statusCode"] == 404 and "Allow" not in response["multiValueHeaders"]


def test_query_length_limit(indexed: EvidenceService, context: LambdaContext) -> None:
    at_limit = call("retrieve", context, body=json.dumps({"query": "encryption " + "x" * 4085}))
    assert at_limit["statusCode"] == 200
    over = call("retrieve", context, body=json.dumps({"query": "x" * 4097}))
    assert over["statusCode"] == 422
    assert body(over)["error"]["field"] == "query"
    blank = call("retrieve", context, body=json.dumps({"query": "   "}))
    assert blank["statusCode"] == 422


def test_plan_and_format_routes_match_the_functions(service: EvidenceService, context: LambdaContext) -> None:
    from functions.formatter.handler import handler as formatter
    from functions.planner.handler import handler as planner

    plan = body(call("plan", context))
    assert plan == planner(load_event("planner/plan"), context)
    assert plan["criterion_hash"] == "0c64c45e619aa91de636cc99bd4671bc19b903cecdcbf34106af291da2735703"
    formatted = body(call("format", context))
    assert formatted == formatter(load_event("formatter/format"), context)
    assert formatted["evidence_xml"].count("<index_") >= 2


def test_internal_faults_are_500_envelopes(
    service: EvidenceService, context: LambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(service, "plan", broken)
    response = call("plan", context)
    assert response["statusCode"] == 500
    error = body(response)["error"]
    assert error["code"] == "internal_error"
    assert "disk on fire" not in error["message"]


def test_logs_carry_the_correlation_id_and_metrics_are_emf(
    indexed: EvidenceService, context: LambdaContext, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    response = call("unknown_index", context)
    assert response["statusCode"] == 404
    call("retrieve", context)
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith("{")]
    logs = [x for x in lines if "level" in x]
    assert any(x.get("correlation_id") == "c6af9ac6-7b61-11e6-9a41-93e8deadbeef" for x in logs)
    emf = [x for x in lines if "_aws" in x]
    names = {m["Name"] for x in emf for d in x["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    assert {"client_errors", "hits", "retrieve_ms", "degraded", "invocations"} <= names
    assert any(n.startswith("stage_") and n.endswith("_ms") for n in names)


def test_planner_rejects_bad_input_by_name(service: EvidenceService, context: LambdaContext) -> None:
    from evidence.errors import RequestValidationError
    from functions.planner.handler import handler as planner

    with pytest.raises(RequestValidationError) as err:
        planner(load_event("planner/bad_plan"), context)
    assert err.value.field == "query"
