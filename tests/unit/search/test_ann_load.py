"""`AnnIndex.load` streams the saved index into faiss (never the whole serialised file in memory
beside the index it becomes) and still refuses a file it cannot trust."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evidence.search.ann import AnnIndex


def _built() -> AnnIndex:
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(300, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = np.arange(1, 301, dtype=np.int64)
    return AnnIndex.build(ids, np.zeros(300, dtype=np.uint32), np.ones(300, dtype=bool), matrix, generation=7)


def test_a_saved_index_loads_back_the_same(tmp_path: Path) -> None:
    ann, path = _built(), tmp_path / "ann.npz"
    ann.save(path)
    loaded = AnnIndex.load(path)
    assert loaded is not None and loaded.generation == 7
    assert loaded.index.ntotal == ann.index.ntotal == 300
    assert np.array_equal(loaded.ids, ann.ids)
    query = np.ascontiguousarray(np.eye(16, dtype=np.float32)[:3])
    ann.index.nprobe = loaded.index.nprobe = 4
    assert np.array_equal(ann.index.search(query, 5)[1], loaded.index.search(query, 5)[1])


def test_a_faiss_member_that_is_not_bytes_is_not_trusted(tmp_path: Path) -> None:
    import faiss

    # A real index's bytes, stored as float32: streamed as raw bytes, faiss would read a valid
    # index from it, so only the member's dtype check refuses it.
    raw = faiss.serialize_index(_built().index)
    raw = np.concatenate([raw, np.zeros(-len(raw) % 4, dtype=np.uint8)])
    path = tmp_path / "ann.npz"
    with path.open("wb") as f:
        np.savez(
            f,
            faiss=raw.view(np.float32),
            ids=np.arange(1, 301, dtype=np.int64),
            crcs=np.zeros(300, dtype=np.uint32),
            passage=np.ones(300, dtype=bool),
            generation=np.int64(1),
        )
    assert AnnIndex.load(path) is None  # then it is rebuilt from the records
