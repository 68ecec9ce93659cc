"""Kill an indexing process midway (SIGKILL); the store reopens consistent and re-indexing
completes with no duplicate chunks."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend

pytestmark = pytest.mark.slow
N_DOCS = 1500


def _write_corpus(path: Path) -> None:
    with path.open("w") as fh:
        for i in range(N_DOCS):
            text = f"Record marker{i} covers policy {i}. Access reviews happen quarterly for team {i % 7}."
            fh.write(json.dumps({"id": f"r{i}", "text": text, "metadata": {"type": "tc_files"}}) + "\n")


def _documents(store: Path) -> int:
    db = store / "indexes" / "crash" / "records.sqlite3"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=0.2) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    except sqlite3.Error:
        return 0


def _index(store: Path, corpus: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evidence.cli",
            "index",
            str(corpus),
            "--index",
            "crash",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "shared")},
    )


def _assert_consistent(store: Path) -> tuple[int, int]:
    backend = EmbeddedBackend(store)
    try:
        backend.sync("crash")  # what any writer does on open: replay the journal
        state = backend.index_store("crash").consistency()
        assert state.records == state.lexical, "inverted index and records disagree"
        assert state.orphan_chunks == 0 and state.pending == 0
        assert state.ok
        return state.documents, state.records[ChunkKind.PASSAGE]
    finally:
        backend.close()


def test_sigkill_midway_then_reindex(tmp_path: Path) -> None:
    corpus = tmp_path / "records.jsonl"
    _write_corpus(corpus)
    store = tmp_path / "store"
    proc = _index(store, corpus)
    deadline = time.monotonic() + 240
    while _documents(store) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "indexing finished before it could be killed; make the corpus larger"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    docs_after_kill, _ = _assert_consistent(store)
    assert 0 < docs_after_kill < N_DOCS

    proc = _index(store, corpus)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    docs, passages = _assert_consistent(store)
    assert (docs, passages) == (N_DOCS, N_DOCS)

    backend = EmbeddedBackend(store)
    try:
        for i in (0, N_DOCS // 2, N_DOCS - 1):
            hits = backend.lexical("crash", f"marker{i}", k=10)
            assert [h.chunk.document_id for h in hits] == [f"r{i}"]  # exactly one chunk, no duplicate
    finally:
        backend.close()
