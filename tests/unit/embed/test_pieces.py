"""The store's word-piece cache (`embed/pieces.py`) and the span scorer's `TokenCache` reading
through it: a text's pieces computed in one process are read, unchanged, by the next."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.factory import with_store_cache
from evidence.embed.minilm import DIMENSION, MiniLMEmbedder
from evidence.embed.pieces import TOUCH_S, PieceCache, ScopedPieces
from evidence.verbatim.span_rank import StoredTokens, TokenCache, token_columns, token_source
from tests.unit.verbatim.verbatimkit import span


def unit_rows(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return np.asarray(m / np.linalg.norm(m, axis=1, keepdims=True), dtype=np.float16)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_matrix_comes_back_bit_for_bit_in_its_scope_and_model_only(tmp_path: Path) -> None:
    cache = PieceCache(tmp_path / "pieces.sqlite3", max_bytes=1 << 20)
    m, empty = unit_rows(5), np.zeros((0, 8), dtype=np.float16)
    cache.put_many("index:a", "minilm+pieces254", [(key(1), m), (key(2), empty)])
    got = cache.get_many("index:a", "minilm+pieces254", [key(1), key(2), key(3)])
    assert set(got) == {key(1), key(2)}
    assert got[key(1)].dtype == np.float16 and np.array_equal(got[key(1)], m)
    assert got[key(2)].shape == (0, 8)
    assert cache.get_many("index:b", "minilm+pieces254", [key(1)]) == {}  # another index's
    assert cache.get_many("index:a", "minilm+pieces126", [key(1)]) == {}  # another window
    cache.close()
    # another process (a new connection) reads the same
    again = PieceCache(tmp_path / "pieces.sqlite3", max_bytes=1 << 20)
    assert np.array_equal(again.get_many("index:a", "minilm+pieces254", [key(1)])[key(1)], m)
    assert again.stored_bytes() == m.nbytes
    again.drop_scope("index:a")
    assert again.get_many("index:a", "minilm+pieces254", [key(1)]) == {} and again.stored_bytes() == 0


def test_past_its_bound_the_least_recently_used_rows_go(tmp_path: Path) -> None:
    clock = Clock()
    one = unit_rows(4).nbytes  # 64 bytes a matrix
    cache = PieceCache(tmp_path / "p.sqlite3", max_bytes=10 * one, clock=clock)
    for i in range(10):
        clock.now += 1
        cache.put_many("s", "m", [(key(i), unit_rows(4, seed=i))])
    assert cache.stored_bytes() == 10 * one
    # key 0 is read an hour later: its use is refreshed, so key 1 is now the oldest
    clock.now += TOUCH_S + 1
    assert key(0) in cache.get_many("s", "m", [key(0)])
    clock.now += 1
    cache.put_many("s", "m", [(key(10), unit_rows(4, seed=10))])
    held = set(cache.get_many("s", "m", [key(i) for i in range(11)]))
    # 11 matrices over a bound of 10: deleted down to 90 % of it, oldest first (1 and 2)
    assert held == {key(i) for i in (0, *range(3, 11))}
    assert cache.stored_bytes() == 9 * one <= 10 * one
    # the running total is the rows' own
    db = sqlite3.connect(tmp_path / "p.sqlite3")
    assert db.execute("SELECT total(bytes) FROM pieces").fetchone()[0] == 9 * one
    db.close()


def test_a_file_that_is_not_a_database_is_set_aside_and_the_pieces_computed(tmp_path: Path) -> None:
    path = tmp_path / "pieces.sqlite3"
    path.write_bytes(b"this is no SQLite file, just garbage " * 200)
    cache = PieceCache(path, max_bytes=1 << 20)
    assert (tmp_path / "pieces.sqlite3.corrupt").exists()
    asked: list[str] = []

    def embed_tokens(texts: Sequence[str]) -> list[Any]:
        asked.extend(texts)
        return [unit_rows(3, seed=len(t)) for t in texts]

    tokens = TokenCache(embed_tokens).through(ScopedPieces(cache, scope="s", model="m"))
    tokens(["a span"])
    assert asked == ["a span"]
    fresh = TokenCache(embed_tokens).through(
        ScopedPieces(PieceCache(path, max_bytes=1 << 20), scope="s", model="m")
    )
    fresh(["a span"])
    assert asked == ["a span"]  # the new file holds it


def test_a_damaged_row_is_ignored_and_recomputed_and_a_deleted_file_is_refilled(tmp_path: Path) -> None:
    path = tmp_path / "pieces.sqlite3"
    asked: list[str] = []

    def embed_tokens(texts: Sequence[str]) -> list[Any]:
        asked.extend(texts)
        return [unit_rows(3, seed=7) for _ in texts]

    def new_process() -> StoredTokens:
        return TokenCache(embed_tokens).through(
            ScopedPieces(PieceCache(path, max_bytes=1 << 20), scope="s", model="m")
        )

    first = new_process()(["x", "y"])
    # a row whose bytes were damaged on disk (vectors that are not unit rows), another cut short
    db = sqlite3.connect(path)
    db.execute("UPDATE pieces SET vectors = zeroblob(length(vectors)) WHERE rowid = 1")
    db.execute("UPDATE pieces SET vectors = substr(vectors, 1, 10) WHERE rowid = 2")
    db.commit()
    db.close()
    again = new_process()(["x", "y"])
    assert asked == ["x", "y", "x", "y"]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    new_process()(["x", "y"])
    assert asked == ["x", "y", "x", "y"]  # rewritten whole
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    new_process()(["x"])
    assert asked[-1] == "x" and len(asked) == 5
    new_process()(["x"])
    assert len(asked) == 5


def test_a_file_another_process_is_writing_is_read_and_never_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "pieces.sqlite3"
    clock = Clock()
    PieceCache(path, max_bytes=1 << 20, clock=clock).put_many("s", "m", [(key(1), unit_rows(2))])
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        clock.now += TOUCH_S + 1  # the read would refresh the row's use: it cannot, and still answers
        reader = PieceCache(path, max_bytes=1 << 20, clock=clock)
        assert np.array_equal(reader.get_many("s", "m", [key(1)])[key(1)], unit_rows(2))
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert not (tmp_path / "pieces.sqlite3.corrupt").exists()
    db = sqlite3.connect(path)
    assert db.execute("SELECT used FROM pieces").fetchone()[0] == 1_000_000  # not refreshed
    db.close()
    reader.put_many("s", "m", [(key(2), unit_rows(2, seed=2))])  # free again: written
    assert set(reader.get_many("s", "m", [key(1), key(2)])) == {key(1), key(2)}


def test_pieces_read_from_the_store_are_then_held_in_process(tmp_path: Path) -> None:
    # The store is read once per text a process needs, not once per question asking for it.
    store = ScopedPieces(PieceCache(tmp_path / "pieces.sqlite3", max_bytes=1 << 20), scope="s", model="m")
    TokenCache(lambda texts: [unit_rows(3) for _ in texts]).through(store)(["a span"])  # another process
    read: list[int] = []

    class Counting(ScopedPieces):
        def get_many(self, hashes: Sequence[bytes]) -> dict[bytes, Any]:
            read.append(len(hashes))
            return super().get_many(hashes)

    def never(texts: Sequence[str]) -> list[Any]:
        raise AssertionError(f"embedded {texts}")

    tokens = TokenCache(never).through(Counting(store.cache, scope="s", model="m"))
    assert np.array_equal(tokens(["a span"])[0], unit_rows(3))
    assert np.array_equal(tokens(["a span"])[0], unit_rows(3))
    assert read == [1]


def _writer(path: str, worker: int, rounds: int) -> None:
    cache = PieceCache(Path(path), max_bytes=40 * unit_rows(6).nbytes)
    for r in range(rounds):
        # overlapping keys across workers, and past the bound: inserts, replaces, evictions at once
        items = [
            (key((worker * 7 + r + j) % 60), unit_rows(6, seed=(worker * 7 + r + j) % 60)) for j in range(5)
        ]
        cache.put_many("s", "m", items)
        got = cache.get_many("s", "m", [k for k, _ in items])
        for k, m in got.items():
            assert np.array_equal(m, unit_rows(6, seed=int.from_bytes(k, "big")))
    cache.close()


@pytest.mark.slow
def test_several_processes_write_and_evict_at_once_and_the_file_stays_consistent(tmp_path: Path) -> None:
    path = tmp_path / "pieces.sqlite3"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    db = sqlite3.connect(path)
    (total,) = db.execute("SELECT bytes FROM pieces_total").fetchone()
    rows = db.execute("SELECT hash, vectors FROM pieces").fetchall()
    db.close()
    assert total == sum(len(v) for _, v in rows) <= 40 * unit_rows(6).nbytes
    for h, v in rows:
        assert np.array_equal(
            np.frombuffer(v, dtype=np.float16).reshape(6, 8), unit_rows(6, seed=int.from_bytes(h, "big"))
        )


class Counting:
    """The real model, counting what it is asked to embed (a wrapper, as the store's are)."""

    def __init__(self, model: MiniLMEmbedder) -> None:
        self.model = model
        self.asked: list[str] = []
        self.piece_key = model.piece_key

    def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        self.asked.extend(texts)
        return self.model.embed_tokens(texts)


SPANS = [
    "Reduce the dose in patients with renal impairment.",
    "Any violation of these conditions ends your rights under this license automatically.",
    "| Adults | 10 mg | once daily |",
]
QUESTION = "Is the medicine safe for people with kidney failure?"


def test_a_new_process_reads_the_spans_pieces_the_first_one_computed_with_the_real_model(
    tmp_path: Path,
) -> None:
    model = MiniLMEmbedder()
    # The model's pieces of a text do not depend on what else is in its batch, so a text's
    # pieces read from the store are those a process would compute for it now.
    alone = [model.embed_tokens([t])[0] for t in SPANS]
    together = model.embed_tokens([QUESTION, *SPANS])[1:]
    assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))

    path = tmp_path / "pieces.sqlite3"
    chunks = [span(i, t, section="Dosage") for i, t in enumerate(SPANS)]

    def process() -> tuple[Counting, dict[str, np.ndarray]]:
        counting = Counting(model)
        tokens = TokenCache(counting.embed_tokens).through(
            ScopedPieces(PieceCache(path, max_bytes=1 << 20), scope="index:x", model=model.piece_key)
        )
        return counting, token_columns(QUESTION, SPANS, chunks, tokens)

    first, cols = process()
    assert first.asked == [QUESTION, *SPANS]
    second, again = process()
    assert second.asked == [QUESTION]  # the question is never stored; the spans are read
    assert np.array_equal(cols["token_paraphrase"], again["token_paraphrase"])
    without = token_columns(QUESTION, SPANS, chunks, TokenCache(model.embed_tokens))
    assert np.array_equal(cols["token_paraphrase"], without["token_paraphrase"])
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM pieces").fetchone()[0] == len(SPANS)
    db.close()


