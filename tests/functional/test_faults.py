"""Faults the service must survive (RELIABILITY.md): a full disk under the embedded store, a batch
killed midway, Bedrock throttling the reranker. Each degrades as designed and a re-run converges:
no duplicate, no lost document.

The full disk is real where the test may mount a small tmpfs (root, e.g. in a container);
everywhere it is also simulated with RLIMIT_FSIZE in the writing subprocess (writes past the
limit fail with EFBIG, as they fail with ENOSPC on a full disk).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence.api import runtime
from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.retriever.handler import handler
from tests.seams import pausing_cli, wait_for_pause

ROOT = Path(__file__).resolve().parents[2]
N_DOCS = 40

#: Indexes N_DOCS documents through the retriever Lambda in-process (HashingEmbedder: no model),
#: printing one JSON line per request: what a client sees while the disk fills up.
DRIVER = """
import json, sys
from pathlib import Path
from evidence.api import runtime
from evidence.config import Settings
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, lambda_context, load_event
from functions.retriever.handler import handler

store, n = Path(sys.argv[1]), int(sys.argv[2])
settings = Settings(store_dir=store)
runtime.configure(service=EvidenceService(settings, embedder=HashingEmbedder()), settings=settings)

def call(path, payload):
    event = load_event("apigw/retrieve")
    event.update(httpMethod="POST", path=path, resource="/{proxy+}", body=json.dumps(payload))
    response = handler(event, lambda_context("faults"))
    return response["statusCode"], json.loads(response["body"])

for i in range(n):
    text = " ".join(f"term{i}x{j} policy{i} encryption review" for j in range(250))
    doc = {"document_id": f"d{i}", "filename": "d.txt", "text": text}
    status, body = call("/v1/indexes/full/documents", doc)
    print(json.dumps({"i": i, "status": status, "code": body.get("error", {}).get("code"),
                      "result": body.get("status")}), flush=True)
