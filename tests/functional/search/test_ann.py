"""The approximate dense leg (search/ann.py) through the embedded store, forced on by a small
threshold: recall against exact search, filters, persistence across reopen, writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.search import store_dense
from evidence.search.ann import AnnConfig
from evidence.search.embedded import EmbeddedBackend, dense_path

DIM = 32
N_DOCS = 300
PER_DOC = 10  # 3,000 vectors


def _corpus(seed: int = 0) -> tuple[list[DocumentChunks], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, DIM))
    docs, vecs = [], []
    for d in range(N_DOCS):
        meta = {"group": "rare" if d % 20 == 0 else "common"}
        chunks = tuple(
            Chunk(
                chunk_id=f"d{d}:{j}",
                document_id=f"d{d}",
                kind=ChunkKind.PASSAGE,
                text=f"passage {d} {j}",
                char_start=0,
                char_end=10,
                sequence=j,
                metadata=meta,
            )
            for j in range(PER_DOC)
        )
        docs.append(DocumentChunks(f"d{d}", f"h{d}", f"d{d}", chunks, meta))
        v = centres[rng.integers(0, 40, PER_DOC)] + rng.normal(0, 0.6, (PER_DOC, DIM))
        vecs.append((v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32))
    return docs, vecs


def _backend(root: Path, min_vectors: int = 1000) -> EmbeddedBackend:
    return EmbeddedBackend(root, ann=AnnConfig(min_vectors=min_vectors, probe_fraction=0.25))


def _queries(n: int = 40) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    q = rng.normal(size=(n, DIM))
    return list((q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))


def _ids(backend: EmbeddedBackend, q: np.ndarray, filters: dict[str, str] | None = None) -> list[str]:
    return [h.chunk.chunk_id for h in backend.dense("ix", q, k=100, filters=filters, kind=ChunkKind.PASSAGE)]


def _recall(approx: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(a) & set(e)) / max(len(e), 1) for a, e in zip(approx, exact, strict=True)]))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, list[list[str]], list[list[str]]]:
    """A 3,000-vector index, and exact top-100 (unfiltered, filtered) from an exact-only backend."""
    docs, vecs = _corpus()
    exact_backend = _backend(tmp_path, min_vectors=10**9)
    exact_backend.create_index("ix", embedder_id="test", dimension=DIM)
    exact_backend.upsert("ix", docs, vecs)
    assert dense_path(exact_backend, "ix") == "exact"
    exact = [_ids(exact_backend, q) for q in _queries()]
    exact_f = [_ids(exact_backend, q, {"group": "rare"}) for q in _queries()]
    exact_backend.close()
    return tmp_path, exact, exact_f


@pytest.mark.parametrize("exact_filtered_max", [4096, 10], ids=["small-set-exact", "selector-search"])
def test_ann_recall_and_filters(
    built: tuple[Path, list[list[str]], list[list[str]]],
    exact_filtered_max: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both filtered paths: a small allowed set scored exactly from the records, and (forced with
    a tiny limit) the IVF search restricted to the allowed ids, probing more lists."""
    monkeypatch.setattr(store_dense, "EXACT_FILTERED_MAX", exact_filtered_max)
    root, exact, exact_f = built
    backend = _backend(root)
    assert dense_path(backend, "ix") == "ann"
    approx = [_ids(backend, q) for q in _queries()]
    assert _recall(approx, exact) >= 0.95
    # A filter matching 5% of rows: every hit honours it, and the filtered top-100 is complete.
    approx_f = [_ids(backend, q, {"group": "rare"}) for q in _queries()]
    assert all(i.split(":")[0] in {f"d{d}" for d in range(0, N_DOCS, 20)} for hits in approx_f for i in hits)
    assert _recall(approx_f, exact_f) >= 0.99
    assert (root / "indexes" / "ix" / "ann.npz").exists()
    backend.close()


