"""Another process's commits reach this one's caches through `change_log` (store_records.py):
the dense matrix, the chunk cache and the vector count are patched with the rows a commit
changed, not rebuilt; a commit the log cannot account for makes them reload whole.

Two `EmbeddedBackend`s on one store stand for two processes (two `serve --workers` workers, or
`evidence index` beside the server): each has its own connections, caches and writer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.records import ChunkKind
from evidence.search import store_dense
from evidence.search.embedded import EmbeddedBackend, IndexStore
from evidence.search.store_records import CHANGE_LOG_GENERATIONS
from tests.unit.search.storekit import DIM, doc, vectors

INDEX = "store"
QUERY = np.ones(DIM, dtype=np.float32)


def _write(backend: EmbeddedBackend, document_id: str, text: str) -> None:
    written = doc(document_id, text)
    backend.upsert(INDEX, [written], [vectors(written)])


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[EmbeddedBackend, EmbeddedBackend]]:
    """(writer, reader): the reader has loaded its caches before the writer writes."""
    writer = EmbeddedBackend(tmp_path)
    writer.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    for i in range(3):
        _write(writer, f"d{i}", f"# Doc {i}\n\nKeys rotate every {i} years. Access is logged.\n")
    reader = EmbeddedBackend(tmp_path)
    reader.dense(INDEX, QUERY, k=50)
    reader.lexical(INDEX, "keys rotate", k=50)
    try:
        yield writer, reader
    finally:
        reader.close()
        writer.close()


def _count_reloads(store: IndexStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reloads: list[int] = []
    load = store._load_dense

    def counted() -> Any:
        reloads.append(1)
        return load()

    monkeypatch.setattr(store, "_load_dense", counted)
    return reloads


def _matrix_equals_reload(store: IndexStore) -> None:
    held = store._dense
    assert held is not None and held.generation == store.generation()
    fresh = IndexStore._load_dense(store)  # not the counted one
    store._dense = held  # `_load_dense` lets go of the matrix it replaces
    assert sorted(held.rowids.tolist()) == sorted(fresh.rowids.tolist())
    by_row = dict(zip(fresh.rowids.tolist(), fresh.matrix, strict=True))
    for rowid, row in zip(held.rowids.tolist(), held.matrix, strict=True):
        assert np.array_equal(row, by_row[rowid])
    kinds = dict(zip(fresh.rowids.tolist(), fresh.kinds.tolist(), strict=True))
    assert dict(zip(held.rowids.tolist(), held.kinds.tolist(), strict=True)) == kinds


def test_another_process_s_writes_are_caught_up_without_a_rebuild(
    pair: tuple[EmbeddedBackend, EmbeddedBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader = pair
    store = reader.index_store(INDEX)
    reloads = _count_reloads(store, monkeypatch)
    writer.delete_document(INDEX, "d1")
    _write(writer, "d3", "# New\n\nBackups run nightly and restores are tested.\n")
    _write(writer, "d0", "# Doc 0 again\n\nKeys rotate monthly now.\n")  # replaced: new rows

    hits = reader.dense(INDEX, QUERY, k=50, kind=ChunkKind.PASSAGE)
    assert not reloads, "the reader rebuilt its matrix instead of catching up"
    assert {h.chunk.document_id for h in hits} == {"d0", "d2", "d3"}
    assert any("monthly" in h.chunk.text for h in hits if h.chunk.document_id == "d0")
    _matrix_equals_reload(store)
    assert store.vectors_count() == len(store._dense.rowids)  # type: ignore[union-attr]
    with store._snapshot() as db:
        counted = db.execute("SELECT COUNT(*) FROM chunks WHERE vector IS NOT NULL").fetchone()[0]
    assert store.vectors_count() == counted


def test_a_reused_rowid_is_not_served_from_the_stale_chunk_cache(
    pair: tuple[EmbeddedBackend, EmbeddedBackend],
) -> None:
    """SQLite gives the rowids of deleted last rows again: a cached chunk under such a rowid must
    go when another process's commit replaces it."""
    writer, reader = pair
    store = reader.index_store(INDEX)
    last = store._chunks_of("d2")
    rowids = [store.chunks_by_id([c.chunk_id])[c.chunk_id][0] for c in last]
    assert all(r in store._by_rowid for r in rowids)  # cached by the reader
    writer.delete_document(INDEX, "d2")
    _write(writer, "d9", "# Other\n\nA different document with other words in it entirely.\n")
    found = store.chunks_by_rowid(rowids)
    assert all(chunk.document_id != "d2" for chunk in found.values())
    assert any(chunk.document_id == "d9" for chunk in found.values()), "rowids were not reused"
    lexical = reader.lexical(INDEX, "different document", k=5)
    assert lexical and lexical[0].chunk.document_id == "d9"


