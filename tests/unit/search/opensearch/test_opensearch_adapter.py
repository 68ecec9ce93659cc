"""The adapter's own logic where osmem cannot reach: hybrid modes and pipelines, k-NN score
conversion, retries and error translation, client construction (SigV4 / basic auth), selection
by settings. The client is a fake that validates every body it receives against the spec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from opensearchpy import exceptions as os_exc

from evidence.config import HybridMode, Settings
from evidence.errors import (
    BackendError,
    ConfigurationError,
    EmbedderMismatchError,
    IndexNotFoundError,
    RequestValidationError,
)
from evidence.records import ChunkKind
from evidence.search import opensearch_bodies as b
from evidence.search import opensearch_responses as responses
from evidence.search.factory import get_backend
from evidence.search.opensearch import OpenSearchBackend, build_client
from tests.contract.corpus import DIM, EMBEDDER, axis, corpus
from tests.unit.search.opensearch.spec_validator import OpenSearchSpec, validate_msearch

REPO = Path(__file__).resolve().parents[3]


def _hits(scores: list[float], first: int = 0) -> dict[str, Any]:
    chunks = [c for d in corpus() for c in d.chunks]
    hits = []
    for i, score in enumerate(scores):
        chunk = chunks[first + i]
        hits.append({"_id": chunk.chunk_id, "_score": score, "_source": b.chunk_source(chunk, "h", None)})
    return {"took": 1, "timed_out": False, "hits": {"hits": hits}}


class FakeClient:
    """Just enough of opensearch-py's client; checks each body against the spec."""

    def __init__(self, spec: OpenSearchSpec, *, version: str = "2.19.1") -> None:
        self.spec = spec
        self.version = version
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.search_errors: list[Exception] = []
        self.responses: dict[str, dict[str, Any]] = {
            "hybrid": _hits([0.9, 0.4]),
            "knn": _hits([0.95, 0.75], first=3),
            "match": _hits([7.5, 2.0]),
        }
        self.pipelines: set[str] = set()
        #: Each text's matches, as `_msearch` counts them (`track_total_hits` caps the total).
        self.totals: dict[str, int] = {}
        #: Whole `_msearch` answers (their `responses`), served before any counting.
        self.msearch_items: list[list[dict[str, Any]]] = []
        self.indices = SimpleNamespace(get=self._get_index, exists=self._exists, create=self._create)
        self.search_pipeline = SimpleNamespace(put=self._put_pipeline)
        #: What the nodes API reports (GET / may claim 7.10.2 under override_main_response_version).
        self.node_versions = [version]
        self.nodes = SimpleNamespace(info=self._nodes_info)

    def _nodes_info(self, **params: Any) -> dict[str, Any]:
        self.calls.append(("nodes.info", params))
        return {"nodes": {f"n{i}": {"version": v} for i, v in enumerate(self.node_versions)}}

    def _exists(self, index: str, **_: Any) -> bool:
        self.calls.append(("indices.exists", {"index": index}))
        return False

    def _create(self, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.spec.validate_request("put", "/{index}", body, version=self.version)
        self.calls.append(("indices.create", {"index": index, "body": body}))
        return {"acknowledged": True}

    def _get_index(self, index: str, **_: Any) -> dict[str, Any]:
        self.calls.append(("indices.get", {"index": index}))
        if index == "missing":
            raise os_exc.NotFoundError(
                404, "index_not_found_exception", {"error": {"reason": "no such index"}}
            )
        return {
            index: {
                "mappings": {
                    "_meta": {"embedder_id": EMBEDDER, "dimension": DIM},
                    "properties": {"generation": {"type": "keyword"}},
                }
            }
        }

    def _put_pipeline(self, id: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.spec.validate_request("put", "/_search/pipeline/{id}", body, version=self.version)
        self.calls.append(("pipeline.put", {"id": id, "body": body}))
        self.pipelines.add(id)
        return {"acknowledged": True}

    def info(self, **_: Any) -> dict[str, Any]:
        self.calls.append(("info", {}))
        if self.version == "7.10.2":  # compatibility.override_main_response_version
            return {"version": {"number": "7.10.2", "build_flavor": "oss"}}
        return {"version": {"number": self.version, "distribution": "opensearch"}}

    def msearch(self, body: list[dict[str, Any]], index: str, **params: Any) -> dict[str, Any]:
        validate_msearch(self.spec, body, version=self.version)
        params.pop("request_timeout", None)
        self.calls.append(("msearch", {"index": index, "body": body, **params}))
        if self.search_errors:
            raise self.search_errors.pop(0)
        if self.msearch_items:
            return {"took": 1, "responses": self.msearch_items.pop(0)}
        items = []
        for search in body[1::2]:
            text = search["query"]["bool"]["must"][0]["match"][b.LEXICAL_FIELD]["query"]
            value = self.totals.get(text, 0)
            relation = "gte" if value >= search["track_total_hits"] else "eq"
            total = {"value": min(value, search["track_total_hits"]), "relation": relation}
            items.append({"took": 1, "timed_out": False, "hits": {"total": total, "hits": []}, "status": 200})
        return {"took": 1, "responses": items}

    def search(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.spec.validate_request("post", "/{index}/_search", body, version=self.version)
        params.pop("request_timeout", None)
        self.calls.append(("search", {"index": index, "body": body, **params}))
        if self.search_errors:
            raise self.search_errors.pop(0)
        pipeline = params.get("search_pipeline")
        if pipeline is not None and pipeline not in self.pipelines:
            reason = f"Pipeline {pipeline} is not defined"
            info = {"error": {"root_cause": [{"type": "illegal_argument_exception", "reason": reason}]}}
            raise os_exc.RequestError(400, "illegal_argument_exception", info)
        query = body["query"]
        if "hybrid" in query:
            return self.responses["hybrid"]
        if "knn" in query:
            return self.responses["knn"]
        return self.responses["match"]


@pytest.fixture
def fake(spec: OpenSearchSpec) -> FakeClient:
    return FakeClient(spec)


def _backend(client: Any, **settings: Any) -> OpenSearchBackend:
    s = Settings(
        backend="opensearch", opensearch_endpoint="https://search-x.eu-west-1.es.amazonaws.com", **settings
    )
    return OpenSearchBackend(s, client=client, backoff_s=0.001)


def _searches(fake: FakeClient) -> list[dict[str, Any]]:
    return [kw for name, kw in fake.calls if name == "search"]


# --- dense / hybrid ---------------------------------------------------------------------------


def test_dense_converts_scores_to_cosine(fake: FakeClient) -> None:
    hits = _backend(fake).dense("idx", axis(0), k=2, filters={"type": "tc_files"})
    assert [round(h.score, 6) for h in hits] == [0.9, 0.5]
    assert all(h.dense == h.score for h in hits)
    (call,) = _searches(fake)
    assert call["body"]["query"]["knn"][b.VECTOR_FIELD]["filter"]["bool"]["filter"][1] == {
        "term": {"metadata.type": "tc_files"}
    }


def _light(response: dict[str, Any]) -> dict[str, Any]:
    """`response` as OpenSearch returns it to a light read: `_source` holds `LIGHT_FIELDS` only."""
    hits = [
        {**h, "_source": {k: v for k, v in h["_source"].items() if k in b.LIGHT_FIELDS}}
        for h in response["hits"]["hits"]
    ]
    return {**response, "hits": {"hits": hits}}


def _light_view(hits: list[Any]) -> list[tuple[Any, ...]]:
    """What a light read promises to answer of each hit: its score and `LIGHT_FIELDS`."""
    return [
        (
            h.score,
            h.chunk.chunk_id,
            h.chunk.document_id,
            h.chunk.kind,
            h.chunk.char_start,
            h.chunk.char_end,
            h.chunk.sequence,
        )
        for h in hits
    ]


def test_a_light_dense_read_asks_only_for_ids_and_offsets(fake: FakeClient) -> None:
    """`dense(..., light=True)` asks `_source` for `LIGHT_FIELDS` only (the body is valid: the
    fake checks it) and answers the same hits, scores, ids and offsets, without the text."""
    full = _backend(fake).dense("idx", axis(0), k=2, filters={"type": "tc_files"})
    fake.responses["knn"] = _light(fake.responses["knn"])
    light = _backend(fake).dense("idx", axis(0), k=2, filters={"type": "tc_files"}, light=True)
    before, after = _searches(fake)
    assert before["body"]["_source"] == {"excludes": [b.VECTOR_FIELD, b.LEXICAL_FIELD, b.ANCHOR_FIELD]}
    assert after["body"]["_source"] == {"includes": list(b.LIGHT_FIELDS)}
    assert {k: v for k, v in after["body"].items() if k != "_source"} == {
        k: v for k, v in before["body"].items() if k != "_source"
    }
    assert _light_view(light) == _light_view(full)
    assert all(h.chunk.text == "" for h in light) and any(h.chunk.text for h in full)


def _assert_one_light_knn(fake: FakeClient) -> None:
    """The searches sent hold one k-NN read, and it asks `_source` for `LIGHT_FIELDS` only."""
    knn = [s for s in _searches(fake) if "knn" in s["body"]["query"]]
    assert len(knn) == 1
    assert knn[0]["body"]["_source"] == {"includes": list(b.LIGHT_FIELDS)}


def test_the_focus_anchors_knn_read_is_light(fake: FakeClient) -> None:
    """The focus span anchor's `dense` statistics (`SpanAnchors._statistics` ->
    `hybrid_features`) read the passages of the hits' documents by k-NN for `passage_scores`
    alone (ids, offsets, scores): that read asks OpenSearch for `LIGHT_FIELDS` only."""
    from evidence.verbatim.cascade import SpanAnchors
    from evidence.verbatim.cascade_model import CascadeConfig

    spans = [c for d in corpus() for c in d.chunks][:3]
    ctx = SimpleNamespace(
        backend=_backend(fake), index="idx", query="encryption at rest", query_vector=axis(0)
    )
    SpanAnchors._statistics(spans, ctx, CascadeConfig())
    _assert_one_light_knn(fake)


def test_the_verbatim_span_scorers_knn_read_is_light(fake: FakeClient) -> None:
    """`HYBRID_FACTSPAN`'s ranking (`CascadePaths.hybrid_ranking`) reads the scope's passages by
    k-NN for `passage_scores` alone, as the anchor does: that read asks for `LIGHT_FIELDS` only."""
    from evidence.verbatim.cascade import _NO_PLAN, VerbatimCascade
    from evidence.verbatim.cascade_model import CascadeConfig
    from evidence.verbatim.cascade_paths import CascadePaths

    spans = [c for d in corpus() for c in d.chunks][:3]
    cascade = VerbatimCascade(CascadeConfig())
    question = "encryption at rest"
    state = CascadePaths.over_spans(
        cascade,
        spans,
        backend=_backend(fake),
        index="idx",
        question=question,
        plan=_NO_PLAN,
        q_groups=cascade._question_terms(question, _NO_PLAN, []),
        query_vector=axis(0),
        headers=set(),
    )
    state.hybrid_ranking()
    _assert_one_light_knn(fake)


def test_dense_refuses_wrong_dimension(fake: FakeClient) -> None:
    with pytest.raises(EmbedderMismatchError, match="8-dim"):
        _backend(fake).dense("idx", np.ones(3, dtype=np.float32), k=2)
    assert _searches(fake) == []


def test_hybrid_server_mode_uses_rrf_pipeline_on_219(fake: FakeClient) -> None:
    fake.pipelines.add(b.RRF_PIPELINE)
    backend = _backend(fake)
    result = backend.hybrid("idx", "encryption", axis(0), k=10, pagination_depth=100)
    assert result.mode is HybridMode.SERVER and result.fusion == "rrf"
    assert result.fused is not None and [h.score for h in result.fused] == [0.9, 0.4]
    (search,) = _searches(fake)
    assert search["search_pipeline"] == b.RRF_PIPELINE
    assert search["body"]["query"]["hybrid"]["pagination_depth"] == 100
    assert search["body"]["size"] == 10
    assert not any(n == "pipeline.put" for n, _ in fake.calls)  # queries never put routinely


def test_hybrid_puts_a_missing_pipeline_once_and_retries(fake: FakeClient) -> None:
    backend = _backend(fake)
    result = backend.hybrid("idx", "encryption", axis(0), k=10)
    assert result.fused is not None and len(result.fused) == 2
    backend.hybrid("idx", "encryption", axis(0), k=10)
    assert [n for n, _ in fake.calls].count("pipeline.put") == 1
    assert len(_searches(fake)) == 3  # refused, retried, then the second query


def test_create_index_puts_the_pipeline(fake: FakeClient) -> None:
    backend = _backend(fake)
    backend.create_index("fresh", embedder_id=EMBEDDER, dimension=DIM)
    assert [kw["id"] for n, kw in fake.calls if n == "pipeline.put"] == [b.RRF_PIPELINE]
    backend.hybrid("fresh", "q", axis(0), k=3)
    assert [n for n, _ in fake.calls].count("pipeline.put") == 1


def test_create_index_without_pipeline_rights_still_works(fake: FakeClient) -> None:
    def refuse(id: str, body: dict[str, Any], **_: Any) -> None:
        raise os_exc.AuthorizationException(403, "security_exception", {})

    fake.search_pipeline = SimpleNamespace(put=refuse)
    info = _backend(fake).create_index("fresh", embedder_id=EMBEDDER, dimension=DIM)
    assert info.embedder_id == EMBEDDER


def test_hybrid_server_mode_falls_back_to_normalization_before_219(spec: OpenSearchSpec) -> None:
    fake = FakeClient(spec, version="2.17.0")
    result = _backend(fake).hybrid("idx", "encryption", axis(0), k=5)
    assert result.fusion == "normalization"
    (put,) = [kw for n, kw in fake.calls if n == "pipeline.put"]
    assert put["id"] == b.MINMAX_PIPELINE
    with pytest.raises(ConfigurationError, match=r"2\.19"):
        OpenSearchBackend(
            Settings(backend="opensearch", opensearch_endpoint="http://x"), client=fake, fusion="rrf"
        ).hybrid("idx", "q", axis(0), k=5)


def test_hybrid_explain_attaches_per_leg_scores(fake: FakeClient) -> None:
    fake.pipelines.add(b.RRF_PIPELINE)
    result = _backend(fake).hybrid("idx", "encryption", axis(0), k=2, explain=True)
    assert result.fused is not None
    first = result.fused[0]
    # chunk 0 came back from the lexical leg (7.5) but not from the k-NN leg (chunks 3, 4)
    assert (first.score, first.lexical, first.dense) == (0.9, 7.5, None)
    assert len(_searches(fake)) == 3


def test_hybrid_client_mode_returns_both_legs(fake: FakeClient) -> None:
    result = _backend(fake, opensearch_hybrid_mode="client").hybrid(
        "idx", "encryption", axis(0), k=2, filters={"round_number": 1}, pagination_depth=50
    )
    assert result.mode is HybridMode.CLIENT and result.fused is None
    assert [h.lexical for h in result.lexical] == [7.5, 2.0]
    assert [round(h.dense or 0, 6) for h in result.dense] == [0.9, 0.5]
    sizes = [s["body"]["size"] for s in _searches(fake)]
    assert sizes == [50, 50]
    assert not any(n == "pipeline.put" for n, _ in fake.calls)


def test_serverless_never_asks_for_version_and_has_no_rrf(fake: FakeClient) -> None:
    backend = _backend(fake, opensearch_service="aoss")
    result = backend.hybrid("idx", "q", axis(0), k=3)
    assert result.fusion == "normalization"
    assert not any(n == "info" for n, _ in fake.calls)


# --- retries and errors -------------------------------------------------------------------------


def test_retries_transient_errors_with_backoff(fake: FakeClient) -> None:
    fake.search_errors = [
        os_exc.TransportError(429, "too_many_requests", {}),
        os_exc.TransportError(503, "unavailable", {}),
    ]
    hits = _backend(fake).lexical("idx", "encryption", k=2)
    assert len(hits) == 2 and len(_searches(fake)) == 3


def test_gives_up_after_max_retries(fake: FakeClient) -> None:
    fake.search_errors = [os_exc.TransportError(502, "bad_gateway", {}) for _ in range(5)]
    with pytest.raises(BackendError, match="502"):
        _backend(fake).lexical("idx", "q", k=1)
    assert len(_searches(fake)) == 4  # 1 + max_retries (3)


def test_bad_request_is_not_retried_and_names_the_reason(fake: FakeClient) -> None:
    info = {
        "error": {"root_cause": [{"type": "mapper_parsing_exception", "reason": "failed to parse field"}]}
    }
    fake.search_errors = [os_exc.RequestError(400, "search_phase_execution_exception", info)]
    with pytest.raises(BackendError, match="mapper_parsing_exception: failed to parse field"):
        _backend(fake).lexical("idx", "q", k=1)
    assert len(_searches(fake)) == 1


def test_a_question_past_the_cluster_s_clause_limit_is_the_caller_s_to_shorten(fake: FakeClient) -> None:
    info = {
        "error": {
            "root_cause": [
                {
                    "type": "too_many_clauses",
                    "reason": "Query contains too many nested clauses; maxClauseCount is set to 1024",
                }
            ]
        }
    }
    fake.search_errors = [os_exc.RequestError(400, "search_phase_execution_exception", info)]
    with pytest.raises(RequestValidationError, match="max_clause_count") as caught:
        _backend(fake).lexical("idx", "q", k=1)
    assert caught.value.status == 422 and caught.value.field == "query"
    assert len(_searches(fake)) == 1


def test_auth_failure_explains_what_to_check(fake: FakeClient) -> None:
    fake.search_errors = [os_exc.AuthorizationException(403, "security_exception", {})]
    with pytest.raises(BackendError, match="EVIDENCE_OPENSEARCH_SERVICE"):
        _backend(fake).lexical("idx", "q", k=1)


def test_connection_errors_are_retried_then_reported(fake: FakeClient) -> None:
    fake.search_errors = [os_exc.ConnectionError("N/A", "refused", OSError("refused")) for _ in range(4)]
    with pytest.raises(BackendError, match="cannot reach OpenSearch"):
        _backend(fake).lexical("idx", "q", k=1)


def test_missing_index(fake: FakeClient) -> None:
    with pytest.raises(IndexNotFoundError):
        _backend(fake).get_index("missing")


@pytest.mark.parametrize(
    "name", ["../etc", "UPPER", "_hidden", "-dash", "a/b", "a b", "a*", "", "x" * 65, ".."]
)
def test_index_names_are_validated_before_any_request(fake: FakeClient, name: str) -> None:
    with pytest.raises(RequestValidationError):
        _backend(fake).lexical(name, "q", k=1)
    assert fake.calls == []


@pytest.mark.parametrize("key", ["", "_id", ".x", "a..b", "x."])
def test_bad_filter_keys(fake: FakeClient, key: str) -> None:
    with pytest.raises(RequestValidationError):
        _backend(fake).lexical("idx", "q", k=1, filters={key: "v"})


# --- client construction ----------------------------------------------------------------------


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import opensearchpy

    seen: dict[str, Any] = {}

    def fake_client(**kwargs: Any) -> SimpleNamespace:
        seen.update(kwargs)
        return SimpleNamespace(**kwargs)

    monkeypatch.setattr(opensearchpy, "OpenSearch", fake_client)
    return seen


def test_basic_auth_for_self_managed(captured: dict[str, Any]) -> None:
    build_client(
        Settings(
            opensearch_endpoint="https://os.internal:9200",
            opensearch_username="admin",
            opensearch_password="s3cret",
            opensearch_timeout_s=7,
            opensearch_verify_certs=False,
        )
    )
    assert captured["http_auth"] == ("admin", "s3cret")
    assert captured["timeout"] == 7 and captured["verify_certs"] is False and captured["use_ssl"] is True
    assert captured["max_retries"] == 0  # ours, with backoff


def _fake_boto3(monkeypatch: pytest.MonkeyPatch, *, credentials: Any, region: str | None) -> None:
    import boto3

    class Session:
        region_name = region

        def get_credentials(self) -> Any:
            return credentials

    monkeypatch.setattr(boto3, "Session", Session)


def _signed_scope(auth: Any) -> str:
    """Sign a real request and read the credential scope back from its Authorization header."""
    import requests

    prepared = requests.Request("GET", "https://host.example/idx/_search").prepare()
    header = str(auth(prepared).headers["Authorization"])
    credential = header.split("Credential=")[1].split(",", maxsplit=1)[0]
    return credential.split("/", 2)[2]


def test_sigv4_for_serverless(captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.credentials import Credentials
    from opensearchpy import AWSV4SignerAuth

    _fake_boto3(monkeypatch, credentials=Credentials("AKIDEXAMPLE", "secret"), region=None)
    build_client(
        Settings(
            opensearch_endpoint="https://abc123.eu-west-1.aoss.amazonaws.com",
            opensearch_service="aoss",
            aws_region="eu-west-1",
        )
    )
    auth = captured["http_auth"]
    assert isinstance(auth, AWSV4SignerAuth)
    assert _signed_scope(auth) == "eu-west-1/aoss/aws4_request"


def test_sigv4_builds_a_real_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kwargs are accepted by opensearch-py itself, and requests go out signed."""
    from botocore.credentials import Credentials
    from opensearchpy import RequestsHttpConnection

    _fake_boto3(monkeypatch, credentials=Credentials("AK", "SK"), region="eu-west-1")
    client = build_client(
        Settings(opensearch_endpoint="https://abc.eu-west-1.aoss.amazonaws.com", opensearch_service="aoss")
    )
    (conn,) = client.transport.connection_pool.connections
    assert isinstance(conn, RequestsHttpConnection)
    assert _signed_scope(conn.session.auth) == "eu-west-1/aoss/aws4_request"
    client.close()


def test_sigv4_region_from_endpoint(captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.credentials import Credentials

    _fake_boto3(monkeypatch, credentials=Credentials("AK", "SK"), region=None)
    build_client(Settings(opensearch_endpoint="search-dom-x1.ap-southeast-2.es.amazonaws.com"))
    assert _signed_scope(captured["http_auth"]) == "ap-southeast-2/es/aws4_request"
    assert captured["hosts"] == ["https://search-dom-x1.ap-southeast-2.es.amazonaws.com"]


def test_sigv4_without_credentials_is_a_configuration_error(
    captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_boto3(monkeypatch, credentials=None, region="eu-west-1")
    with pytest.raises(ConfigurationError, match="credentials"):
        build_client(Settings(opensearch_endpoint="https://x.eu-west-1.es.amazonaws.com"))


def test_no_endpoint_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="EVIDENCE_OPENSEARCH_ENDPOINT"):
        build_client(Settings())


def test_client_is_built_lazily_once(captured: dict[str, Any]) -> None:
    backend = OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint="http://127.0.0.1:9"))
    assert captured == {}
    first = backend.client
    assert backend.client is first and captured["hosts"] == ["http://127.0.0.1:9"]


# --- selection by settings -------------------------------------------------------------------


def test_factory_selects_by_settings(tmp_path: Path) -> None:
    from evidence.search.embedded import EmbeddedBackend

    emb = get_backend(Settings(store_dir=tmp_path))
    assert isinstance(emb, EmbeddedBackend)
    emb.close()
    osb = get_backend(
        Settings(backend="opensearch", opensearch_endpoint="https://x.eu-west-1.es.amazonaws.com")
    )
    assert isinstance(osb, OpenSearchBackend) and osb._client is None
    with pytest.raises(ConfigurationError):
        get_backend(Settings(backend="opensearch"))


def test_factory_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENCE_BACKEND", "opensearch")
    monkeypatch.setenv("EVIDENCE_OPENSEARCH_ENDPOINT", "https://abc.us-east-1.aoss.amazonaws.com")
    monkeypatch.setenv("EVIDENCE_OPENSEARCH_SERVICE", "aoss")
    monkeypatch.setenv("EVIDENCE_OPENSEARCH_HYBRID_MODE", "client")
    backend = get_backend(Settings())
    assert isinstance(backend, OpenSearchBackend) and backend.serverless
    assert backend.settings.opensearch_hybrid_mode is HybridMode.CLIENT


def test_importing_the_adapter_loads_no_sdk() -> None:
    code = (
        "import sys, evidence.search.opensearch, evidence.search.factory, evidence.migrate;"
        "bad = [m for m in ('opensearchpy', 'boto3', 'botocore', 'tantivy') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={"PYTHONPATH": "shared"})


def test_hybrid_body_builder_is_what_the_adapter_sends(fake: FakeClient) -> None:
    """No drift between the spec-validated builder and the adapter's request."""
    fake.pipelines.add(b.RRF_PIPELINE)
    _backend(fake).hybrid("idx", "encryption", axis(1), k=4, filters={"type": "x"}, pagination_depth=40)
    (search,) = _searches(fake)
    expected = b.hybrid_body(
        "encryption",
        [float(v) for v in axis(1)],
        k=4,
        filters={"type": "x"},
        kind=ChunkKind.PASSAGE,
        pagination_depth=40,
    )
    assert search["body"] == expected


# --- versions (issue 15.7) ---------------------------------------------------------------------


def test_an_older_cluster_gets_bodies_it_accepts(spec: OpenSearchSpec) -> None:
    """2.17: lucene engine (faiss has cosinesimil only from 2.19), no pagination_depth, min-max."""
    fake = FakeClient(spec, version="2.17.0")
    backend = _backend(fake)
    backend.create_index("fresh", embedder_id=EMBEDDER, dimension=DIM)
    (create,) = [kw for n, kw in fake.calls if n == "indices.create"]  # validated at 2.17 by the fake
    assert create["body"]["mappings"]["properties"][b.VECTOR_FIELD]["method"]["engine"] == "lucene"
    backend.hybrid("fresh", "encryption", axis(0), k=5, pagination_depth=40)
    (search,) = _searches(fake)
    assert "pagination_depth" not in search["body"]["query"]["hybrid"]
    assert search["body"]["query"]["hybrid"]["queries"][1]["knn"][b.VECTOR_FIELD]["k"] == 40
    assert search["search_pipeline"] == b.MINMAX_PIPELINE


def test_clusters_older_than_the_minimum_are_refused_clearly(spec: OpenSearchSpec) -> None:
    fake = FakeClient(spec, version="2.9.0")
    with pytest.raises(
        ConfigurationError, match=r"2\.9\.0 is older than the oldest supported version \(2\.10"
    ):
        _backend(fake).create_index("fresh", embedder_id=EMBEDDER, dimension=DIM)
    assert not any(n == "indices.create" for n, _ in fake.calls)


def test_version_behind_override_main_response_version_comes_from_the_nodes(spec: OpenSearchSpec) -> None:
    fake = FakeClient(spec, version="7.10.2")
    fake.node_versions = ["2.19.1", "2.18.0"]  # mid-upgrade: the oldest node decides
    backend = _backend(fake)
    assert backend.cluster_version() == (2, 18, 0)
    assert backend.capabilities().knn_engine == "lucene" and not backend.capabilities().pagination_depth
    assert [n for n, _ in fake.calls] == ["info", "nodes.info"]


def test_an_explicit_version_skips_detection(spec: OpenSearchSpec) -> None:
    fake = FakeClient(spec)
    backend = _backend(fake, opensearch_version="2.11.1")
    assert backend.cluster_version() == (2, 11, 1) and fake.calls == []


# --- endpoint auto-detection (issue 15.8) --------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "explicit", "service"),
    [
        ("https://abc123.eu-west-1.aoss.amazonaws.com", None, "aoss"),
        ("abc123.us-east-1.aoss.amazonaws.com", None, "aoss"),
        ("https://search-x.eu-west-1.es.amazonaws.com", None, "es"),
        ("http://localhost:9200", None, "es"),
        ("https://abc123.eu-west-1.aoss.amazonaws.com", "es", "es"),  # explicit wins
    ],
)
def test_the_service_follows_the_endpoint_unless_set(
    endpoint: str, explicit: str | None, service: str
) -> None:
    settings = Settings(backend="opensearch", opensearch_endpoint=endpoint, opensearch_service=explicit)
    backend = OpenSearchBackend(settings)
    assert backend.service == service and backend.serverless is (service == "aoss")


def test_an_aoss_endpoint_is_signed_as_aoss_without_the_setting(
    captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.credentials import Credentials

    _fake_boto3(monkeypatch, credentials=Credentials("AK", "SK"), region=None)
    build_client(Settings(opensearch_endpoint="https://abc123.eu-west-1.aoss.amazonaws.com"))
    assert _signed_scope(captured["http_auth"]) == "eu-west-1/aoss/aws4_request"


# --- k-NN scores per engine (issue 15.9) ---------------------------------------------------------


def _lucene_score(q: np.ndarray, x: np.ndarray) -> float:
    """Lucene's VectorSimilarityFunction.COSINE.compare: (1 + cos) / 2; the k-NN Lucene engine
    returns Lucene's score unchanged (k-NN `Lucene.score`)."""
    cos = float(q @ x / (np.linalg.norm(q) * np.linalg.norm(x)))
    return (1 + cos) / 2


def _faiss_score(q: np.ndarray, x: np.ndarray) -> float:
    """k-NN >= 2.19: faiss runs inner product on normalised vectors; `Faiss.SCORE_TRANSLATIONS`
    passes 1 - ip to `SpaceType.COSINESIMIL.scoreTranslation`, max((2 - d) / 2, 0) (k-NN #2375)."""
    ip = float((q / np.linalg.norm(q)) @ (x / np.linalg.norm(x)))
    d = 1 - ip
    return max((2 - d) / 2, 0.0)


@pytest.mark.parametrize(("engine", "score"), [("lucene", _lucene_score), ("faiss", _faiss_score)])
def test_knn_score_converts_back_to_cosine_per_engine(engine: str, score: Any) -> None:
    rng = np.random.default_rng(15)
    for _ in range(200):
        q, x = rng.normal(size=DIM), rng.normal(size=DIM)
        cos = float(q @ x / (np.linalg.norm(q) * np.linalg.norm(x)))
        assert responses.cosine_from_score(score(q, x), engine) == pytest.approx(cos, abs=1e-9)
    with pytest.raises(ValueError, match="nmslib"):
        responses.cosine_from_score(0.5, "nmslib")


def test_dense_uses_the_indexs_engine(spec: OpenSearchSpec) -> None:
    fake = FakeClient(spec)
    fake.responses["knn"] = _hits([0.75], first=3)
    hits = _backend(fake).dense("idx", axis(0), k=1)
    assert hits[0].score == pytest.approx(0.5)  # (1 + 0.5) / 2 = 0.75


def test_a_zero_query_vector_sends_no_knn_query(fake: FakeClient) -> None:
    """A cosine space refuses a zero vector (k-NN: "zero vector is not supported when space
    type is [cosinesimil]"); the adapter answers similarity 0, as the embedded backend does."""
    fake.responses["match"] = _hits([0.0, 0.0], first=0)
    hits = _backend(fake).dense("idx", np.zeros(DIM, dtype=np.float32), k=2)
    assert [h.score for h in hits] == [0.0, 0.0]
    (search,) = _searches(fake)
    assert "knn" not in json.dumps(search["body"])
    assert {"exists": {"field": b.VECTOR_FIELD}} in search["body"]["query"]["bool"]["filter"]
    hybrid = _backend(fake).hybrid("idx", "q", np.zeros(DIM, dtype=np.float32), k=2)
    assert hybrid.mode is HybridMode.CLIENT and hybrid.fused is None  # no pipeline query either


# --- term counts (the refusal signal's index counts) ----------------------------------------------


def _msearches(fake: FakeClient) -> list[dict[str, Any]]:
    return [kw for name, kw in fake.calls if name == "msearch"]


def _item_error(status: int, kind: str, reason: str) -> dict[str, Any]:
    return {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }


def test_term_counts_are_one_msearch_with_the_requests_filters(fake: FakeClient) -> None:
    fake.totals = {"risc": 73, "instal": 4}
    texts = ["risc", "instal", "ketamin", "risc", "  "]
    counts = _backend(fake).term_counts("idx", texts, cap=50, filters={"tenant": "a", "type": ["x", "y"]})
    assert counts == {"risc": 50, "instal": 4, "ketamin": 0, "  ": 0}
    assert _searches(fake) == []
    (call,) = _msearches(fake)
    assert call["index"] == "idx"
    lines = call["body"]
    assert lines[::2] == [{}, {}, {}]  # the index is the request's; a blank text is not sent
    for search, text in zip(lines[1::2], ["risc", "instal", "ketamin"], strict=True):
        lexical = b.lexical_body(
            text, k=50, filters={"tenant": "a", "type": ["x", "y"]}, kind=ChunkKind.PASSAGE
        )
        # The same match query and filter clauses as `lexical`; counted, not fetched.
        assert search == {"size": 0, "query": lexical["query"], "track_total_hits": 50}
    assert {"term": {"metadata.tenant": "a"}} in lines[1]["query"]["bool"]["filter"]
    assert {"term": {"kind": "passage"}} in lines[1]["query"]["bool"]["filter"]


def test_term_counts_send_nothing_for_nothing_to_count(fake: FakeClient) -> None:
    assert _backend(fake).term_counts("idx", ["", " "], cap=50) == {"": 0, " ": 0}
    assert _backend(fake).term_counts("idx", ["risc"], cap=0) == {"risc": 0}
    assert fake.calls == []
    with pytest.raises(RequestValidationError):
        _backend(fake).term_counts("UPPER", ["risc"], cap=50)
    assert fake.calls == []


def test_term_counts_retry_and_translate_like_every_search(fake: FakeClient) -> None:
    # A whole-request 429, then a search inside the msearch refused with 503: both retried.
    fake.search_errors = [os_exc.TransportError(429, "too_many_requests", {})]
    fake.msearch_items = [[_item_error(503, "unavailable", "busy")]]
    fake.totals = {"risc": 2}
    assert _backend(fake).term_counts("idx", ["risc"], cap=50) == {"risc": 2}
    assert len(_msearches(fake)) == 3
    # A failed search inside it is the failed search's error: a missing index...
    fake.calls.clear()
    fake.msearch_items = [[_item_error(404, "index_not_found_exception", "no such index [idx]")]]
    with pytest.raises(IndexNotFoundError):
        _backend(fake).term_counts("idx", ["risc"], cap=50)
    # ...a bad request, named and not retried...
    fake.msearch_items = [[_item_error(400, "search_phase_execution_exception", "failed to create query")]]
    with pytest.raises(BackendError, match="failed to create query"):
        _backend(fake).term_counts("idx", ["risc"], cap=50)
    assert len(_msearches(fake)) == 2
    # ...and retries used up end as every search's do.
    fake.search_errors = [os_exc.TransportError(502, "bad_gateway", {}) for _ in range(5)]
    with pytest.raises(BackendError, match="502"):
        _backend(fake).term_counts("idx", ["risc"], cap=50)
    assert len(_msearches(fake)) == 2 + 4
    fake.msearch_items = [[]]
    with pytest.raises(BackendError, match="answered 0 searches for 1"):
        _backend(fake).term_counts("idx", ["risc"], cap=50)