def test_ann_persists_and_follows_writes(built: tuple[Path, list[list[str]], list[list[str]]]) -> None:
    root, _, _ = built
    backend = _backend(root)
    first = [_ids(backend, q) for q in _queries()]
    backend.close()
    # Reopened: the saved index is used as it is (same generation), same answers.
    backend = _backend(root)
    store = backend.index_store("ix")
    assert [_ids(backend, q) for q in _queries()] == first
    gen = store._ann.generation if store._ann else -1
    assert gen == store.generation()
    # A write of this process: the deleted document disappears, a new one is found at once.
    top = first[0][0].split(":")[0]
    backend.delete_document("ix", top)
    assert all(not i.startswith(f"{top}:") for i in _ids(backend, _queries()[0]))
    q = _queries()[1]
    new = DocumentChunks(
        "new",
        "hn",
        "new",
        (Chunk("new:0", "new", ChunkKind.PASSAGE, "new", 0, 3, 0, metadata={"group": "common"}),),
        {"group": "common"},
    )
    backend.upsert("ix", [new], [q.reshape(1, -1)])
    assert _ids(backend, q)[0] == "new:0"
    backend.close()


def test_stale_file_is_reconciled_not_trusted(built: tuple[Path, list[list[str]], list[list[str]]]) -> None:
    """Writes by a process that never saved the index (a crash, another writer): the file's
    generation differs, so it is reconciled against the records before use."""
    root, _, _ = built
    backend = _backend(root)
    _ids(backend, _queries()[0])  # builds and saves the index
    backend.close()
    saved = (root / "indexes" / "ix" / "ann.npz").read_bytes()
    # Another process, exact-only (it never touches the ANN file), replaces a document's vectors.
    other = _backend(root, min_vectors=10**9)
    q = _queries()[2]
    old = _corpus()[0][5]
    changed = DocumentChunks(old.document_id, "h5-changed", old.source, old.chunks, old.metadata)
    assert other.upsert("ix", [changed], [np.tile(q, (PER_DOC, 1))])[0].status == "updated"
    other.close()
    assert (root / "indexes" / "ix" / "ann.npz").read_bytes() == saved  # the file is stale
    backend = _backend(root)
    assert {i.split(":")[0] for i in _ids(backend, q)[:PER_DOC]} == {"d5"}
    backend.close()


def test_unreadable_file_is_rebuilt(built: tuple[Path, list[list[str]], list[list[str]]]) -> None:
    root, exact, _ = built
    (root / "indexes" / "ix" / "ann.npz").write_bytes(b"torn write")
    backend = _backend(root)
    assert _recall([_ids(backend, q) for q in _queries()], exact) >= 0.95
    backend.close()


def test_filtered_search_follows_writes(
    built: tuple[Path, list[list[str]], list[list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The selector search keeps a filter's rowids and bitmap between queries: a write must
    change what it allows (a new matching document is found, a deleted one is gone), and a
    document that stops matching the filter must stop being returned."""
    monkeypatch.setattr(store_dense, "EXACT_FILTERED_MAX", 10)
    root, _, _ = built
    backend = _backend(root)
    rare = {"group": "rare"}
    q = _queries()[3]
    before = _ids(backend, q, rare)
    assert _ids(backend, q, rare) == before  # the second query reuses the kept restriction
    meta = {"group": "rare"}
    new = DocumentChunks(
        "new", "hn", "new", (Chunk("new:0", "new", ChunkKind.PASSAGE, "new", 0, 3, 0, metadata=meta),), meta
    )
    backend.upsert("ix", [new], [q.reshape(1, -1)])
    assert _ids(backend, q, rare)[0] == "new:0"
    gone = before[0].split(":")[0]
    backend.delete_document("ix", gone)
    assert all(not i.startswith(f"{gone}:") for i in _ids(backend, q, rare))
    # "new" re-indexed as common: it no longer matches the filter.
    common = {"group": "common"}
    moved = DocumentChunks(
        "new",
        "hn2",
        "new",
        (Chunk("new:0", "new", ChunkKind.PASSAGE, "new", 0, 3, 0, metadata=common),),
        common,
    )
    backend.upsert("ix", [moved], [q.reshape(1, -1)])
    assert "new:0" not in _ids(backend, q, rare)
    assert _ids(backend, q)[0] == "new:0"
    backend.close()
