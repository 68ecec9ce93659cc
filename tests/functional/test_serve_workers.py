"""`evidence serve --workers 2`: real processes on loopback (docs/api.md#evidence-serve)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def spawned(pid: int) -> bool:
    """A spawned helper (the shared embedding process, multiprocessing's resource tracker), not
    a forked worker (which has the supervisor's command line)."""
    return b"multiprocessing" in _cmdline(pid)


def workers_of(pid: int) -> set[int]:
    return {kid for kid in children(pid) if not spawned(kid)}


def embedder_of(pid: int) -> set[int]:
    """The supervisor's shared document-embedding process (one, or none between two)."""
    return {kid for kid in children(pid) if b"spawn_main" in _cmdline(kid)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def blocked(pid: int) -> set[signal.Signals]:
    """The signals `pid` blocks (its SigBlk mask in /proc)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigBlk:"))
    mask = int(line.split()[1], 16)
    return {s for s in signal.Signals if mask >> (s.value - 1) & 1}


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
def temp() -> Iterator[Path]:
    """The server's TMPDIR, short: a Unix socket's path must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="ew-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def serve(tmp_path: Path, temp: Path) -> Iterator[tuple[subprocess.Popen[str], Client]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")} | {"TMPDIR": str(temp)}
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
    serve: tuple[subprocess.Popen[str], Client], temp: Path
) -> None:
    proc, client = serve
    until(
        "two workers and the embedding process",
        lambda: len(workers_of(proc.pid)) == 2 and len(embedder_of(proc.pid)) == 1,
    )
    first = workers_of(proc.pid)
    (embedder,) = embedder_of(proc.pid)

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
    # The upload was embedded in the supervisor's one embedding process: no worker has its own.
    assert not [w for w in first if children(w)], {w: children(w) for w in first}
    assert embedder_of(proc.pid) == {embedder}

    # A killed embedding process is replaced, and uploads through either worker go on.
    os.kill(embedder, signal.SIGKILL)
    until("another embedding process", lambda: bool(embedder_of(proc.pid) - {embedder}))
    uploaded_by: set[int] = set()

    def both_upload() -> bool:
        n = len(uploaded_by)
        status, pid, created = client.call(
            "POST",
            "/v1/indexes/vendor-acme/documents",
            {"document_id": f"after-{n}", "filename": "a.txt", "text": f"Backups run nightly, copy {n}."},
        )
        assert status == 200 and created["status"] == "created", created
        uploaded_by.add(pid)
        return uploaded_by == first

    until("both workers upload", both_upload, lambda: (uploaded_by, first))

    # A killed worker is replaced, and the new one serves.
    os.kill(writer, signal.SIGKILL)
    until("a new worker", lambda: len(workers_of(proc.pid) - first) == 1 and len(workers_of(proc.pid)) == 2)
    (replacement,) = workers_of(proc.pid) - first

    def replacement_answers() -> bool:
        status, pid, result = client.call(
            "POST", "/v1/indexes/vendor-acme/retrieve", {"query": "encrypt data at rest"}
        )
        assert status == 200 and result["hits"][0]["document_id"] == doc["document_id"]
        return pid == replacement

    until("the replacement answers", replacement_answers)

    # SIGTERM to the supervisor ends every worker and the embedding process, cleanly: the
    # embedding process takes SIGTERM (the supervisor blocks it for itself, and exec keeps a mask;
    # blocked, the process would wait for the SIGKILL after the grace period).
    for kid in embedder_of(proc.pid):
        assert not blocked(kid) & {signal.SIGTERM, signal.SIGINT}, blocked(kid)
    descendants = children(proc.pid) | {g for w in children(proc.pid) for g in children(w)}
    assert list(temp.glob("evidence-embed-*/socket")), "the embedding process's socket is in TMPDIR"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    # The workers and the embedding process are reaped before the supervisor exits;
    # multiprocessing's resource tracker ends when it reads the end of its pipe, just after.
    until("every process it started ends", lambda: not [pid for pid in descendants if alive(pid)])
    assert not list(temp.glob("evidence-embed-*")), "the socket's directory is removed"


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


#: `evidence serve` on two cores (its CPU affinity, inherited by its workers), so that `auto`
#: means two whatever the machine has.
ON_TWO_CORES = (
    "import os, runpy, sys; os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2]); "
    "sys.argv[0] = 'evidence'; runpy.run_module('evidence.cli', run_name='__main__')"
)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
@pytest.mark.parametrize(
    ("memory_mb", "expected"),
    [
        pytest.param("65536", 2, id="fits-every-core"),
        # An empty store: 280 MB a worker + 450 MB of shared embedding process, within 75 % of
        # 1,000 MB: one worker fits, two (and their 70 MB supervisor) do not.
        pytest.param("1000", 1, id="fits-one"),
    ],
)
def test_the_default_starts_a_worker_per_core_that_fits_in_memory(
    tmp_path: Path, temp: Path, memory_mb: str, expected: int
) -> None:
    """No `--workers`: one per core, as many as fit in the memory (here EVIDENCE_SERVE_MEMORY_MB,
    in place of the kernel's figure); one is one process, with no supervisor."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    env |= {"TMPDIR": str(temp), "EVIDENCE_SERVE_MEMORY_MB": memory_mb}
    proc = subprocess.Popen(
        [sys.executable, "-c", ON_TWO_CORES, "serve", "--port", "0", "--store", str(tmp_path / "store")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert started["workers"] == expected, started
        assert started["why"].startswith(f"{expected} worker"), started
        assert "2 cores" in started["why"] and "available" in started["why"], started
        if expected == 1:
            # One process serves: it forks no worker.
            with urllib.request.urlopen(started["listening"] + "/v1/health", timeout=60) as resp:
                assert resp.status == 200 and resp.headers.get("X-Evidence-Worker") is None
            assert not workers_of(proc.pid)
        else:
            # The workers take SIGTERM (the supervisor blocks it for itself), so stopping is prompt.
            until(
                "two workers that take SIGTERM",
                lambda: (
                    len(workers_of(proc.pid)) == 2
                    and not any(blocked(w) & {signal.SIGTERM, signal.SIGINT} for w in workers_of(proc.pid))
                ),
                lambda: {w: blocked(w) for w in workers_of(proc.pid)},
            )
        descendants = children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        until("every process it started ends", lambda: not [pid for pid in descendants if alive(pid)])
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
        print(err, file=sys.stderr)  # shown when the test fails
