"""Rerankers: Cohere against a loopback server speaking the v2 rerank protocol, Bedrock via Stubber."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evidence.config import RerankerKind, Settings
from evidence.errors import ConfigurationError
from evidence.profiles import get_profile
from evidence.rank.rerank import (
    BedrockReranker,
    CohereReranker,
    RerankError,
    bedrock_model_arn,
    build_reranker,
)
from tests.unit.rank.rankkit import chunk, ctx, new_backend


@dataclass
class CohereFake:
    """Scripted replies: each entry is (status, delay_s); then 200 with word-overlap scores."""

    script: list[tuple[int, float]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    #: Set at teardown: a reply held back to outlast a client's timeout is let go at once, so a
    #: delay can be far longer than any timeout under test without slowing the suite.
    release: threading.Event = field(default_factory=threading.Event)


def _reply(fake: CohereFake, body: dict[str, Any]) -> tuple[int, float, dict[str, Any]]:
    status, delay = fake.script.pop(0) if fake.script else (200, 0.0)
    if status == 429:
        return (
            status,
            delay,
            {"message": "You are using a Trial key, which is limited to 10 API calls / minute."},
        )
    if status >= 400:
        return status, delay, {"message": "internal server error"}
    q = set(body["query"].lower().split())
    scored = [
        {"index": i, "relevance_score": round(len(q & set(d.lower().split())) / max(len(q), 1), 6)}
        for i, d in enumerate(body["documents"])
    ]
    scored.sort(key=lambda r: (-r["relevance_score"], r["index"]))
    return (
        200,
        delay,
        {
            "id": "fake-rerank-1",
            "results": scored[: body.get("top_n") or len(scored)],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        },
    )


@pytest.fixture
def cohere_server() -> Iterator[tuple[str, CohereFake]]:
    fake = CohereFake()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.paths.append(self.path)
            fake.requests.append(body)
            fake.headers.append(dict(self.headers))
            if self.path != "/v2/rerank":
                status, delay, payload = 404, 0.0, {"message": "not found"}
            else:
                status, delay, payload = _reply(fake, body)
            fake.release.wait(delay)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and went away

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", fake
    finally:
        fake.release.set()
        server.shutdown()
        server.server_close()


def cohere(url: str, **kw: Any) -> CohereReranker:
    sleeps: list[float] = []
    r = CohereReranker(api_key="test-key", base_url=url, sleep=sleeps.append, **kw)
    r.sleeps = sleeps  # type: ignore[attr-defined]
    return r


DOCS = ["we encrypt data at rest", "cafeteria menu", "data retention at rest"]


def test_cohere_request_shape_and_results(cohere_server: tuple[str, CohereFake]) -> None:
    url, fake = cohere_server
    out = cohere(url, max_tokens_per_doc=512).rerank("encrypt data at rest", DOCS, top_n=2)
    assert out == [(0, 1.0), (2, 0.75)]
    assert fake.paths == ["/v2/rerank"]
    body = fake.requests[0]
    assert body["model"] == "rerank-v3.5" and body["query"] == "encrypt data at rest"
    assert body["documents"] == DOCS and body["top_n"] == 2 and body["max_tokens_per_doc"] == 512
    assert fake.headers[0]["Authorization"] == "Bearer test-key"


def test_cohere_empty_input_makes_no_call(cohere_server: tuple[str, CohereFake]) -> None:
    url, fake = cohere_server
    assert cohere(url).rerank("q", []) == []
    assert fake.requests == []


def test_cohere_asks_top_n_within_the_texts_and_refuses_too_many_without_a_call(
    cohere_server: tuple[str, CohereFake],
) -> None:
    url, fake = cohere_server
    cohere(url).rerank("q", DOCS, top_n=99)
    cohere(url).rerank("q", DOCS, top_n=0)
    cohere(url).rerank("q", DOCS)
    assert [b["top_n"] for b in fake.requests] == [3, 1, 3]
    with pytest.raises(RerankError, match="at most 1000 documents"):
        cohere(url).rerank("q", ["x"] * 1001)
    assert len(fake.requests) == 3


@pytest.mark.parametrize("status", [429, 500, 503])
def test_cohere_retries_then_succeeds(cohere_server: tuple[str, CohereFake], status: int) -> None:
    url, fake = cohere_server
    fake.script = [(status, 0.0), (status, 0.0)]
    r = cohere(url, retries=2)
    assert r.rerank("data", DOCS)[0][1] > 0
    assert len(fake.requests) == 3 and len(r.sleeps) == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize(("status", "reason"), [(429, "throttled"), (500, "unavailable")])
def test_cohere_gives_up_after_retries(
    cohere_server: tuple[str, CohereFake], status: int, reason: str
) -> None:
    url, fake = cohere_server
    fake.script = [(status, 0.0)] * 5
    with pytest.raises(RerankError) as e:
        cohere(url, retries=1).rerank("data", DOCS)
    assert e.value.reason == reason and len(fake.requests) == 2
    assert e.value.message.startswith(f"{status} from Cohere: ") and e.value.message.endswith("(2 attempts)")


def test_cohere_client_errors_are_not_retried(cohere_server: tuple[str, CohereFake]) -> None:
    url, fake = cohere_server
    fake.script = [(400, 0.0)]
    with pytest.raises(RerankError) as e:
        cohere(url, retries=3).rerank("data", DOCS)
    assert e.value.reason == "error" and len(fake.requests) == 1
    assert e.value.message == "400 from Cohere: internal server error"


def test_cohere_refused_key_says_so(cohere_server: tuple[str, CohereFake]) -> None:
    url, fake = cohere_server
    fake.script = [(401, 0.0)]
    with pytest.raises(RerankError) as e:
        cohere(url, retries=3).rerank("data", DOCS)
    assert e.value.reason == "error" and len(fake.requests) == 1
    assert e.value.message == "401 from Cohere: the API key was refused (EVIDENCE_COHERE_API_KEY)"


def test_cohere_unreachable_says_where() -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        unused_port = sock.getsockname()[1]
    with pytest.raises(RerankError) as e:
        cohere(f"http://127.0.0.1:{unused_port}", retries=0).rerank("data", DOCS)
    assert e.value.reason == "unavailable"
    assert e.value.message.startswith(f"cannot reach Cohere at http://127.0.0.1:{unused_port}")


def test_cohere_timeout(cohere_server: tuple[str, CohereFake]) -> None:
    url, fake = cohere_server
    fake.script = [(200, 60.0)]  # far past the timeout: a client that waited would take a minute
    t0 = time.perf_counter()
    with pytest.raises(RerankError) as e:
        cohere(url, timeout_s=0.2, retries=2).rerank("data", DOCS)
    assert e.value.reason == "timeout" and time.perf_counter() - t0 < 20
    assert e.value.message == "timeout after 0.2 s waiting for Cohere"
    assert len(fake.requests) == 1  # a timeout is not retried: the latency budget is spent


def test_cohere_backoff_grows_and_honours_retry_after(cohere_server: tuple[str, CohereFake]) -> None:
    url, fake = cohere_server
    fake.script = [(429, 0.0), (500, 0.0)]  # the fake's 429 carries Retry-After: 0
    r = cohere(url, retries=2, backoff_s=0.1, max_backoff_s=1.0)
    assert r.rerank("data", DOCS)[0][1] > 0
    first, second = r.sleeps  # type: ignore[attr-defined]
    assert first == 0.0 and 0.1 <= second <= 0.2  # Retry-After, then 0.1 * 2^1 with jitter


def test_cohere_retries_stop_at_the_requests_deadline(cohere_server: tuple[str, CohereFake]) -> None:
    from evidence.retry import deadline_scope

    url, fake = cohere_server
    fake.script = [(503, 0.0)] * 5
    r = cohere(url, retries=4, backoff_s=8.0, max_backoff_s=16.0)  # first wait: 4-8 s
    r._get_client()  # the SDK's import is not what this measures
    # 3.5 s: the first answer comes back inside it even on a loaded runner, the wait would not.
    with deadline_scope(3.5), pytest.raises(RerankError) as e:
        r.rerank("data", DOCS)
    assert e.value.reason == "unavailable" and len(fake.requests) == 1  # the wait would pass it
    assert r.sleeps == []  # type: ignore[attr-defined]


def test_profile_falls_back_when_cohere_times_out(
    tmp_path: Path, cohere_server: tuple[str, CohereFake], caplog: pytest.LogCaptureFixture
) -> None:
    url, fake = cohere_server
    fake.script = [(200, 1.0)]
    backend = new_backend(tmp_path, [chunk(f"c{i}", f"encrypt data at rest {i}") for i in range(8)])
    vrm = get_profile("vrm")
    c = ctx(backend, params=vrm.params({}), query="encrypt data", reranker=cohere(url, timeout_s=0.2))
    with caplog.at_level(logging.WARNING, logger="evidence.rank.stages"):
        out = vrm.run(c)
    assert out.degraded == ["rerank:timeout"] and len(out.hits) == 6
    rerank = next(r for r in out.stages if r.name == "rerank")
    assert rerank.detail is not None and rerank.detail["fallback"] == "timeout after 0.2 s waiting for Cohere"
    assert "cohere reranker fell back to first-stage order: timeout after 0.2 s" in caplog.text


def test_profile_uses_cohere_scores(tmp_path: Path, cohere_server: tuple[str, CohereFake]) -> None:
    url, _ = cohere_server
    docs = [chunk("hit", "encrypt data at rest"), *[chunk(f"n{i}", f"encrypt note {i}") for i in range(5)]]
    backend = new_backend(tmp_path, docs)
    vrm = get_profile("vrm")
    out = vrm.run(ctx(backend, params=vrm.params({}), query="encrypt data at rest", reranker=cohere(url)))
    assert out.hits[0].chunk_id == "hit" and out.hits[0].scores["rerank"] == 1.0
    # 0.25 overlap passes the 0.1 cutoff; nothing else is returned
    assert all(h.scores["rerank"] >= 0.1 for h in out.hits)


# --- Bedrock ------------------------------------------------------------------------------------


def bedrock_with_stub() -> tuple[BedrockReranker, Any]:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "bedrock-agent-runtime",
        region_name="eu-west-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    return BedrockReranker(region="eu-west-1", client=client), Stubber(client)


def test_bedrock_request_and_response() -> None:
    r, stub = bedrock_with_stub()
    expected = r.request("encrypt", DOCS, 2)
    assert expected["rerankingConfiguration"]["bedrockRerankingConfiguration"]["modelConfiguration"] == {
        "modelArn": "arn:aws:bedrock:eu-west-1::foundation-model/cohere.rerank-v3-5:0"
    }
    stub.add_response(
        "rerank",
        {"results": [{"index": 2, "relevanceScore": 0.7}, {"index": 0, "relevanceScore": 0.9}]},
        expected,
    )
    with stub:
        assert r.rerank("encrypt", DOCS, top_n=2) == [(0, 0.9), (2, 0.7)]
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("ThrottlingException", "throttled"),
        ("InternalServerException", "unavailable"),
        ("ValidationException", "error"),
    ],
)
def test_bedrock_errors(code: str, reason: str) -> None:
    r, stub = bedrock_with_stub()
    stub.add_client_error("rerank", service_error_code=code, http_status_code=400)
    with stub, pytest.raises(RerankError) as e:
        r.rerank("q", DOCS)
    assert e.value.reason == reason


def test_bedrock_error_carries_its_code_and_message() -> None:
    r, stub = bedrock_with_stub()
    stub.add_client_error(
        "rerank",
        service_error_code="AccessDeniedException",
        service_message="User is not authorized to perform bedrock:Rerank",
        http_status_code=403,
    )
    with stub, pytest.raises(RerankError) as e:
        r.rerank("q", DOCS)
    assert e.value.reason == "error"
    assert (
        e.value.message
        == "AccessDeniedException from Bedrock: User is not authorized to perform bedrock:Rerank"
    )


def test_bedrock_without_credentials_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)
    with pytest.raises(RerankError) as e:
        BedrockReranker(region="eu-west-1", retries=0).rerank("q", DOCS)
    assert (e.value.reason, e.value.message) == ("unavailable", "no AWS credentials for Bedrock")


def test_bedrock_bad_index_is_a_bad_response() -> None:
    r, stub = bedrock_with_stub()
    stub.add_response("rerank", {"results": [{"index": 7, "relevanceScore": 0.7}]})
    with stub, pytest.raises(RerankError) as e:
        r.rerank("q", DOCS)
    assert e.value.reason == "bad_response"


def test_bedrock_arn() -> None:
    assert (
        bedrock_model_arn("arn:aws:bedrock:x::foundation-model/m", "r")
        == "arn:aws:bedrock:x::foundation-model/m"
    )


# --- construction -------------------------------------------------------------------------------


def test_build_from_settings() -> None:
    assert build_reranker(Settings(reranker=RerankerKind.NONE)) is None
    c = build_reranker(Settings(reranker=RerankerKind.COHERE, cohere_api_key="k", cohere_base_url="http://x"))
    assert isinstance(c, CohereReranker) and c._client.built is None  # no client until first use
    b = build_reranker(Settings(reranker=RerankerKind.BEDROCK, aws_region="us-east-1"))
    assert isinstance(b, BedrockReranker) and b._client.built is None
    with pytest.raises(ConfigurationError):
        build_reranker(Settings(reranker=RerankerKind.COHERE))
    with pytest.raises(ConfigurationError):
        build_reranker(Settings(reranker=RerankerKind.BEDROCK, aws_region=None))


def test_import_does_not_load_sdks() -> None:
    code = (
        "import sys, evidence.rank.rerank, evidence.rank.profiles, evidence.format;"
        "print(sorted(m for m in ('cohere', 'boto3', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[3],
        env={"PYTHONPATH": "shared"},
    )
    assert out.stdout.strip() == "[]"