def test_a_commit_the_log_cannot_account_for_reloads_whole(
    pair: tuple[EmbeddedBackend, EmbeddedBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruned past `CHANGE_LOG_GENERATIONS`, or written by a version that kept no log."""
    writer, reader = pair
    store = reader.index_store(INDEX)
    reloads = _count_reloads(store, monkeypatch)
    wstore = writer.index_store(INDEX)
    _write(writer, "d4", "# Four\n\nLogged as usual.\n")
    # A commit without its log rows, as an older version writes it.
    monkeypatch.setattr(wstore, "log_changes", lambda generation, rowids: None)
    _write(writer, "d5", "# Five\n\nNot logged at all.\n")
    monkeypatch.undo()
    reloads = _count_reloads(store, monkeypatch)
    hits = reader.dense(INDEX, QUERY, k=100, kind=ChunkKind.PASSAGE)
    assert reloads == [1]
    assert {"d4", "d5"} <= {h.chunk.document_id for h in hits}
    _matrix_equals_reload(store)

    for i in range(CHANGE_LOG_GENERATIONS + 1):
        _write(writer, f"many{i}", f"# Many {i}\n\nOne of many writes, number {i}.\n")
    with wstore._snapshot() as db:
        oldest = db.execute("SELECT MIN(generation) FROM change_log").fetchone()[0]
    assert oldest > store._dense.generation  # type: ignore[union-attr]  # pruned past the reader
    reader.dense(INDEX, QUERY, k=5)
    assert reloads == [1, 1]
    _matrix_equals_reload(store)


def test_commits_that_changed_more_rows_than_the_matrix_holds_reload_it_whole(
    pair: tuple[EmbeddedBackend, EmbeddedBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load into a small index: one scan costs less than reading its rows one by one."""
    writer, reader = pair
    store = reader.index_store(INDEX)
    monkeypatch.setattr(store_dense, "CATCH_UP_MIN_ROWS", 2)
    held = len(store._dense.rowids)  # type: ignore[union-attr]
    docs = [doc(f"bulk{i}", f"# Bulk {i}\n\nBulk document number {i}.\n") for i in range(held + 1)]
    writer.upsert(INDEX, docs, [vectors(d) for d in docs])
    reloads = _count_reloads(store, monkeypatch)
    hits = reader.dense(INDEX, QUERY, k=100, kind=ChunkKind.PASSAGE)
    assert reloads == [1]
    assert {f"bulk{i}" for i in range(held + 1)} <= {h.chunk.document_id for h in hits}
    _matrix_equals_reload(store)


def _recorded_vectors(store: IndexStore) -> dict[str, np.ndarray]:
    with store._snapshot() as db:
        rows = db.execute("SELECT chunk_id, vector FROM chunks WHERE vector IS NOT NULL").fetchall()
    return {str(c): store_dense.decode_vectors([bytes(v)], DIM)[0] for c, v in rows}


def _assert_vectors_match_records(store: IndexStore, ids: list[str]) -> None:
    want = _recorded_vectors(store)
    got = store.vectors(ids)
    assert set(got) == {cid for cid in ids if cid in want}  # spans and unknown ids have none
    for cid, vec in got.items():
        assert vec.dtype == np.float32 and np.array_equal(vec, want[cid])


def test_vectors_come_from_the_held_caches_only_at_the_snapshots_generation(
    pair: tuple[EmbeddedBackend, EmbeddedBackend],
) -> None:
    writer, reader = pair
    store = reader.index_store(INDEX)
    with store._snapshot() as db:
        every = [str(c) for (c,) in db.execute("SELECT chunk_id FROM chunks")]
    held: dict[str, Any] = {}
    store._held_vectors(store.generation(), every, held)
    assert held  # the lexical hits the reader cached: answered without reading their blobs
    _assert_vectors_match_records(store, [*every, "absent:p0"])
    # Another process rewrites a document: the reader's caches are a generation behind until its
    # next search, and its vectors must be the new ones, not the held ones.
    _write(writer, "d0", "# Doc 0\n\nKeys rotate monthly now. Access is reviewed.\n")
    with store._snapshot() as db:
        now = [str(c) for (c,) in db.execute("SELECT chunk_id FROM chunks")]
    assert store._held_vectors(store.generation(), now, {}) == now  # nothing held at this generation
    _assert_vectors_match_records(store, [*every, *now])
    # A lexical search moves the chunk cache to the new generation, not the dense matrix: the
    # cache alone must not be trusted (the matrix would lack the rewritten rows' vectors).
    reader.lexical(INDEX, "keys rotate", k=50)
    assert store._cache_gen == store.generation() and store._dense is not None
    assert store._dense.generation != store.generation()
    assert store._held_vectors(store.generation(), now, {}) == now
    _assert_vectors_match_records(store, [*every, *now])
    reader.dense(INDEX, QUERY, k=50)
    reader.lexical(INDEX, "keys rotate", k=50)
    caught: dict[str, Any] = {}
    store._held_vectors(store.generation(), now, caught)
    assert caught
    _assert_vectors_match_records(store, [*every, *now])


def test_the_spliced_matrix_is_the_kept_rows_then_the_new_ones() -> None:
    """`_spliced` (a patch copies the kept rows once, in runs) gives what filtering then
    concatenating gave: first and last rows dropped, neighbours dropped, nothing dropped,
    nothing added, an empty matrix, float16 rows widened."""
    import numpy as np

    from evidence.search.store_dense import _spliced

    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((9, 4)).astype(np.float32)
    new = rng.standard_normal((2, 4)).astype(np.float32)
    for dropped in ([], [0], [8], [0, 8], [3, 4, 5], list(range(9))):
        keep = np.ones(9, dtype=bool)
        keep[dropped] = False
        for extra in (None, new, new.astype(np.float16)):
            want = matrix[keep] if extra is None else np.concatenate([matrix[keep], extra])
            got = _spliced(matrix, keep if dropped else None, extra) if dropped or extra is not None else None
            if got is None:
                continue
            assert got.dtype == want.dtype and np.array_equal(got, want)
    empty = np.empty((0, 0), dtype=np.float32)
    assert np.array_equal(_spliced(empty, None, new), new)
    # Past `_SPLICE_RUNS` dropped rows it gathers instead: the same matrix.
    big = rng.standard_normal((2000, 4)).astype(np.float32)
    keep = np.arange(2000) % 3 != 0
    for extra in (None, new):
        want = big[keep] if extra is None else np.concatenate([big[keep], extra])
        assert np.array_equal(_spliced(big, keep, extra), want)
