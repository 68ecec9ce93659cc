"""The embedded store's dense leg: exact cosine over an in-memory matrix, or the faiss IVF index
(`ann.py`) past `AnnConfig.min_vectors`; both follow this process's writes in place."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evidence.errors import EmbedderMismatchError
from evidence.records import ChunkKind, SearchHit
from evidence.search.analysis import EnglishAnalyzer
from evidence.search.ann import REBUILD_SHARE, AnnConfig, AnnIndex, Restriction, crc_of
from evidence.search.ann import available as ann_available
from evidence.search.base import Filters, Vector
from evidence.search.store_records import RecordStore, select_in
from evidence.sqlite_wal import immediate

#: Past the ANN threshold, a filter allowing at most this many chunks is searched exactly.
EXACT_FILTERED_MAX = 4096


#: Another process's commits are read row by row into the dense matrix up to this many rows, or
#: as many as it holds; past that it is reloaded whole (`_caught_up`).
CATCH_UP_MIN_ROWS = 1024

#: How vectors are stored (`info.vector_format`): float16, half the bytes of float32 on disk (the
#: exact-search matrix in memory stays float32: see `_DenseCache`). SciFact nDCG@10 is unchanged to
#: 4 decimals (docs/scale.md); a vector float16 cannot hold (a component past ±65,504) stays
#: float32. A blob's length tells its format: an index's dimension is fixed.
VECTOR_FORMAT = "f16"
#: Rows converted per transaction when an index of float32 blobs is opened (`convert_vectors`).
CONVERT_BATCH = 4096


def _vector_blob(vec: Vector | None) -> bytes | None:
    """A row of NaN means "no vector for this chunk" (spans are not embedded)."""
    if vec is None:
        return None
    arr = np.asarray(vec, dtype=np.float32)
    if np.isnan(arr).any():
        return None
    half = arr.astype(np.float16)
    return half.tobytes() if np.isfinite(half).all() else arr.tobytes()


def decode_vectors(blobs: Sequence[bytes], dim: int | None, dtype: type = np.float32) -> np.ndarray:
    """Blobs of either format (float16 or float32: their length tells) as one (n, dim) matrix."""
    if not blobs:
        return np.empty((0, dim or 0), dtype=dtype)
    if dim is None:  # an index from before dimensions were recorded: float32, as then written
        dim = len(blobs[0]) // 4
    size = len(blobs[0])
    if all(len(b) == size for b in blobs):
        stored = np.float16 if size == 2 * dim else np.float32
        return np.frombuffer(b"".join(blobs), dtype=stored).reshape(len(blobs), -1).astype(dtype, copy=False)
    out: np.ndarray = np.empty((len(blobs), dim), dtype=dtype)
    for i, blob in enumerate(blobs):
        out[i] = np.frombuffer(blob, dtype=np.float16 if len(blob) == 2 * dim else np.float32)
    return out


#: Past this many dropped rows a patch gathers the kept rows instead of copying the runs between.
_SPLICE_RUNS = 256


def _spliced(matrix: np.ndarray, keep: np.ndarray | None, new: np.ndarray | None) -> np.ndarray:
    """`matrix`'s rows where `keep` (all without it), then `new`'s, in one new array, the kept
    rows copied as runs between the dropped ones. After another process's commit (a few rows
    out, a few in) filtering and then concatenating copied the whole matrix twice, by a gather:
    ~1.1-1.5 ms of CPU at SciFact's 5,183 x 384 against ~0.3 ms for this, on every commit of
    the mixed load in every worker (docs/scale.md#serving-cpu)."""
    dim = new.shape[1] if new is not None else matrix.shape[1]
    old = matrix.reshape(len(matrix), -1) if len(matrix) else matrix.reshape(0, dim)
    drop = np.flatnonzero(~keep) if keep is not None else np.empty(0, dtype=np.int64)
    if len(drop) > _SPLICE_RUNS:  # many runs (a bulk delete): one gather beats a loop over them
        kept = old[keep]
        return kept if new is None else np.concatenate([kept, new])
    extra = len(new) if new is not None else 0
    dtype = np.result_type(old, new) if new is not None else old.dtype
    out = np.empty((len(old) - len(drop) + extra, dim), dtype=dtype)
    at = prev = 0
    for cut in [*drop.tolist(), len(old)]:
        out[at : at + cut - prev] = old[prev:cut]
        at += cut - prev
        prev = cut + 1
    if new is not None:
        out[at:] = new
    return out


@dataclass
class _DenseCache:
    generation: int
    rowids: np.ndarray  # int64
    kinds: np.ndarray  # bool: True = passage
    #: (n, dim) float32 even when the blobs are float16: numpy widens float16 at ~3 ns a value
    #: here (no F16C path), which made a 100k scan 87 ms instead of 11 ms; below the ANN
    #: threshold the matrix is at most ~150 MB.
    matrix: np.ndarray
    #: Whether `rowids` ascend (`_ascending`): a write that reuses a freed rowid appends it out of order.
    ascending: bool | None = None


def _ascending(cache: _DenseCache) -> bool:
    """Whether `cache.rowids` ascend, checked once per matrix (it is never changed in place)."""
    if cache.ascending is None:
        cache.ascending = bool(np.all(cache.rowids[1:] > cache.rowids[:-1]))
    return cache.ascending


class DenseStore(RecordStore):
    """Dense search over the records' vectors, exact or approximate."""

    def __init__(
        self, root: Path, analyzer: EnglishAnalyzer, k1: float, b: float, ann: AnnConfig | None = None
    ) -> None:
        super().__init__(root, analyzer, k1, b, ann)
        #: Above `ann.min_vectors` vectors the dense leg is approximate (`ann.py`); None = always exact.
        self.ann_config = ann
        self._ann: AnnIndex | None = None
        #: Searches and in-place updates of `_ann` take turns (faiss indexes are not thread-safe).
        self._ann_lock = threading.Lock()
        self._vector_count: tuple[int, int] = (-1, 0)  # (generation, vectors)
        self._count_lock = threading.Lock()
        self._dense_lock = threading.Lock()  # one thread rebuilds the dense matrix, others wait for it
        self._dense: _DenseCache | None = None
        self._dim: int | None = None

    def dimension(self, db: sqlite3.Connection | None = None) -> int | None:
        """The vectors' dimension, recorded with the embedder (fixed for the index's life)."""
        if self._dim is None:
            value = self.info("dimension", db)
            self._dim = int(value) if value else None
        return self._dim

    def convert_vectors(self) -> int:
        """Rewrite float32 vector blobs (an index written before `VECTOR_FORMAT`) as float16, in
        transactions of `CONVERT_BATCH` rows; returns the rows converted. Crash-safe without a
        journal of its own: every blob is readable in either format, so a store killed half-way
        is a valid store, and the next open converts the rest (it resumes at the first float32
        blob). The generation moves once at the end, so readers reload their matrices then."""
        with self._lock:
            if self.info("vector_format", self._db) == VECTOR_FORMAT:
                return 0
            db, converted, last = self._db, 0, -1
            dim = self.dimension(db)
            if dim is None:  # written before dimensions were recorded: float32 blobs, if any
                longest = db.execute("SELECT MAX(LENGTH(vector)) FROM chunks").fetchone()[0]
                if longest:
                    dim = int(longest) // 4
                    self.set_info("dimension", str(dim))
            while dim is not None:
                with immediate(db):
                    rows = db.execute(
                        "SELECT rowid, vector FROM chunks WHERE rowid > ? AND vector IS NOT NULL"
                        " AND LENGTH(vector) = ? ORDER BY rowid LIMIT ?",
                        (last, 4 * dim, CONVERT_BATCH),
                    ).fetchall()
                    db.executemany(
                        "UPDATE chunks SET vector = ? WHERE rowid = ?",
                        [
                            (_vector_blob(np.frombuffer(blob, dtype=np.float32)), rowid)
                            for rowid, blob in rows
                        ],
                    )
                if not rows:
                    break
                converted += len(rows)
                last = int(rows[-1][0])
            with immediate(db):
                if converted:
                    self.set_info("generation", str(self.generation(db) + 1))
                self.set_info("vector_format", VECTOR_FORMAT)
            return converted

    def _after_write(
        self, before: int, after: int, removed: list[int], added: list[tuple[int, str, bytes]]
    ) -> None:
        """Carry the caches of generation `before` to `after` (this process's own write): drop
        the rows it removed, add the vectors it inserted (rowid, kind, vector blob). Without
        this, every write made the next query rebuild the dense matrix and the chunk cache.
        Called with `_dense_lock` held, from the commit on (`_publish`)."""
        with self._small:
            if self._cache_gen == before:
                for rowid in removed:
                    old = self._by_rowid.pop(rowid, None)
                    if old is not None:
                        self._rowid_of.pop(old.chunk_id, None)
                self._cache_gen = after
        cache = self._dense
        if cache is None or cache.generation != before:
            return
        self._dense = self._patched(cache, after, removed, added)

    def _patched(
        self, cache: _DenseCache, after: int, removed: Sequence[int], added: Sequence[tuple[int, str, bytes]]
    ) -> _DenseCache | None:
        """`cache` without the rows `removed` and with the vectors `added`, at generation `after`
        (None when the vectors' dimension changed: the caller reloads whole)."""
        keep = ~np.isin(cache.rowids, np.asarray(removed, dtype=np.int64)) if removed else None
        rowids, kinds, matrix = cache.rowids, cache.kinds, cache.matrix
        new: np.ndarray | None = None
        if added:
            new = decode_vectors([v for _, _, v in added], self.dimension())
            if matrix.shape[1] not in (0, new.shape[1]):
                return None
            rowids = np.concatenate([rowids, np.asarray([r for r, _, _ in added], dtype=np.int64)])
            kinds = np.concatenate([kinds, np.asarray([k == "passage" for _, k, _ in added], dtype=bool)])
        if keep is not None:
            kept = np.concatenate([keep, np.ones(len(added), dtype=bool)])
            rowids, kinds = rowids[kept], kinds[kept]
        if keep is not None or new is not None:
            matrix = _spliced(matrix, keep, new)
        self._vector_count = (after, len(rowids))
        return _DenseCache(after, rowids, kinds, matrix)

    def _publish(self, before: int, removed: list[int], added: list[tuple[int, str, bytes]]) -> None:
        """COMMIT this process's write and carry the caches to it, as one step for readers: a
        reader that sees the new generation before the caches do waits on `_dense_lock` for
        them. Patched after the commit, outside the lock, a reader in between found a stale
        matrix and rebuilt it from the records, every vector read again, while the others
        queued behind the rebuild (a race, rare in the profiles: RELIABILITY.md, "Load").
        The rows it changed go to `change_log` first, for the other processes' caches."""
        self.log_changes(before + 1, itertools.chain(removed, (r for r, _, _ in added)))
        with self._dense_lock:
            self._db.execute("COMMIT")
            self._after_write(before, before + 1, removed, added)
            self._ann_after_write(before, before + 1, removed, added)

    def _ann_after_write(
        self, before: int, after: int, removed: list[int], added: list[tuple[int, str, bytes]]
    ) -> None:
        """Patch the in-memory ANN index with this process's own write (saved on close; a crash
        before that leaves the file at an older generation, reconciled on next use)."""
        with self._ann_lock:
            ann = self._ann
            if ann is None or ann.generation != before:
                return
            self._ann_patch(ann, after, removed, added)

    def _ann_patch(
        self, ann: AnnIndex, after: int, removed: Sequence[int], added: Sequence[tuple[int, str, bytes]]
    ) -> None:
        ann.remove(np.asarray(removed, dtype=np.int64))
        if added:
            matrix = decode_vectors([v for _, _, v in added], self.dimension())
            ann.add(
                np.asarray([r for r, _, _ in added], dtype=np.int64),
                np.asarray([crc_of(v) for _, _, v in added], dtype=np.uint32),
                np.asarray([k == "passage" for _, k, _ in added], dtype=bool),
                matrix,
            )
        ann.generation = after

    def _changes(
        self, since: int, most: int | None = None
    ) -> tuple[int, list[int], list[tuple[int, str, bytes]]] | None:
        """What other processes' commits changed since generation `since`, from one snapshot:
        (its generation, the rowids to drop, the vectors they hold now as (rowid, kind, blob));
        None when `change_log` cannot say, or when more than `most` rows changed (the caller
        reloads whole)."""
        with self._snapshot() as db:
            gen = self.generation(db)
            changed = self.changed_since(db, since, gen)
            if changed is None or (most is not None and len(changed) > most):
                return None
            added = [
                (int(r), str(k), bytes(v))
                for r, k, v in select_in(
                    db,
                    "SELECT rowid, kind, vector FROM chunks WHERE rowid IN ({marks}) AND vector IS NOT NULL"
                    " ORDER BY rowid",
                    changed,
                )
            ]
        return gen, changed, added

    def _caught_up(self, cache: _DenseCache) -> _DenseCache | None:
        """`cache` carried to the last commit through `change_log`, or None (reload whole: also
        when the commits changed more rows than it holds, as a bulk load into a small index
        does; reading them one by one would cost more than one scan)."""
        changes = self._changes(cache.generation, most=max(CATCH_UP_MIN_ROWS, len(cache.rowids)))
        if changes is None:
            return None
        gen, removed, added = changes
        return self._patched(cache, gen, removed, added)

    def _dense_cache(self) -> _DenseCache:
        gen = self.generation()
        cache = self._dense
        # A newer matrix than this reader's snapshot is a later commit: as good for it.
        if cache is not None and cache.generation >= gen:
            return cache
        with self._dense_lock:
            cache = self._dense
            if cache is not None and cache.generation >= gen:
                return cache  # built by another reader meanwhile
            # Another process's commit: carried through the change log (a few rows read), or,
            # when the log cannot say, reloaded whole.
            cache = (self._caught_up(cache) if cache is not None else None) or self._load_dense()
            self._dense = cache
            return cache

    def _load_dense(self) -> _DenseCache:
        # The first dense query, and a commit the change log cannot account for. Holding the old
        # matrix, every row's blob and their join at once tripled the peak, and the tens of
        # thousands of small blobs fragmented the allocator: RSS grew under sustained writes
        # (RELIABILITY.md, "Load"). One snapshot, one preallocated matrix filled in slices.
        self._dense = None
        with self._snapshot() as db:  # the count and the rows agree
            gen = self.generation(db)
            dim = self.dimension(db)
            n, longest = db.execute(
                "SELECT COUNT(*), MAX(LENGTH(vector)) FROM chunks WHERE vector IS NOT NULL"
            ).fetchone()
            if dim is None:
                dim = (longest or 0) // 4
            rowids = np.empty(n, dtype=np.int64)
            kinds = np.empty(n, dtype=bool)
            matrix = np.empty((n, dim), dtype=np.float32)
            cursor = db.execute(
                "SELECT rowid, kind, vector FROM chunks WHERE vector IS NOT NULL ORDER BY rowid"
            )
            at = 0
            while rows := cursor.fetchmany(2048):
                end = at + len(rows)
                rowids[at:end] = [r[0] for r in rows]
                kinds[at:end] = [r[1] == "passage" for r in rows]
                matrix[at:end] = decode_vectors([r[2] for r in rows], dim)
                at = end
        return _DenseCache(gen, rowids, kinds, matrix)

    # --- approximate dense search (ann.py) ------------------------------------------------

    @property
    def _ann_path(self) -> Path:
        return self.root / "ann.npz"

    def vectors_count(self) -> int:
        """Vectors as last committed, cached per generation: the COUNT scans every record, and
        with every reader that saw a write counting at once it was a quarter of a retrieve's time
        under mixed load. Own writes carry it (`_after_write`); another process's commits, the
        dense matrix or ANN index this process holds (each caught up through the change log);
        with neither held, one reader counts for the others."""
        with self._snapshot() as db:
            gen = self.generation(db)
            if self._vector_count[0] == gen:
                return self._vector_count[1]
            if self._ann is not None:
                return len(self._ann_current().ids)
            if self._dense is not None:
                return len(self._dense_cache().rowids)
            with self._count_lock:
                if self._vector_count[0] != gen:
                    n = db.execute("SELECT COUNT(*) FROM chunks WHERE vector IS NOT NULL").fetchone()[0]
                    self._vector_count = (gen, int(n))
                return self._vector_count[1]

    def uses_ann(self) -> bool:
        return (
            self.ann_config is not None
            and self.vectors_count() >= self.ann_config.min_vectors
            and ann_available()
        )

    def _ann_current(self) -> AnnIndex:
        """The ANN index at the last committed generation (or later): loaded, reconciled with the
        records or rebuilt, and saved when it changed."""
        gen = self.generation()
        ann = self._ann
        if ann is not None and ann.generation >= gen:
            return ann
        with self._dense_lock:
            ann = self._ann
            if ann is not None and ann.generation >= self.generation():
                return ann
            changes = None if ann is None else self._changes(ann.generation)
            if ann is not None and changes is not None:
                # Another process's commits, carried in memory like this process's own (saved
                # on close): reconciling read every row's checksum, then wrote the whole file.
                with self._ann_lock:
                    self._ann_patch(ann, *changes)
                return ann
            if ann is None:
                ann = AnnIndex.load(self._ann_path)
            with self._ann_lock:
                ann = self._reconcile(ann)
                self._ann = ann
            if ann.dirty:
                ann.save(self._ann_path)
            return ann

    def _reconcile(self, ann: AnnIndex | None) -> AnnIndex:
        with self._snapshot() as db:  # one commit: the generation and the rows agree
            gen = self.generation(db)
            if ann is not None and ann.generation == gen:
                return ann
            n = db.execute("SELECT COUNT(*) FROM chunks WHERE vector IS NOT NULL").fetchone()[0]
            ids = np.empty(n, dtype=np.int64)
            passage = np.empty(n, dtype=bool)
            crcs = np.empty(n, dtype=np.uint32)
            cursor = db.execute(
                "SELECT rowid, kind, vector FROM chunks WHERE vector IS NOT NULL ORDER BY rowid"
            )
            at = 0
            while rows := cursor.fetchmany(4096):
                end = at + len(rows)
                ids[at:end] = [r[0] for r in rows]
                passage[at:end] = [r[1] == "passage" for r in rows]
                crcs[at:end] = [crc_of(r[2]) for r in rows]
                at = end
            if ann is not None:
                stale, add_pos = ann.diff(ids, crcs)
                if len(stale) + len(add_pos) <= REBUILD_SHARE * max(n, 1):
                    ann.remove(stale)
                    if len(add_pos):
                        ann.add(
                            ids[add_pos], crcs[add_pos], passage[add_pos], self._vectors_of(db, ids[add_pos])
                        )
                    ann.generation = gen
                    ann.dirty = True
                    return ann
            return AnnIndex.build(ids, crcs, passage, self._vectors_of(db, ids), gen)

    def _vectors_of(self, db: sqlite3.Connection, rowids: np.ndarray) -> np.ndarray:
        """The vectors of `rowids` (sorted), as a float32 matrix, read in slices."""
        out: np.ndarray | None = None
        for start in range(0, len(rowids), 4096):
            part = [int(r) for r in rowids[start : start + 4096]]
            rows = db.execute(
                "SELECT vector FROM chunks WHERE rowid IN (SELECT value FROM json_each(?)) ORDER BY rowid",
                (json.dumps(part),),
            ).fetchall()
            block = decode_vectors([r[0] for r in rows], self.dimension(db))
            if out is None:
                out = np.empty((len(rowids), block.shape[1]), dtype=np.float32)
            out[start : start + len(rows)] = block
        return out if out is not None else np.empty((0, 0), dtype=np.float32)

    def _ann_search(
        self, ann: AnnIndex, q: np.ndarray, k: int, wanted: np.ndarray | None, kind: ChunkKind | None
    ) -> tuple[np.ndarray, np.ndarray]:
        assert self.ann_config is not None
        with self._ann_lock:
            dim = int(ann.index.d)
            if q.shape[0] != dim:
                raise EmbedderMismatchError(
                    f"query vector has {q.shape[0]} dimensions; the index holds {dim}"
                )
            allowed: np.ndarray | Restriction | None = None
            if wanted is not None:
                allowed = ann.restrict(wanted)
            elif kind is not None:
                of_kind = ann.of_kind(kind is ChunkKind.PASSAGE)
                allowed = None if of_kind is None else ann.restrict(of_kind)
            return ann.search(q, k, allowed, self.ann_config.probe_fraction, self.ann_config.max_probes)

    def _dense_ann(
        self, q: np.ndarray, k: int, filters: Filters | None, kind: ChunkKind | None
    ) -> list[SearchHit]:
        assert self.ann_config is not None
        ann = self._ann_current()
        wanted = self.allowed_rowids(filters, kind)
        if wanted is not None and len(wanted) <= EXACT_FILTERED_MAX:
            # A small allowed set (a few documents, score completion's chunk ids): its vectors
            # read from the records and scored exactly cost less than any index scan.
            with self._snapshot() as db:
                rowids_small = np.asarray(
                    [
                        r[0]
                        for r in db.execute(
                            "SELECT rowid FROM chunks WHERE vector IS NOT NULL AND rowid IN "
                            "(SELECT value FROM json_each(?)) ORDER BY rowid",
                            (json.dumps([int(r) for r in wanted]),),
                        )
                    ],
                    dtype=np.int64,
                )
                matrix = self._vectors_of(db, rowids_small)
            if not len(rowids_small):
                return []
            if q.shape[0] != matrix.shape[1]:
                raise EmbedderMismatchError(
                    f"query vector has {q.shape[0]} dimensions; the index holds {matrix.shape[1]}"
                )
            sims = matrix @ q
            top = np.argsort(-sims, kind="stable")[:k]
            rowids, scores = rowids_small[top], sims[top]
        else:
            rowids, scores = self._ann_search(ann, q, k, wanted, kind)
        chosen = [int(r) for r in rowids]
        found = self.chunks_by_rowid(chosen)
        hits = [
            SearchHit(chunk=found[r], score=float(s), dense=float(s))
            for r, s in zip(chosen, scores, strict=True)
            if r in found
        ]
        hits.sort(key=lambda h: (-h.score, h.chunk.chunk_id))
        return hits

    def dense(
        self, vector: Vector, k: int, filters: Filters | None, kind: ChunkKind | None
    ) -> list[SearchHit]:
        if self.uses_ann():
            return self._dense_ann(np.asarray(vector, dtype=np.float32).reshape(-1), k, filters, kind)
        cache = self._dense_cache()
        if not len(cache.rowids):
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != cache.matrix.shape[1]:
            raise EmbedderMismatchError(
                f"query vector has {q.shape[0]} dimensions; the index holds {cache.matrix.shape[1]}"
            )
        sims = cache.matrix @ q
        mask = np.ones(len(sims), dtype=bool)
        if kind is not None:
            mask &= cache.kinds if kind is ChunkKind.PASSAGE else ~cache.kinds
        allowed = self.allowed_rowids(filters, kind)
        if allowed is not None:
            mask &= np.isin(cache.rowids, allowed)
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return []
        sub = sims[candidates]
        n = min(k, len(sub))
        top = np.argpartition(-sub, n - 1)[:n] if n < len(sub) else np.arange(len(sub))
        picked = candidates[top]
        chosen_rowids = [int(r) for r in cache.rowids[picked]]
        scores = {int(cache.rowids[i]): float(sims[i]) for i in picked}
        found = self.chunks_by_rowid(chosen_rowids)
        hits = [
            SearchHit(chunk=found[r], score=scores[r], dense=scores[r]) for r in chosen_rowids if r in found
        ]
        hits.sort(key=lambda h: (-h.score, h.chunk.chunk_id))
        return hits

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        # Score completion asks this for the lexical hits of every retrieve: reading and decoding
        # their blobs one by one was its largest store cost (~1.5 ms of CPU per retrieve on
        # SciFact). The held matrix and chunk cache answer what they know at the snapshot's
        # generation; the rest is read, decoded as one matrix.
        out: dict[str, Vector] = {}
        with self._snapshot() as db:
            missing = self._held_vectors(self.generation(db), chunk_ids, out)
            if missing:
                rows = list(
                    select_in(
                        db,
                        "SELECT chunk_id, vector FROM chunks WHERE chunk_id IN ({marks})"
                        " AND vector IS NOT NULL",
                        missing,
                    )
                )
                if rows:
                    matrix = decode_vectors([bytes(b) for _, b in rows], self.dimension(db))
                    out.update(zip((str(c) for c, _ in rows), matrix, strict=True))
        return out

    def _held_vectors(self, gen: int, chunk_ids: Sequence[str], out: dict[str, Vector]) -> list[str]:
        """Put in `out` the vectors of `chunk_ids` that the dense matrix and the chunk cache both
        hold at generation `gen` (the caller's snapshot); return the chunk ids left to read. Both
        must be at `gen` exactly: a rowid may hold another chunk in another generation. A chunk
        the cache knows but the matrix lacks has no vector at `gen` (the matrix holds every one)."""
        cache = self._dense
        if cache is None or cache.generation != gen or not len(cache.rowids) or not _ascending(cache):
            return list(chunk_ids)
        known: list[tuple[str, int]] = []
        missing: list[str] = []
        with self._small:
            if self._cache_gen != gen:
                return list(chunk_ids)
            for cid in chunk_ids:
                rowid = self._rowid_of.get(cid)
                if rowid is None:
                    missing.append(cid)
                else:
                    known.append((cid, rowid))
        if known:
            wanted = np.asarray([r for _, r in known], dtype=np.int64)
            pos = np.minimum(np.searchsorted(cache.rowids, wanted), len(cache.rowids) - 1)
            held = cache.rowids[pos] == wanted
            rows = cache.matrix[pos[held]]
            out.update(zip((cid for (cid, _), h in zip(known, held, strict=True) if h), rows, strict=True))
        return missing
