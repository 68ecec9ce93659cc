"""The store's embedding cache (`embed/cache.py`) as several writers and a crash leave it: each write
is one transaction (`sqlite_wal.immediate`), whole or not at all, and the file stays readable."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from evidence.embed.cache import EmbeddingCache
from evidence.embed.pieces import PieceCache

BATCH = 16


def vector(i: int) -> np.ndarray:
    return np.random.default_rng(i).normal(size=8).astype(np.float32)


def pieces(i: int) -> np.ndarray:
    m = np.random.default_rng(i).normal(size=(5, 8)).astype(np.float32)
    return np.asarray(m / np.linalg.norm(m, axis=1, keepdims=True), dtype=np.float16)


def key(i: int) -> str:
    return f"h{i:08d}"


def _write_batches(path: str, first: int, batches: int) -> None:
    cache = EmbeddingCache(Path(path))
    for b in range(batches):
        start = first + b * BATCH
        cache.put_many("m", [(key(i), vector(i)) for i in range(start, start + BATCH)], scope="s")
    cache.close()


def test_an_item_that_cannot_be_stored_leaves_no_transaction_open(tmp_path: Path) -> None:
    # It used to fail between BEGIN and COMMIT: the connection stayed inside the transaction, so
    # the next write's BEGIN failed and was dropped, and no other process saw a write again.
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    with pytest.raises(ValueError):
        cache.put_many("m", [(key(0), vector(0)), (key(1), "not a vector")], scope="s")  # type: ignore[list-item]
    cache.put_many("m", [(key(2), vector(2))], scope="s")
    other = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    assert set(other.get_many("m", [key(0), key(1), key(2)], scope="s")) == {key(2)}
    other.close()
    cache.close()


@pytest.mark.slow
def test_threads_and_processes_writing_at_once_lose_no_row(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite3"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_batches, args=(str(path), 10_000 * (w + 1), 6)) for w in range(2)]
    for p in procs:
        p.start()
    shared = EmbeddingCache(path)  # two threads of this process share one connection

    def write(first: int) -> None:
        for b in range(6):
            start = first + b * BATCH
            shared.put_many("m", [(key(i), vector(i)) for i in range(start, start + BATCH)], scope="s")

    threads = [threading.Thread(target=write, args=(first,)) for first in (0, 1000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    wanted = [i for base in (0, 1000, 10_000, 20_000) for i in range(base, base + 6 * BATCH)]
    got = shared.get_many("m", [key(i) for i in wanted], scope="s")
    assert len(got) == len(wanted)
    assert all(np.array_equal(got[key(i)], vector(i)) for i in wanted)
    shared.close()


def _write_until_killed(path: str, kind: str) -> None:
    vectors = EmbeddingCache(Path(path)) if kind == "vectors" else None
    piece_cache = PieceCache(Path(path), max_bytes=1 << 30) if kind == "pieces" else None
    b = 0
    while True:
        rows = range(b * BATCH, (b + 1) * BATCH)
        if vectors is not None:
            vectors.put_many("m", [(key(i), vector(i)) for i in rows], scope="s")
        if piece_cache is not None:
            piece_cache.put_many("s", "m", [(key(i).encode(), pieces(i)) for i in rows])
        b += 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["vectors", "pieces"])
def test_a_writer_killed_mid_write_leaves_whole_writes_and_a_readable_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("embeddings.sqlite3" if kind == "vectors" else "pieces.sqlite3")
    table = "scoped_embeddings" if kind == "vectors" else "pieces"
    proc = multiprocessing.get_context("spawn").Process(target=_write_until_killed, args=(str(path), kind))
    proc.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until a few batches are in, then kill it wherever it is
        time.sleep(0.05)
        try:
            with sqlite3.connect(path, timeout=5) as db:
                if db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] >= 4 * BATCH:
                    break
        except sqlite3.OperationalError:
            continue  # the file or its table is still being made
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (n,) = db.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert n >= 4 * BATCH and n % BATCH == 0  # whole writes only
    if kind == "vectors":
        cache = EmbeddingCache(path)
        got = cache.get_many("m", [key(i) for i in range(n + BATCH)], scope="s")
        assert sorted(got) == [key(i) for i in range(n)]
        assert all(np.array_equal(got[key(i)], vector(i)) for i in range(n))
        cache.put_many("m", [(key(n), vector(n))], scope="s")  # and it takes writes again
        assert key(n) in cache.get_many("m", [key(n)], scope="s")
        cache.close()
    else:
        pc = PieceCache(path, max_bytes=1 << 30)
        got_pieces = pc.get_many("s", "m", [key(i).encode() for i in range(n + BATCH)])
        assert len(got_pieces) == n
        assert all(np.array_equal(got_pieces[key(i).encode()], pieces(i)) for i in range(n))
        assert pc.stored_bytes() == n * pieces(0).nbytes  # the running total is whole too
        pc.put_many("s", "m", [(key(n).encode(), pieces(n))])
        assert len(pc.get_many("s", "m", [key(n).encode()])) == 1
        pc.close()
