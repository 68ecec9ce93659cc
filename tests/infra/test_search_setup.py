"""The search-setup custom resource handler: always answers CloudFormation, maps roles, idempotent PUTs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra" / "custom_resources"))
import search_setup

pytestmark = [pytest.mark.infra]

EVENT: dict[str, Any] = {
    "RequestType": "Create",
    "ResponseURL": "https://cloudformation-custom-resource-response.example/x",
    "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/Evidence/1",
    "RequestId": "r-1",
    "LogicalResourceId": "SearchSetup",
    "ResourceType": "Custom::EvidenceSearchSetup",
    "ResourceProperties": {
        "Endpoint": "https://vpc-evidence.eu-west-1.es.amazonaws.com",
        "Service": "es",
        "Region": "eu-west-1",
        "Dimension": "384",
        "HybridMode": "server",
        "Version": "abc",
        "WriterRoles": ["arn:aws:iam::123456789012:role/indexer", "arn:aws:iam::123456789012:role/retriever"],
        "ReaderRoles": [],
        "AutoCreateIndex": "+.*,-*",
    },
}


class Context:
    log_stream_name = "2026/11/22/[$LATEST]abc"

    def __init__(self, remaining_ms: int = 0) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def responses(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    class Response:
        status = 200

        def __enter__(self) -> Response:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def fake_urlopen(request: Any, timeout: float) -> Response:
        assert request.get_method() == "PUT" and request.full_url == EVENT["ResponseURL"]
        assert request.get_header("Content-type") == ""  # the URL is signed for no content type
        sent.append(json.loads(request.data))
        return Response()

    monkeypatch.setattr(search_setup.urllib.request, "urlopen", fake_urlopen)
    return sent


def test_create_success_answers_with_data(
    monkeypatch: pytest.MonkeyPatch, responses: list[dict[str, Any]]
) -> None:
    seen: list[dict[str, Any]] = []

    def fake_setup(props: dict[str, Any]) -> dict[str, str]:
        seen.append(props)
        return {"Pipeline": "p"}

    monkeypatch.setattr(search_setup, "setup", fake_setup)
    search_setup.on_event(dict(EVENT), Context())
    assert seen == [EVENT["ResourceProperties"]]
    (answer,) = responses
    assert answer["Status"] == "SUCCESS" and answer["Data"] == {"Pipeline": "p"}
    assert answer["PhysicalResourceId"].startswith("evidence-search-setup:")
    assert answer["RequestId"] == "r-1" and answer["LogicalResourceId"] == "SearchSetup"


def test_failure_still_answers_failed(
    monkeypatch: pytest.MonkeyPatch, responses: list[dict[str, Any]]
) -> None:
    def boom(props: dict[str, Any]) -> dict[str, str]:
        raise ConnectionError("domain not reachable")

    monkeypatch.setattr(search_setup, "setup", boom)
    search_setup.on_event(dict(EVENT), Context(remaining_ms=0))  # no time left: no retry
    (answer,) = responses
    assert answer["Status"] == "FAILED" and "domain not reachable" in answer["Reason"]


def test_retries_while_time_remains(monkeypatch: pytest.MonkeyPatch, responses: list[dict[str, Any]]) -> None:
    calls: list[int] = []

    def flaky(props: dict[str, Any]) -> dict[str, str]:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not yet")
        return {}

    monkeypatch.setattr(search_setup, "setup", flaky)
    monkeypatch.setattr(search_setup.time, "sleep", lambda s: None)
    search_setup.on_event(dict(EVENT), Context(remaining_ms=300_000))
    assert len(calls) == 3 and responses[0]["Status"] == "SUCCESS"


def test_delete_does_nothing_but_answer(
    monkeypatch: pytest.MonkeyPatch, responses: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(search_setup, "setup", lambda props: pytest.fail("delete must not touch the cluster"))
    search_setup.on_event({**EVENT, "RequestType": "Delete", "PhysicalResourceId": "keep-me"}, Context())
    assert responses[0]["Status"] == "SUCCESS" and responses[0]["PhysicalResourceId"] == "keep-me"


def test_role_bodies_are_scoped_to_evidence_indexes() -> None:
    bodies = search_setup.role_bodies(["arn:w"], ["arn:r"])
    writer, writer_map = bodies[search_setup.WRITER_ROLE]
    reader, reader_map = bodies[search_setup.READER_ROLE]
    assert writer_map == {"backend_roles": ["arn:w"]} and reader_map == {"backend_roles": ["arn:r"]}
    patterns = writer["index_permissions"][0]["index_patterns"]
    assert len(patterns) == 36 and "*" not in patterns and not any(p.startswith(".") for p in patterns)
    # dense/hybrid GET the index (its _meta) before querying: `read` alone is refused (issue 15.10)
    assert reader["index_permissions"][0]["allowed_actions"] == [
        "read",
        "indices:admin/get",
        "indices:admin/mappings/get",
    ]
    assert "all_access" not in json.dumps(bodies)


def test_setup_uses_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    """setup() drives the real OpenSearch adapter; only its HTTP client is fake."""
    from evidence.search.opensearch import transport

    calls: list[tuple[str, str, Any]] = []

    class Transport:
        def perform_request(self, method: str, url: str, body: Any = None) -> dict[str, Any]:
            calls.append((method, url, body))
            return {}

    class Indices:
        def put_index_template(self, name: str, body: Any, **_: Any) -> dict[str, Any]:
            calls.append(("PUT", f"/_index_template/{name}", body))
            return {}

    class Pipelines:
        def put(self, id: str, body: Any, **_: Any) -> dict[str, Any]:
            calls.append(("PUT", f"/_search/pipeline/{id}", body))
            return {}

    class Cluster:
        def put_settings(self, body: Any, **_: Any) -> dict[str, Any]:
            calls.append(("PUT", "/_cluster/settings", body))
            return {}

    class Client:
        transport = Transport()
        indices = Indices()
        search_pipeline = Pipelines()
        cluster = Cluster()

        def info(self, **_: Any) -> dict[str, Any]:
            return {"version": {"number": "2.19.0"}}

    monkeypatch.setattr(transport, "build_client", lambda settings: Client())
    out = search_setup.setup({**EVENT["ResourceProperties"], "Bm25K1": "1.5", "Bm25B": "0.6"})
    urls = [url for _, url, _ in calls]
    assert urls[:5] == [
        "/_plugins/_security/api/roles/evidence_writer",
        "/_plugins/_security/api/rolesmapping/evidence_writer",
        "/_plugins/_security/api/audit/config",
        "/_index_template/evidence",
        "/_search/pipeline/evidence-hybrid-rrf",
    ]
    audit = calls[2][2]
    assert audit["enabled"] is True and audit["audit"]["enable_rest"] is True
    assert audit["audit"]["log_request_body"] is False, "request bodies hold customer documents"
    assert out["AuditLog"] == "enabled"
    template = calls[3][2]
    assert template["index_patterns"] == search_setup.INDEX_PATTERNS
    # the configured BM25 parameters, not the defaults (issue 15.10)
    assert template["template"]["settings"]["index"]["similarity"]["default"] == {
        "type": "BM25",
        "k1": 1.5,
        "b": 0.6,
    }
    assert out["Pipeline"] == "evidence-hybrid-rrf" and out["Fusion"] == "rrf"
    # no write may create an evidence index implicitly (docs/opensearch.md#no-implicit-index-creation)
    assert calls[-1] == ("PUT", "/_cluster/settings", {"persistent": {"action.auto_create_index": "+.*,-*"}})
    assert out["AutoCreateIndex"] == "+.*,-*"


def test_index_patterns_cover_exactly_the_names_evidence_allows() -> None:
    """The custom resource is bundled on its own; its patterns follow evidence.names' rule: one
    pattern per character an index name may start with, none for dot-prefixed system indexes."""
    import string

    from evidence.names import INDEX_NAME_RE

    starts = {c for c in string.printable if INDEX_NAME_RE.fullmatch(c)}
    assert set(search_setup.INDEX_PATTERNS) == {f"{c}*" for c in starts}
