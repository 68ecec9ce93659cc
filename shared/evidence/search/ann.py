"""Approximate dense search for large indexes: a faiss IVF index (8-bit codes) keyed by rowid.

Codes are 8-bit scalar-quantised (one byte per dimension, a trained range per dimension: 384 MB
at 1M vectors against 768 MB for float16, the bulk of serving RSS). Rescoring the candidates on
their stored vectors was tried and dropped: reading 2·k random rows from SQLite added ~40 ms to
the dense leg at 1M. An index file saved with float16 codes still loads.

Why faiss IVF (docs/scale.md has the measurements): faiss-cpu ships wheels for Linux x86_64 and
arm64 and is maintained by Meta; its IVF indexes add and remove vectors in place (a write updates
the index instead of rebuilding it), search restricted to an id selector (filters are honoured
inside the search, not by oversampling and hoping) and serialise to bytes. Its HNSW indexes cannot
remove vectors; hnswlib has had no release since 2023; usearch's Python search takes no filter.
IVF training plus adding 1M vectors takes about a minute on 2 cores; HNSW took ~90 s per 100k.

Crash safety: SQLite stays the source of truth. The index is a derived file (`ann.npz`), written
whole to a temporary name and renamed, holding the faiss bytes, the rowids it covers, a CRC of each
row's vector blob and the records' generation it was built at. Opened at another generation, it is
reconciled against the records row by row (missing rows removed, new or changed rows added; rowids
can be reused, hence the CRC), or rebuilt when too much changed. A crash leaves either the old file
(reconciled on next use) or the new one; never a file whose content differs from what it says.
"""

from __future__ import annotations

import functools
import math
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Rebuild (retrain the lists) instead of patching when more than this share of rows changed.
REBUILD_SHARE = 0.2
#: A search restricted to a share s of the index probes (1/s) ** this times the lists an
#: unfiltered one probes, counting only lists that hold allowed vectors (so a filter crowded in a
#: few lists gets all of them). Its top-k lie as deep as the unfiltered top k/s, so it needs more
#: lists, but far fewer than 1/s times (the rule before: a 10% filter probed 62.5% of the lists
#: at 1M). Measured at 1M (docs/scale.md, SciFact queries against exact search over the allowed
#: set): at 25% of the lists, recall@100 was 0.994 for a 10% filter (the same as probing all of
#: them), 0.988 for 1%, 0.978 for 0.5%; with this rule, on other queries, the same as the rule
#: before to 0.0002 for 10%, 5%, 1% and 0.5% filters and for one crowded in 5% of the lists.
FILTERED_PROBE_EXPONENT = 0.25
#: And the lists probed must hold at least this many allowed vectors per result asked for: when
#: k is a large part of the allowed set (k = 100 of 150 allowed), its top-k is most of the set
#: (the test corpus's 5% filter gave recall 0.76 at the exponent's probes alone).
FILTERED_MIN_PER_RESULT = 25
#: Restrictions (allowed rowid sets) whose intersection and bitmap are kept per index state.
SELECTOR_CACHE_SIZE = 16


@dataclass(frozen=True)
class AnnConfig:
    #: Vectors from which an index's dense leg is approximate (below: exact cosine).
    min_vectors: int = 100_000
    #: Share of the inverted lists probed per query (recall against latency; docs/scale.md).
    probe_fraction: float = 0.25
    #: At most this many lists probed by an unfiltered search (0: no cap). Recall follows the
    #: number of lists probed more than their share: recall@100 was 0.9815 at 79 lists of 316
    #: (100k), 0.9826 at 83 of 548 (300k), 0.9886 at 100 and 0.9913 at 150 of 1,000 (1M), and
    #: 0.9917 at 250 of 1,000 (capped by the 8-bit codes). So past ~600k vectors (√n lists, a
    #: quarter probed) the cap saves scanning for no measurable recall: 40% of the scan at 1M.
    max_probes: int = 150


@functools.cache
def available() -> bool:
    """Whether faiss is installed (the Lambda layer leaves it out: then search stays exact)."""
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


def crc_of(blob: bytes) -> int:
    return zlib.crc32(blob)


