"""`evidence serve --workers 2`: real processes on loopback (docs/api.md#evidence-serve)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from evidence.testing import load_event

ROOT = Path(__file__).resolve().parents[2]
#: Generous: each worker loads the model; a loaded CI machine is slow, a working one is fast.
DEADLINE_S = 120.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and /proc")


def children(pid: int) -> set[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return set()
    return {int(p) for p in text.split()}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


class Client:
    def __init__(self, base: str) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    def call(self, method: str, path: str, payload: Any = None) -> tuple[int, int, Any]:
        """(status, the answering worker's pid, body) over a new connection each time: the
        listening socket, not a kept-alive connection, picks the worker."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            body = json.dumps(payload).encode() if payload is not None else None
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, int(resp.headers["X-Evidence-Worker"]), json.loads(resp.read())
        finally:
            conn.close()


def until(what: str, check: Callable[[], bool], state: Callable[[], object] = lambda: None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S:g} s: {what} ({state()})"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Client]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    cmd = [sys.executable, "-m", "evidence.cli", "serve", "--port", "0", "--store", str(tmp_path / "store")]
    proc = subprocess.Popen(
        [*cmd, "--workers", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert started["workers"] == 2
        yield proc, Client(started["listening"])
    finally:
        if proc.poll() is None:
            proc.kill()
        # Bounded: a process left behind would hold the pipe open.
        _, err = proc.communicate(timeout=30)
        print(err, file=sys.stderr)  # shown when the test fails


@pytest.mark.slow
def test_two_workers_share_the_port_the_store_and_stop_together(
    serve: tuple[subprocess.Popen[str], Client],
) -> None:
    proc, client = serve
    until("two workers", lambda: len(children(proc.pid)) == 2)
    first = children(proc.pid)

    # A document written through one worker is seen by both afterwards (new connections).
    doc = json.loads(load_event("apigw/index_document")["body"])
    status, writer, created = client.call("POST", "/v1/indexes/vendor-acme/documents", doc)
    assert status == 200 and created["status"] == "created", created
    found_by: set[int] = set()

    def both_find_it() -> bool:
        status, pid, result = client.call(
            "POST", "/v1/indexes/vendor-acme/retrieve", {"query": "encrypt data at rest"}
        )
        assert status == 200, result
        # Never absent once written: the write committed before its 200.
        assert result["hits"] and result["hits"][0]["document_id"] == doc["document_id"], (pid, result)
        found_by.add(pid)
        return found_by == first

    until("both workers answer the retrieve", both_find_it, lambda: (found_by, first, children(proc.pid)))
    assert writer in first

    # A killed worker is replaced, and the new one serves; what it started (the document
    # embedding worker) ends with it.
    started = children(writer)
    assert started, "the upload started an embedding worker"
    os.kill(writer, signal.SIGKILL)
    until("the killed worker's children end", lambda: not [pid for pid in started if alive(pid)])
    until("a new worker", lambda: len(children(proc.pid) - first) == 1 and len(children(proc.pid)) == 2)
    (replacement,) = children(proc.pid) - first

    def replacement_answers() -> bool:
        status, pid, result = client.call(
            "POST", "/v1/indexes/vendor-acme/retrieve", {"query": "encrypt data at rest"}
        )
        assert status == 200 and result["hits"][0]["document_id"] == doc["document_id"]
        return pid == replacement

    until("the replacement answers", replacement_answers)

    # SIGTERM to the supervisor ends every worker (and what they started), cleanly.
    workers = children(proc.pid)
    descendants = workers | {g for w in workers for g in children(w)}
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert not [pid for pid in descendants if alive(pid)]


def _serve_refused(tmp_path: Path, *args: str, **setting: str) -> subprocess.CompletedProcess[str]:
    """`evidence serve` run with `args` and the `EVIDENCE_*` `setting`s only: expected to stop at once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")} | setting
    return subprocess.run(
        [sys.executable, "-m", "evidence.cli", "serve", "--port", "0", "--store", str(tmp_path), *args],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_workers_must_be_positive(tmp_path: Path) -> None:
    done = _serve_refused(tmp_path, "--workers", "0")
    assert done.returncode == 2 and "--workers" in done.stderr


def test_a_bad_workers_setting_names_the_variable(tmp_path: Path) -> None:
    done = _serve_refused(tmp_path, EVIDENCE_SERVE_WORKERS="0")
    assert done.returncode == 2 and "EVIDENCE_SERVE_WORKERS" in done.stderr
