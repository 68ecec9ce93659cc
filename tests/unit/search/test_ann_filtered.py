"""The filtered IVF search (search/ann.py): which lists a restricted search probes, against exact
search over the allowed set, for a filter spread over the index and one crowded in a few lists."""

from __future__ import annotations

import numpy as np
import pytest

from evidence.search.ann import AnnIndex

pytest.importorskip("faiss")

DIM = 32
N = 4000


def _index() -> tuple[AnnIndex, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(60, DIM))
    label = rng.integers(0, 60, N)
    m = centres[label] + rng.normal(0, 0.5, (N, DIM))
    m = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    ids = np.arange(10, 10 + N, dtype=np.int64)
    ann = AnnIndex.build(ids, np.zeros(N, np.uint32), np.ones(N, bool), m, generation=1)
    return ann, m, label


def _exact(m: np.ndarray, ids: np.ndarray, allowed: np.ndarray, q: np.ndarray, k: int) -> set[int]:
    mask = np.isin(ids, allowed)
    sims = m[mask] @ q
    return set(ids[mask][np.argsort(-sims)[:k]].tolist())


@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded-in-few-lists"])
def test_restricted_search_finds_the_filtered_top_k(crowded: bool) -> None:
    ann, m, label = _index()
    ids = ann.ids
    rng = np.random.default_rng(4)
    # Spread: every 8th row. Crowded: the rows of 4 of the 60 clusters (few lists, mostly far
    # from a random query): a fixed number of nearest lists would miss them.
    allowed = ids[np.isin(label, [1, 2, 3, 4])] if crowded else ids[::8]
    queries = rng.normal(size=(30, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    restriction = ann.restrict(allowed)
    assert ann.restrict(allowed) is restriction  # kept for the same array
    assert int(restriction.per_list.sum()) == len(allowed)
    recall = []
    for q in queries:
        found, _ = ann.search(q, 10, restriction, probe_fraction=0.25)
        assert set(found.tolist()) <= set(allowed.tolist())
        recall.append(len(set(found.tolist()) & _exact(m, ids, allowed, q, 10)) / 10)
    assert float(np.mean(recall)) >= 0.97


def test_restriction_is_dropped_when_the_index_changes() -> None:
    ann, m, _ = _index()
    allowed = ann.ids[::8]
    first = ann.restrict(allowed)
    ann.remove(allowed[:5])
    again = ann.restrict(allowed)
    assert again is not first
    assert len(again.allowed) == len(allowed) - 5
    found, _ = ann.search(m[0], 50, again, probe_fraction=0.25)
    assert not set(found.tolist()) & set(allowed[:5].tolist())


def test_max_probes_caps_the_lists_an_unfiltered_search_scans() -> None:
    """`AnnConfig.max_probes`: at most that many lists, whatever the probe fraction asks; 0 is no cap."""
    ann, _, _ = _index()  # 63 lists
    q = np.asarray(ann.index.quantizer.reconstruct(5), dtype=np.float32)
    assert int(ann.index.nlist) == 63

    def scanned(**kw: float) -> int:
        import faiss

        stats = faiss.cvar.indexIVF_stats  # type: ignore[attr-defined]
        stats.reset()
        ann.search(q, 10, None, **kw)  # type: ignore[arg-type]
        return int(stats.nlist)

    assert scanned(probe_fraction=1.0) == 63
    assert scanned(probe_fraction=1.0, max_probes=0) == 63
    assert scanned(probe_fraction=1.0, max_probes=4) == 4
    assert scanned(probe_fraction=0.05, max_probes=40) == 4  # ceil(63 * 0.05): below the cap
    capped, _ = ann.search(q, 10, None, probe_fraction=1.0, max_probes=4)
    same, _ = ann.search(q, 10, None, probe_fraction=4 / 63)
    assert capped.tolist() == same.tolist()