status, body = call("/v1/indexes/full/retrieve", {"query": "policy0 encryption", "top_k": 3})
print(json.dumps({"retrieve": status}), flush=True)
"""


def run_driver(store: Path, *, fsize: int | None = None) -> list[dict[str, Any]]:
    def limit() -> None:
        # Ignore SIGXFSZ so a write past the limit fails with EFBIG instead of killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))  # type: ignore[arg-type]

    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'shared'}"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(store), str(N_DOCS)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        preexec_fn=limit if fsize else None,  # only setrlimit and signal: fork-safe
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [
        json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"i"') or "retrieve" in line
    ]


def consistent(store: Path, index: str) -> dict[str, int]:
    """Records, inverted index and journal agree; returns chunk counts per document."""
    backend = EmbeddedBackend(store)
    try:
        backend.sync(index)  # what any writer does on open: replay the journal
        idx = backend.index_store(index)
        db = idx._db
        for kind in ChunkKind:
            rows = db.execute("SELECT COUNT(*) FROM chunks WHERE kind = ?", (kind.value,)).fetchone()[0]
            assert idx._open_lexical(kind).searcher().num_docs == rows, kind
        orphans = "SELECT COUNT(*) FROM chunks WHERE document_id NOT IN (SELECT document_id FROM documents)"
        assert db.execute(orphans).fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM lexical_pending").fetchone()[0] == 0
        counts = db.execute("SELECT document_id, COUNT(*) FROM chunks GROUP BY document_id").fetchall()
        return {str(d): int(n) for d, n in counts}
    finally:
        backend.close()


@pytest.fixture(params=["tmpfs", "rlimit"])
def full_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, int | None]]:
    if request.param == "rlimit":
        # Past an empty index (16 kB SQLite pages: its tables and WAL frames take ~0.5 MB) and a
        # few documents, short of all of them.
        yield tmp_path / "store", 1200 * 1024
        return
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the rlimit variant covers the same path")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=False)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here; the rlimit variant covers the same path")
    try:
        yield mount / "store", None
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_full_disk_fails_typed_then_a_rerun_converges(
    full_disk: tuple[Path, int | None], tmp_path: Path
) -> None:
    store, fsize = full_disk
    first = run_driver(store, fsize=fsize)
    writes = [r for r in first if "i" in r]
    codes = {(r["status"], r["code"]) for r in writes}
    ok = [r["i"] for r in writes if r["status"] == 200]
    assert ok and len(ok) < N_DOCS, "the disk never filled up; make the documents larger"
    # Degraded as designed: a typed 507 naming the cause, never a 500, and reads still served.
    assert codes <= {(200, None), (507, "storage_full")}, codes
    assert first[-1] == {"retrieve": 200}
    before = consistent(store, "full")
    assert set(before) >= {f"d{i}" for i in ok}

    # Space again: a bigger tmpfs, or no limit. The same requests again converge.
    if fsize is None:
        subprocess.run(["mount", "-o", "remount,size=64m", str(store.parent)], check=True)
    second = run_driver(store, fsize=None)
    assert all(r["status"] == 200 for r in second if "i" in r), second
    after = consistent(store, "full")
    reference = tmp_path / "reference"
    run_driver(reference)
    assert after == consistent(reference, "full")  # every document, each chunk exactly once
    assert len(after) == N_DOCS


# --- a batch killed midway ----------------------------------------------------------------------


@pytest.mark.slow
def test_assess_killed_midway_then_rerun(tmp_path: Path) -> None:
    store = tmp_path / "store"
    records = tmp_path / "records.jsonl"
    records.write_text(
        "".join(
            json.dumps(
                {"id": f"r{i}", "text": f"Control {i}: data is encrypted and reviewed every {i} days."}
            )
            + "\n"
            for i in range(30)
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    cli = [sys.executable, "-m", "evidence.cli"]
    subprocess.run(
        [*cli, "index", str(records), "--index", "batch", "--store", str(store)], check=True, env=env
    )
    criteria = tmp_path / "criteria.jsonl"
    n, pause_after = 40, 17
    criteria.write_text(
        "".join(
            json.dumps({"id": f"c{i}", "question": f"Is control {i % 30} reviewed?"}) + "\n" for i in range(n)
        )
    )
    out = tmp_path / "results.jsonl"
    assess = ["assess", "--index", "batch", "--criteria", str(criteria), "--out", str(out)]
    assess += ["--store", str(store)]
    marker = tmp_path / "paused"
    # Paused after pause_after criteria: a point observed, not a time guessed (tests/seams.py).
    proc = pausing_cli(
        "evidence.assess.steps:run_criterion", pause_after, marker, assess, stdout=subprocess.DEVNULL
    )
    try:
        wait_for_pause(marker, proc, "the batch")
        assert marker.read_text() == str(pause_after)
        proc.send_signal(signal.SIGKILL)  # midway: pause_after of n criteria have run
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists() or len(out.read_text().splitlines()) in (0, n)  # never a torn file

    subprocess.run([*cli, *assess], check=True, env=env, capture_output=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == sorted(f"c{i}" for i in range(n))  # none lost, none twice
    assert all(r["status"] == "ok" for r in lines)
    with sqlite3.connect(store / "indexes" / "batch" / "records.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 30  # a read-only batch


# --- Bedrock throttling the reranker ------------------------------------------------------------


def test_bedrock_throttling_degrades_to_the_first_stage(
    service: EvidenceService, context: LambdaContext
) -> None:
    import boto3
    from botocore.stub import Stubber

    from evidence.rank.rerank import BedrockReranker

    client = boto3.client(
        "bedrock-agent-runtime", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    reranked = EvidenceService(
        service.settings,
        embedder=service.embedder,
        reranker=BedrockReranker(region="us-east-1", client=client),
    )
    runtime.configure(service=reranked, settings=service.settings)
    for i in range(3):
        create = load_event("apigw/index_document")
        create["body"] = json.dumps(
            {
                "document_id": f"d{i}",
                "filename": "d.md",
                "text": f"# Keys\n\nKeys rotate every {i + 1} years.",
            }
        )
        assert handler(create, context)["statusCode"] == 200
    event = load_event("apigw/retrieve")
    event["body"] = json.dumps({"query": "How often do keys rotate?", "top_k": 3})
    with Stubber(client) as stub:
        for _ in range(1 + reranked.settings.rerank_retries):
            stub.add_client_error("rerank", service_error_code="ThrottlingException", http_status_code=429)
        response = handler(event, context)
    answer = json.loads(response["body"])
    assert response["statusCode"] == 200, answer
    assert any(m.startswith("rerank:") for m in answer["telemetry"]["degraded"]), answer["telemetry"]
    assert {h["document_id"] for h in answer["hits"]} == {"d0", "d1", "d2"}
    reranked.close()
