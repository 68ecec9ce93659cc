"""Several processes writing one embedded store at once (two `evidence index` runs beside
`evidence serve`): each write waits its turn, none fails, nothing is lost or doubled, and a
reader in one process sees what the others wrote."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from evidence.config import Settings
from evidence.model import IndexDocumentRequest, RetrieveRequest
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder
from tests.functional.test_faults import consistent

ROOT = Path(__file__).resolve().parents[3]
PER_WRITER = 40

WRITER = """
import sys
from pathlib import Path
from evidence.config import Settings
from evidence.model import IndexDocumentRequest
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder

store, name, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
service = EvidenceService(Settings(store_dir=store), embedder=HashingEmbedder())
for i in range(n):  # one document per write: as many commits, and lock hand-overs, as possible
    text = f"{name} record {i}: access reviews for unit{name}{i} happen quarterly."
    request = IndexDocumentRequest(document_id=f"{name}-{i}", filename="r.txt", text=text)
    service.index_document("shared", request)
service.close()
"""


def test_two_writer_processes_and_a_serving_process(tmp_path: Path) -> None:
    store = tmp_path / "store"
    service = EvidenceService(Settings(store_dir=store), embedder=HashingEmbedder())
    service.index_document(
        "shared", IndexDocumentRequest(document_id="seed", filename="s.txt", text="seed text")
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'shared'}"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store), name, str(PER_WRITER)], env=env, stderr=subprocess.PIPE
        )
        for name in ("alpha", "beta")
    ]
    # Meanwhile this process serves: writes and reads of its own.
    for i in range(30):
        service.index_document(
            "shared",
            IndexDocumentRequest(document_id=f"server-{i}", filename="s.txt", text=f"server note {i}"),
        )
        service.retrieve("shared", RetrieveRequest(query="access reviews quarterly", top_k=5))
    for proc in writers:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    # The serving process sees the other processes' documents without reopening the store.
    hits = service.retrieve("shared", RetrieveRequest(query="unitbeta39", top_k=3, rerank_cutoff=0)).hits
    assert [h.document_id for h in hits][:1] == ["beta-39"]
    service.close()
    counts = consistent(store, "shared")
    expected = {"seed", *(f"server-{i}" for i in range(30))}
    expected |= {f"{w}-{i}" for w in ("alpha", "beta") for i in range(PER_WRITER)}
    assert set(counts) == expected
    with sqlite3.connect(store / "indexes" / "shared" / "records.sqlite3") as db:
        doubled = db.execute(
            "SELECT document_id, kind, sequence FROM chunks GROUP BY 1, 2, 3 HAVING COUNT(*) > 1"
        ).fetchall()
    assert doubled == []
