"""`evidence serve`: HTTP on loopback through the same resolver (urllib as the client)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from evidence.server import ApiServer, http_to_event, make_server
from evidence.service import EvidenceService
from evidence.testing import load_event
from evidence.version import package_version

ROOT = Path(__file__).resolve().parents[2]


def request(url: str, method: str = "GET", payload: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(payload).encode() if payload is not None else None)
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def server(service: EvidenceService) -> Iterator[ApiServer]:
    srv = make_server("127.0.0.1", 0, max_body_bytes=service.settings.max_body_bytes)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_routes_over_http(server: ApiServer) -> None:
    base = server.url
    assert request(f"{base}/v1/health") == (200, {"status": "ok", "version": package_version()})
    doc = json.loads(load_event("apigw/index_document")["body"])
    status, created = request(f"{base}/v1/indexes/vendor-acme/documents", "POST", doc)
    assert status == 200 and created["status"] == "created"
    s3_doc = {"document_id": "s3://bucket/dir/a b.txt", "filename": "a b.txt", "text": "MFA is required."}
    assert request(f"{base}/v1/indexes/vendor-acme/documents", "POST", s3_doc)[0] == 200

    status, result = request(
        f"{base}/v1/indexes/vendor-acme/retrieve", "POST", {"query": "encrypt data at rest"}
    )
    assert status == 200
    assert result["hits"][0]["document_id"] == "acme/soc2-summary-2026"

    status, deleted = request(
        f"{base}/v1/indexes/vendor-acme/documents/{quote('s3://bucket/dir/a b.txt', safe='')}", "DELETE"
    )
    assert status == 200 and deleted["document_id"] == "s3://bucket/dir/a b.txt"

    status, plan = request(f"{base}/v1/plan", "POST", {"query": "Do you use MFA?", "profile": "vrm"})
    assert status == 200 and plan["profile"] == "vrm"
    status, spec = request(f"{base}/v1/openapi.json")
    assert status == 200 and spec["openapi"] == "3.1.0"


@pytest.mark.parametrize(
    ("method", "path", "raw", "status", "code"),
    [
        ("GET", "/nope", None, 404, "not_found"),
        ("PATCH", "/v1/health", b"{}", 405, "method_not_allowed"),
        ("POST", "/v1/indexes/vendor-acme/retrieve", b"{not json", 400, "bad_request"),
        ("POST", "/v1/indexes/no-such-index/retrieve", b'{"query": "x"}', 404, "index_not_found"),
        ("POST", "/v1/indexes/-bad/retrieve", b'{"query": "x"}', 422, "validation_error"),
        ("POST", "/v1/plan", b"\xff\xfe not utf-8", 400, "bad_request"),
    ],
)
def test_errors_over_http(  # noqa: PLR0917
    server: ApiServer, method: str, path: str, raw: bytes | None, status: int, code: str
) -> None:
    got_status, got = request(server.url + path, method, raw=raw)
    assert (got_status, got["error"]["code"]) == (status, code)


def test_a_wrong_method_is_405_with_an_allow_header(server: ApiServer) -> None:
    req = urllib.request.Request(server.url + "/v1/indexes/vendor-acme/retrieve", method="GET")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 405 and e.value.headers["Allow"] == "POST"
    assert json.loads(e.value.read())["error"]["code"] == "method_not_allowed"


def test_too_large_is_refused_before_reading(service: EvidenceService) -> None:
    srv = make_server("127.0.0.1", 0, max_body_bytes=1_000)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        status, body = request(f"{srv.url}/v1/plan", "POST", raw=b'{"query": "' + b"x" * 2_000 + b'"}')
        assert status == 413 and body["error"]["code"] == "payload_too_large"
    finally:
        srv.shutdown()
        srv.server_close()


def test_http_to_event_is_an_api_gateway_rest_event() -> None:
    event = http_to_event("DELETE", "/v1/indexes/a/documents/s3%3A%2F%2Fb%2Fk?x=1&x=2", [("Host", "h")], b"")
    reference = load_event("apigw/delete_document")
    assert set(reference) <= set(event)
    assert event["path"] == "/v1/indexes/a/documents/s3%3A%2F%2Fb%2Fk"
    assert event["multiValueQueryStringParameters"] == {"x": ["1", "2"]}
    assert event["body"] is None and event["isBase64Encoded"] is False
    binary = http_to_event("POST", "/v1/plan", [], b"\xff")
    assert binary["isBase64Encoded"] is True


@pytest.mark.slow
def test_evidence_serve_subprocess_with_the_real_embedder(tmp_path: Path) -> None:
    """End to end: the CLI, the default MiniLM embedder, the embedded store, HTTP (one process:
    test_serve_workers.py covers the workers)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    cmd = [sys.executable, "-m", "evidence.cli", "serve", "--port", "0", "--store", str(tmp_path / "store")]
    cmd += ["--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base = json.loads(proc.stdout.readline())["listening"]
        for name in ("index_document", "index_followup"):
            doc = json.loads(load_event(f"apigw/{name}")["body"])
            assert request(f"{base}/v1/indexes/vendor-acme/documents", "POST", doc)[0] == 200
        distractor = {
            "document_id": "acme/holidays",
            "filename": "holidays.txt",
            "text": "Which holidays does customer support observe? Customer information desks close on "
            "public holidays; stored parcels are protected from rain.",
        }
        assert request(f"{base}/v1/indexes/vendor-acme/documents", "POST", distractor)[0] == 200
        status, result = request(
            f"{base}/v1/indexes/vendor-acme/retrieve",
            "POST",
            {"query": "Which cipher protects stored customer information?", "top_k": 3, "explain": True},
        )
        assert status == 200
        # The distractor shares the query's words (it wins BM25); only a real embedding knows that a
        # cipher is about encryption, so the dense leg must prefer an encryption document.
        hits = result["hits"]
        assert len(hits) == 3
        lexical_best = max(hits, key=lambda h: h["scores"]["lexical"])
        dense_best = max(hits, key=lambda h: h["scores"]["dense"])
        assert lexical_best["document_id"] == "acme/holidays"
        assert dense_best["document_id"] != "acme/holidays", [(h["document_id"], h["scores"]) for h in hits]
        assert any(s["name"] for s in result["telemetry"]["stages"])
        status, err = request(f"{base}/v1/indexes/vendor-acme/retrieve", "POST", {"query": "x" * 5000})
        assert status == 422 and err["error"]["field"] == "query"
    finally:
        proc.terminate()
        code = proc.wait(timeout=10)
    assert code == 0  # SIGTERM closes the server and the store cleanly


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_malloc_arena_cap_takes_on_glibc() -> None:
    """`evidence serve` caps glibc's malloc arenas (RELIABILITY.md, "Load": RSS under writes)."""
    import ctypes
    import platform

    from evidence.server import limit_malloc_arenas

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert hasattr(ctypes.CDLL(None), "mallopt")
    assert limit_malloc_arenas(8) is True  # the glibc default for 1 core; harmless to the suite


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps")
def test_serve_runs_one_blas_thread_per_request_thread() -> None:
    """`evidence serve` sets OpenBLAS to one thread (RELIABILITY.md, "Load": its shared pool
    made the dense leg's product 50 times slower with 8 request threads calling it)."""
    probe = (
        "import ctypes, numpy\n"
        "from evidence.server import limit_blas_threads, _BLAS_SETTERS\n"
        "libs = {l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l.lower()}\n"
        "if not libs: print('none'); raise SystemExit\n"
        "print(limit_blas_threads(1))\n"
        "getters = [n.replace('set_', 'get_') for n in _BLAS_SETTERS]\n"
        "lib = ctypes.CDLL(sorted(libs)[0])\n"
        "print(next(getattr(lib, g)() for g in getters if hasattr(lib, g)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if out == ["none"]:
        pytest.skip("numpy is not linked to OpenBLAS here")
    assert out == ["True", "1"]


def test_a_port_in_use_fails_cleanly_without_warming_the_model(tmp_path: Path) -> None:
    """The bind fails before anything loads: a clear error and exit code, never a signal (the
    warm-up thread building onnxruntime's session while the interpreter ended aborted it). The
    child records whether the warm-up was ever called and joins its thread before answering, so
    the test fails on a warm-up started before the bind every time, not only when the abort wins
    the race (about one run in five)."""
    import socket

    from evidence.cli.common import EXIT_FAILED

    child = (
        "import json, sys, threading\n"
        "from evidence.api import runtime\n"
        "from evidence.cli import main\n"
        "called = []\n"
        "runtime.warm = lambda: called.append(True)\n"
        "code = main(sys.argv[1:])\n"
        "for t in threading.enumerate():\n"
        "    if t.name == 'warm':\n"
        "        t.join()\n"
        "print(json.dumps({'code': code, 'warmed': bool(called)}))\n"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
        cmd = [sys.executable, "-c", child, "serve", "--port", str(port), "--workers", "1"]
        cmd += ["--store", str(tmp_path / "store")]
        done = subprocess.run(
            cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": EXIT_FAILED, "warmed": False}
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
