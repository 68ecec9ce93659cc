"""Kill an indexing process midway (SIGKILL); the store reopens consistent and re-indexing
completes with no duplicate chunks."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend
from tests.seams import pausing_cli, wait_for_pause

pytestmark = pytest.mark.slow
N_DOCS = 1500


def _write_corpus(path: Path) -> None:
    with path.open("w") as fh:
        for i in range(N_DOCS):
            text = f"Record marker{i} covers policy {i}. Access reviews happen quarterly for team {i % 7}."
            fh.write(json.dumps({"id": f"r{i}", "text": text, "metadata": {"type": "tc_files"}}) + "\n")


def _index(store: Path, corpus: Path, pause_marker: Path | None = None) -> subprocess.Popen[bytes]:
    args = ["index", str(corpus), "--index", "crash", "--store", str(store)]
    pipe = subprocess.PIPE
    if pause_marker is not None:
        # Paused once its second batch of records is committed (a bulk load journals them and
        # defers the inverted index to the end): where only the journal can repair the store.
        return pausing_cli(
            "evidence.search.embedded_store:IndexStore.upsert",
            2,
            pause_marker,
            args,
            stdout=pipe,
            stderr=pipe,
        )
    return subprocess.Popen(
        [sys.executable, "-m", "evidence.cli", *args],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "shared")},
        stdout=pipe,
        stderr=pipe,
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
    marker = tmp_path / "paused"
    proc = _index(store, corpus, pause_marker=marker)
    wait_for_pause(marker, proc, "indexing")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with sqlite3.connect(store / "indexes" / "crash" / "records.sqlite3") as db:
        journalled = db.execute("SELECT COUNT(*) FROM lexical_pending").fetchone()[0]
    assert 0 < journalled < N_DOCS, journalled  # records committed, the inverted index behind

    docs_after_kill, _ = _assert_consistent(store)  # replays the journal
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