def test_token_source_reads_through_the_store_s_cache_in_the_index_s_scope(tmp_path: Path) -> None:
    model = MiniLMEmbedder()
    counting = Counting(model)
    on = with_store_cache(Settings(store_dir=tmp_path, token_cache_mb=1), model)
    assert isinstance(on, CachedEmbedder) and on.cache.pieces_max_bytes == 1 << 20  # MB
    found = token_source(_Wrap(on.scoped("index:a"), counting))
    assert isinstance(found, StoredTokens)
    assert found.store.scope == "index:a" and found.store.model == model.piece_key  # type: ignore[attr-defined]
    vectors = found(SPANS[:1])
    assert vectors[0].shape[1] == DIMENSION and counting.asked == SPANS[:1]
    assert (tmp_path / "pieces.sqlite3").exists()
    # the index deleted: its pieces go with its vectors, also from a process that never read them
    EmbeddingCache(tmp_path / "embeddings.sqlite3", pieces_max_bytes=1 << 20).drop_scope("index:a")
    assert PieceCache(tmp_path / "pieces.sqlite3", max_bytes=1 << 20).stored_bytes() == 0
    # ... and from a process that keeps no pieces itself (EVIDENCE_TOKEN_CACHE_MB=0 now)
    other = token_source(_Wrap(on.scoped("index:b"), counting))
    assert other is not None
    other(SPANS[1:2])
    assert PieceCache(tmp_path / "pieces.sqlite3", max_bytes=1 << 20).stored_bytes() > 0
    EmbeddingCache(tmp_path / "embeddings.sqlite3").drop_scope("index:b")
    assert PieceCache(tmp_path / "pieces.sqlite3", max_bytes=1 << 20).stored_bytes() == 0
    # EVIDENCE_TOKEN_CACHE_MB=0: in process only, no file
    off = with_store_cache(Settings(store_dir=tmp_path / "other", token_cache_mb=0), model)
    assert isinstance(off, CachedEmbedder)
    assert isinstance(token_source(_Wrap(off, counting)), TokenCache)
    assert not (tmp_path / "other" / "pieces.sqlite3").exists()


class _Wrap:
    """A store cache in front of a word-piece model that counts what it embeds."""

    def __init__(self, cached: CachedEmbedder, inner: Counting) -> None:
        self.pieces = cached.pieces
        self.inner = inner