class AnnIndex:
    """An IVF index over (rowid → unit vector). Not thread-safe: the store serialises use."""

    def __init__(
        self, index: Any, ids: np.ndarray, crcs: np.ndarray, passage: np.ndarray, generation: int
    ) -> None:
        self.index = index
        order = np.argsort(ids)
        self.ids = ids[order].astype(np.int64)
        self.crcs = crcs[order].astype(np.uint32)
        self.passage = passage[order].astype(bool)
        self.generation = generation
        self.dirty = False
        #: The restrictions of recent filters (`restrict`): the same filter on every query (the
        #: caller's arrays are kept per write generation) cost an intersection with every rowid
        #: and a bitmap per query (~5 ms at 1M). Matched by identity of the array given (held, so
        #: its id is not reused); cleared when the index changes.
        self._selectors: list[Restriction] = []
        self._of_kind: dict[bool, np.ndarray] = {}
        self._centroids: np.ndarray | None = None

    # --- build / persist ---------------------------------------------------------------------

    @classmethod
    def build(
        cls, ids: np.ndarray, crcs: np.ndarray, passage: np.ndarray, matrix: np.ndarray, generation: int
    ) -> AnnIndex:
        import faiss

        n, dim = matrix.shape
        nlist = max(1, round(math.sqrt(n)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        rng = np.random.default_rng(0)  # the same records give the same lists
        sample = matrix if n <= nlist * 64 else matrix[np.sort(rng.choice(n, nlist * 64, replace=False))]
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        index.add_with_ids(np.ascontiguousarray(matrix, dtype=np.float32), ids.astype(np.int64))
        ann = cls(index, ids, crcs, passage, generation)
        ann.dirty = True
        return ann

    def save(self, path: Path) -> None:
        import faiss

        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as f:
            np.savez(
                f,
                faiss=faiss.serialize_index(self.index),
                ids=self.ids,
                crcs=self.crcs,
                passage=self.passage,
                generation=np.int64(self.generation),
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.dirty = False

    @classmethod
    def load(cls, path: Path) -> AnnIndex | None:
        """The saved index, or None when there is none or it is unreadable (then it is rebuilt)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                index = _read_faiss_member(path)
                return cls(index, z["ids"], z["crcs"], z["passage"], int(z["generation"]))
        except (OSError, ValueError, KeyError, RuntimeError, zipfile.BadZipFile):
            return None

    # --- change ------------------------------------------------------------------------------

    def remove(self, rowids: np.ndarray) -> None:
        import faiss

        if not len(rowids):
            return
        rowids = np.asarray(rowids, dtype=np.int64)
        present = rowids[np.isin(rowids, self.ids)]
        if not len(present):
            return
        self.index.remove_ids(faiss.IDSelectorBatch(present))
        keep = ~np.isin(self.ids, present)
        self.ids, self.crcs, self.passage = self.ids[keep], self.crcs[keep], self.passage[keep]
        self.dirty = True
        self._selectors, self._of_kind = [], {}

    def add(self, rowids: np.ndarray, crcs: np.ndarray, passage: np.ndarray, matrix: np.ndarray) -> None:
        if not len(rowids):
            return
        rowids = np.asarray(rowids, dtype=np.int64)
        self.remove(rowids)  # a reused rowid replaces its old vector
        self.index.add_with_ids(np.ascontiguousarray(matrix, dtype=np.float32), rowids)
        ids = np.concatenate([self.ids, rowids])
        order = np.argsort(ids)
        self.ids = ids[order]
        self.crcs = np.concatenate([self.crcs, np.asarray(crcs, dtype=np.uint32)])[order]
        self.passage = np.concatenate([self.passage, np.asarray(passage, dtype=bool)])[order]
        self.dirty = True
        self._selectors, self._of_kind = [], {}

    def diff(self, ids: np.ndarray, crcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rowids to remove, positions in `ids` to add) to match the records (`ids` sorted)."""
        stale = self.ids[~np.isin(self.ids, ids)]
        at = np.searchsorted(self.ids, ids)
        at_c = np.minimum(at, max(len(self.ids) - 1, 0))
        same = (
            (at < len(self.ids)) & (self.ids[at_c] == ids) & (self.crcs[at_c] == crcs)
            if len(self.ids)
            else np.zeros(len(ids), dtype=bool)
        )
        changed_pos = np.flatnonzero(~same)
        changed_present = ids[changed_pos][np.isin(ids[changed_pos], self.ids)]
        return np.concatenate([stale, changed_present]), changed_pos

    # --- search ------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.ids)

    def restrict(self, wanted: np.ndarray) -> Restriction:
        """The rowids of `wanted` (sorted) this index holds, their bitmap and how many fall in
        each inverted list; kept for the next queries with the same array."""
        import faiss

        for i, r in enumerate(self._selectors):
            if r.given is wanted:
                if i:  # least recently used goes first, as in the store's allowed-rowids cache
                    self._selectors = [r, *self._selectors[:i], *self._selectors[i + 1 :]]
                return r
        given = wanted
        wanted = np.asarray(wanted, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, wanted), max(self.size - 1, 0))
        allowed = wanted[self.ids[pos] == wanted] if self.size else wanted[:0]
        bits = np.zeros(int(allowed.max()) // 8 + 1 if len(allowed) else 1, dtype=np.uint8)
        np.bitwise_or.at(bits, allowed // 8, (1 << (allowed % 8)).astype(np.uint8))
        invlists = self.index.invlists
        per_list = np.zeros(int(self.index.nlist), dtype=np.int64)
        for lst in range(len(per_list)):
            size = invlists.list_size(lst)
            if size:
                ptr = invlists.get_ids(lst)
                ids = faiss.rev_swig_ptr(ptr, size).copy()
                invlists.release_ids(lst, ptr)
                ids = ids[ids < 8 * len(bits)]
                per_list[lst] = int(np.count_nonzero((bits[ids >> 3] >> (ids & 7)) & 1))
        r = Restriction(given, allowed, bits, per_list)
        self._selectors = [r, *self._selectors[: SELECTOR_CACHE_SIZE - 1]]
        return r

    def of_kind(self, passage: bool) -> np.ndarray | None:
        """The rowids of passages (or of spans), None when that is every row; one array per
        index state, so its restriction is kept like a filter's."""
        if passage not in self._of_kind:
            match = self.passage if passage else ~self.passage
            self._of_kind[passage] = self.ids if match.all() else self.ids[match]
        found = self._of_kind[passage]
        return None if found is self.ids else found

    def _list_order(self, q: np.ndarray) -> np.ndarray:
        """The inverted lists from nearest to farthest (the order faiss probes them in)."""
        if self._centroids is None:
            self._centroids = self.index.quantizer.reconstruct_n(0, int(self.index.nlist))
        order: np.ndarray = np.argsort(-(self._centroids @ q.reshape(-1)), kind="stable")
        return order

    def search(
        self,
        q: np.ndarray,
        k: int,
        allowed: np.ndarray | Restriction | None,
        probe_fraction: float,
        max_probes: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top `k` (rowids, scores) among `allowed` rowids (None: all). A restricted search
        probes more of the nearest lists that hold allowed vectors (`FILTERED_PROBE_EXPONENT`,
        `FILTERED_MIN_PER_RESULT`), counted list by list: a filter whose vectors crowd in a few
        lists far from the query is followed there, not cut off at a fixed number of lists; all
        lists when k is a large part of the allowed set (then it is exact)."""
        import faiss

        nlist = int(self.index.nlist)
        nprobe = max(1, math.ceil(nlist * probe_fraction))
        if max_probes:
            nprobe = min(nprobe, max_probes)
        params = faiss.SearchParametersIVF()
        if allowed is not None:
            r = allowed if isinstance(allowed, Restriction) else self.restrict(np.asarray(allowed))
            n_allowed = len(r.allowed)
            if not n_allowed:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            share = n_allowed / max(self.size, 1)
            in_order = r.per_list[self._list_order(q)]
            holding = np.cumsum(in_order > 0)
            lists = min(int(holding[-1]), math.ceil(nprobe * share**-FILTERED_PROBE_EXPONENT))
            covered = np.cumsum(in_order)
            enough = min(n_allowed, FILTERED_MIN_PER_RESULT * k)
            nprobe = 1 + max(int(np.searchsorted(holding, lists)), int(np.searchsorted(covered, enough)))
            params.sel = faiss.IDSelectorBitmap(len(r.bits), faiss.swig_ptr(r.bits))
        params.nprobe = min(nlist, nprobe)
        scores, labels = self.index.search(
            np.ascontiguousarray(q.reshape(1, -1), dtype=np.float32), k, params=params
        )
        keep = labels[0] >= 0
        return labels[0][keep].astype(np.int64), scores[0][keep]


@dataclass(frozen=True, eq=False)
class Restriction:
    """A filter's allowed rowids as one index holds them (`AnnIndex.restrict`)."""

    given: np.ndarray  # the caller's array, matched by identity
    allowed: np.ndarray  # int64, sorted: the allowed rowids in the index
    bits: np.ndarray  # uint8 bitmap over rowids (faiss IDSelectorBitmap)
    per_list: np.ndarray  # allowed vectors per inverted list


def _read_faiss_member(path: Path) -> Any:
    """The index serialised in `path`'s `faiss` member, streamed into faiss. Read whole first
    (`np.load`'s way), the serialised bytes and the index they become were both in memory: at 1M
    passages the process peaked at 1.2 GB while loading a 0.4 GB index (serving RSS 0.88 GB)."""
    import faiss

    with zipfile.ZipFile(path) as archive, archive.open("faiss.npy") as member:
        major, _ = np.lib.format.read_magic(member)
        header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, _, dtype = header(member)
        if dtype != np.uint8 or len(shape) != 1:
            raise ValueError(f"{path.name}: the faiss member is {dtype} {shape}, not bytes")
        reader = faiss.PyCallbackIOReader(member.read, 1 << 20)  # type: ignore[attr-defined]
        return faiss.read_index(reader)
