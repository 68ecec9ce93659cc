"""The embedded store's records: SQLite schema, reader connections, chunks and their cache, filters.

`RecordStore` is the base of `IndexStore` (`embedded_store.py`): it opens the SQLite file and
gives every other part committed snapshots to read from (`_reading`, `_snapshot`), rows turned
into `Chunk`s (cached per write generation) and the rowids a filter allows.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from evidence.errors import EmbedderMismatchError
from evidence.records import Chunk, ChunkKind, SearchHit, SpanType
from evidence.search.analysis import EnglishAnalyzer
from evidence.search.ann import AnnConfig
from evidence.search.base import (
    DocumentInfo,
    Filters,
    IndexInfo,
    OrderedChunks,
    filter_value,
    filter_values,
    group_ordered,
    ordered_chunks,
)
from evidence.search.written import EXTRA_KEY, as_extra
from evidence.sqlite_wal import immediate, open_wal

_SCHEMA = """
CREATE TABLE IF NOT EXISTS info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    document_id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    metadata TEXT NOT NULL,
    passages INTEGER NOT NULL,
    spans INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    document_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    title TEXT NOT NULL,
    source TEXT NOT NULL,
    section TEXT NOT NULL,
    page INTEGER,
    sequence INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    span_type TEXT,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(document_id);
CREATE INDEX IF NOT EXISTS chunks_section ON chunks(section);
CREATE TABLE IF NOT EXISTS doc_meta (
    document_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS doc_meta_kv ON doc_meta(key, value);
CREATE INDEX IF NOT EXISTS doc_meta_doc ON doc_meta(document_id);
CREATE TABLE IF NOT EXISTS lexical_pending (document_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS change_log (generation INTEGER NOT NULL, chunk_rowid INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS change_log_gen ON change_log(generation);
"""

_CHUNK_COLS = (
    "rowid, chunk_id, document_id, kind, text, title, source, section, page, sequence, "
    "char_start, char_end, span_type, metadata, content_hash"
)
#: Built-in fields that filters may name besides metadata keys.
BUILTIN_FILTER_FIELDS = ("chunk_id", "document_id", "kind", "span_type", "section")
#: SQLite page size of a new index file (bytes).
PAGE_SIZE = 16_384
#: Chunks kept decoded in memory per open index (~1-2 kB each).
CHUNK_CACHE_SIZE = 50_000
#: Filters whose allowed rowids are kept per index (each up to 8 bytes per matching chunk).
ALLOWED_CACHE_SIZE = 16
#: Chunks kept in documents' `OrderedChunks` per open index (`ordered_lookup`), at one write
#: generation (~1-2 kB each, beside the chunk cache's own copies; the longest development
#: document has ~4,000 spans); a document larger than this is read each time.
ORDERED_CACHE_CHUNKS = 20_000
#: Past the ANN threshold, a filter allowing at most this many chunks is searched exactly.


#: Commits whose changed rowids `change_log` keeps (`log_changes`): a reader this many commits
#: behind another process's writes reloads its caches whole instead of catching up.
CHANGE_LOG_GENERATIONS = 64
#: The `change_log` row every logged commit writes, changes or not: a commit without it (pruned,
#: or made by a version that kept no log) means the log cannot say what that commit changed.
_LOGGED = -1


#: Keys per `IN (...)` query: under SQLite's oldest default limit of 999 bound parameters.
IN_BATCH = 900


def select_in(db: sqlite3.Connection, sql: str, keys: Sequence[Any], *params: Any) -> Iterator[Any]:
    """The rows of `sql`, whose `{marks}` stands for the placeholders of `keys`, asked in batches
    of `IN_BATCH`; `params` are bound after the keys."""
    for start in range(0, len(keys), IN_BATCH):
        part = list(keys[start : start + IN_BATCH])
        yield from db.execute(sql.format(marks=",".join("?" * len(part))), [*part, *params])


def meta_term(key: str, value: str) -> str:
    """The lexical filter term of one metadata pair: `key=value`, with `\\` and `=` escaped in the
    key, so the first unescaped `=` is the separator. Unescaped, `{"team=red": "secret"}` and
    `{"team": "red=secret"}` were the same term. Ordinary keys give the same terms as before."""
    return key.replace("\\", "\\\\").replace("=", "\\=") + "=" + value


def _metadata_terms(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    terms: list[tuple[str, str]] = []
    for key, value in metadata.items():
        if value is None or isinstance(value, dict) or key in BUILTIN_FILTER_FIELDS:
            continue
        values = value if isinstance(value, list) else [value]
        terms.extend((key, filter_value(v)) for v in values)
    return terms


def _filter_condition(key: str, value: Any) -> tuple[str, list[str]]:
    """One filter key's SQL condition on `chunks` and its arguments: the values as one JSON array
    (one variable however many values), compared in `filter_value`'s string form."""
    values = [filter_value(v) for v in value] if isinstance(value, list | tuple) else [filter_value(value)]
    if key in BUILTIN_FILTER_FIELDS:
        return f"{key} IN (SELECT value FROM json_each(?))", [json.dumps(values)]
    return (
        "document_id IN (SELECT document_id FROM doc_meta WHERE key = ? "
        "AND value IN (SELECT value FROM json_each(?)))",
        [key, json.dumps(values)],
    )


class RecordStore:
    """One index's SQLite records and the reads over them (the base of `IndexStore`)."""

    def __init__(
        self, root: Path, analyzer: EnglishAnalyzer, k1: float, b: float, ann: AnnConfig | None = None
    ) -> None:
        self.root = root
        #: Allowed rowids per (filters, kind) at one write generation (`allowed_rowids`).
        self._allowed: dict[tuple[str, str], np.ndarray] = {}
        self._allowed_gen = -1
        self.analyzer = analyzer
        self.k1 = k1
        self.b = b
        #: Writers take turns on this (and on `_process_lock` across processes). Readers never
        #: take it: they read committed snapshots on connections of their own (`_reading`).
        self._lock = threading.RLock()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        self._small = threading.Lock()  # the reader pool, the caches' dicts, the open tantivy indexes
        # Another process (a second `evidence index`, the server) may hold the write lock for a
        # batch: wait for it rather than fail.
        # A chunk row (text + float16 vector) is ~1.6 kB: 4 kB pages held two and left ~20% of
        # each page empty; 16 kB pages waste ~5%. Only a new file takes it (an existing one keeps
        # its page size).
        self._db = open_wal(root / "records.sqlite3", busy_s=60, page_size=PAGE_SIZE)
        self._db.executescript(_SCHEMA)
        self._cache_gen = -1
        self._by_rowid: dict[int, Chunk] = {}
        self._rowid_of: dict[str, int] = {}
        #: (generation, documents, chunks): counting 1M rows took ~5 ms, and every retrieve asks
        #: `describe` up to three times. Counts change only with the generation.
        self._counted: tuple[int, int, int] = (-1, 0, 0)
        #: (document, kind) -> its chunks in document order with their rowids, at generation
        #: `_ordered_gen` (`ordered_lookup`); least recently used first, at most
        #: ORDERED_CACHE_CHUNKS chunks in all.
        self._ordered: dict[tuple[str, str], tuple[OrderedChunks, np.ndarray]] = {}
        self._ordered_gen = -1
        self._ordered_size = 0

    # --- readers ------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads only. The writer's connection is not one: a reader on it would
        see a write transaction's rows before they commit (WAL gives each reader connection the
        last committed snapshot instead, and a reader never waits for a writer)."""
        with self._small:
            db = self._readers.pop() if self._readers else None
        if db is None:
            db = sqlite3.connect(
                self.root / "records.sqlite3", check_same_thread=False, isolation_level=None, timeout=60
            )
            db.execute("PRAGMA query_only=1")
        try:
            yield db
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            with self._small:
                closed = self._closed
                if not closed:
                    self._readers.append(db)
            if closed:
                db.close()  # the store closed while this read ran: closed here, not under it

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A reader connection inside one read transaction: every query sees the same commit."""
        with self._reading() as db:
            db.execute("BEGIN")
            yield db

    # --- info -----------------------------------------------------------------------------

    def info(self, key: str, db: sqlite3.Connection | None = None) -> str | None:
        """`key` as last committed (`db`: the writer's connection inside its own transaction)."""
        if db is not None:
            row = db.execute("SELECT value FROM info WHERE key = ?", (key,)).fetchone()
        else:
            with self._reading() as reader:
                row = reader.execute("SELECT value FROM info WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_info(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO info(key, value) VALUES (?, ?)", (key, value))

    def generation(self, db: sqlite3.Connection | None = None) -> int:
        return int(self.info("generation", db) or 0)

    # --- what other processes' commits changed ----------------------------------------------
    # Caches (the chunk cache, the dense matrix, the ANN index) follow this process's own writes
    # in place. Another process's commit (a second `serve --workers` worker, `evidence index`)
    # used to make them reload whole: with two workers each one rebuilt its dense matrix and
    # emptied its chunk cache after nearly every write of the other, 45-55 % of a retrieve's
    # time under the mixed load (RELIABILITY.md, "Worker processes"). Each commit now logs the
    # rowids it removed or added, and a reader catches up from the log.

    def log_changes(self, generation: int, rowids: Iterable[int]) -> None:
        """Log commit `generation`'s changed chunk rowids, inside the writer's transaction."""
        db = self._db
        db.executemany(
            "INSERT INTO change_log VALUES (?, ?)",
            [(generation, _LOGGED), *((generation, int(r)) for r in set(rowids))],
        )
        db.execute("DELETE FROM change_log WHERE generation <= ?", (generation - CHANGE_LOG_GENERATIONS,))

    @staticmethod
    def changed_since(db: sqlite3.Connection, since: int, until: int) -> list[int] | None:
        """The rowids of the chunks that commits `since`+1 .. `until` removed, added or replaced,
        read on the snapshot `db` (at `until`); None when the log does not hold every one of
        those commits: the caller reloads whole."""
        if since < 0 or until < since:
            return None
        if until == since:
            return []
        logged = db.execute(
            "SELECT COUNT(*) FROM change_log WHERE generation > ? AND generation <= ? AND chunk_rowid = ?",
            (since, until, _LOGGED),
        ).fetchone()[0]
        if logged != until - since:
            return None
        rows = db.execute(
            "SELECT DISTINCT chunk_rowid FROM change_log WHERE generation > ? AND generation <= ?"
            " AND chunk_rowid != ?",
            (since, until, _LOGGED),
        )
        return [int(r[0]) for r in rows]

    def ensure_embedder(self, embedder_id: str, dimension: int) -> None:
        """Record the embedder of a new index; refuse another one on an existing index."""
        # Every upload asks this first. Read from a snapshot when the index already has this
        # embedder (it never changes once recorded): under the writer's lock, uploads queued
        # behind the commit in flight before they could start embedding.
        if self.info("embedder_id") == embedder_id and int(self.info("dimension") or 0) == dimension:
            return
        self._record_embedder(embedder_id, dimension)

    def _record_embedder(self, embedder_id: str, dimension: int) -> None:
        """Compare and record the embedder in one write transaction (SQLite's write lock, held
        across processes to COMMIT). Read and written apart, two first writers of two models
        (two processes, or two stores on one folder) both read "no record", both wrote it (the
        last one kept) and both went on to embed: one index, vectors of two models. Now the
        second reads the first's record under the lock and is refused before it embeds."""
        with self._lock, immediate(self._db):
            current = self.info("embedder_id", self._db)
            recorded = int(self.info("dimension", self._db) or 0)
            if current is None:
                # Both keys in the one transaction: a reader never sees a model without its size.
                self.set_info("embedder_id", embedder_id)
                self.set_info("dimension", str(dimension))
            elif current != embedder_id or recorded != dimension:
                raise EmbedderMismatchError(
                    f"index {self.root.name!r} was built with embedder {current} "
                    f"({recorded} dims), not {embedder_id} ({dimension} dims); "
                    "use the same embedder or index into a new index",
                    field="index",
                )

    def describe(self) -> IndexInfo:
        with self._snapshot() as db:
            gen = self.generation(db)
            counted = self._counted
            if counted[0] == gen:
                docs, chunks = counted[1:]
            else:
                docs, chunks = self.counts(db)
                self._counted = (gen, docs, chunks)
            return IndexInfo(
                name=self.root.name,
                embedder_id=self.info("embedder_id", db) or "",
                dimension=int(self.info("dimension", db) or 0),
                documents=docs,
                chunks=chunks,
                extra=as_extra(self.info(EXTRA_KEY, db)),
            )

    # --- records --------------------------------------------------------------------------

    @staticmethod
    def _row_to_chunk(row: Sequence[Any]) -> Chunk:
        (_, cid, did, kind, text, title, source, section, page, seq, cs, ce, st, meta, ch) = row
        return Chunk(
            chunk_id=cid,
            document_id=did,
            kind=ChunkKind(kind),
            text=text,
            title=title,
            source=source,
            section=section,
            page=page,
            sequence=seq,
            char_start=cs,
            char_end=ce,
            span_type=SpanType(st) if st else None,
            metadata=json.loads(meta),
            content_hash=ch,
        )

    def _chunks_of(self, document_id: str) -> list[Chunk]:
        rows = self._db.execute(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE document_id = ? ORDER BY rowid", (document_id,)
        )
        return [self._row_to_chunk(r) for r in rows]

    # --- chunk cache ---------------------------------------------------------------------
    # Turning rows into Chunks (SQL, JSON metadata) was ~60% of a warm retrieve's non-model time.
    # A rowid's chunk is fixed within a write generation, so a bounded cache keyed by rowid is
    # exact for readers of that generation. A write of this process drops what it replaced and
    # moves the cache to its generation (`_after_write`); a write of another process drops the
    # rows its commits changed (`changed_since`), or empties the cache when the log cannot say.

    def _cache_at(self, gen: int, db: sqlite3.Connection) -> bool:
        """Move the cache to `gen` (the generation of snapshot `db`) if it is newer; True when
        the cache holds generation `gen` (a reader of an older snapshot neither reads nor fills it)."""
        with self._small:
            held = self._cache_gen
            if gen <= held:
                return gen == held
        changed = self.changed_since(db, held, gen) if self._by_rowid else []
        with self._small:
            if gen > self._cache_gen:
                if changed is None or self._cache_gen != held:
                    self._by_rowid.clear()
                    self._rowid_of.clear()
                else:
                    for rowid in changed:
                        old = self._by_rowid.pop(rowid, None)
                        if old is not None:
                            self._rowid_of.pop(old.chunk_id, None)
                self._cache_gen = gen
            return gen == self._cache_gen

    def _cache_put(self, rowid: int, chunk: Chunk) -> None:
        if len(self._by_rowid) >= CHUNK_CACHE_SIZE:
            old_rowid, old = next(iter(self._by_rowid.items()))  # oldest first (FIFO)
            del self._by_rowid[old_rowid]
            self._rowid_of.pop(old.chunk_id, None)
        self._by_rowid[rowid] = chunk
        self._rowid_of[chunk.chunk_id] = rowid

    def _cache_fill(self, gen: int, rows: Sequence[tuple[int, Chunk]]) -> None:
        with self._small:
            if gen == self._cache_gen:
                for rowid, chunk in rows:
                    self._cache_put(rowid, chunk)

    def chunks_by_rowid(self, rowids: Sequence[int]) -> dict[int, Chunk]:
        with self._snapshot() as db:
            gen = self.generation(db)
            cached = self._cache_at(gen, db)
            with self._small:
                out = {r: self._by_rowid[r] for r in rowids if cached and r in self._by_rowid}
            missing = [int(r) for r in rowids if r not in out]
            fresh: list[tuple[int, Chunk]] = []
            for row in select_in(db, f"SELECT {_CHUNK_COLS} FROM chunks WHERE rowid IN ({{marks}})", missing):
                chunk = self._row_to_chunk(row)
                out[row[0]] = chunk
                fresh.append((row[0], chunk))
        self._cache_fill(gen, fresh)
        return out

    def chunks_by_id(self, chunk_ids: Sequence[str]) -> dict[str, tuple[int, Chunk]]:
        with self._snapshot() as db:
            gen = self.generation(db)
            cached = self._cache_at(gen, db)
            out: dict[str, tuple[int, Chunk]] = {}
            missing: list[str] = []
            with self._small:
                for cid in chunk_ids:
                    rowid = self._rowid_of.get(cid) if cached else None
                    if rowid is None:
                        missing.append(cid)
                    else:
                        out[cid] = (rowid, self._by_rowid[rowid])
            fresh: list[tuple[int, Chunk]] = []
            for row in select_in(
                db, f"SELECT {_CHUNK_COLS} FROM chunks WHERE chunk_id IN ({{marks}})", missing
            ):
                chunk = self._row_to_chunk(row)
                out[row[1]] = (row[0], chunk)
                fresh.append((row[0], chunk))
        self._cache_fill(gen, fresh)
        return out

    def document_hash(self, document_id: str) -> str | None:
        with self._reading() as db:
            row = db.execute(
                "SELECT content_hash FROM documents WHERE document_id = ?", (document_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    def counts(self, db: sqlite3.Connection | None = None) -> tuple[int, int]:
        if db is None:
            with self._snapshot() as snap:
                return self.counts(snap)
        docs = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return int(docs), int(chunks)

    # --- filters --------------------------------------------------------------------------

    def filtered_rowids(self, filters: Filters | None, kind: ChunkKind | None) -> set[int] | None:
        """Row ids allowed by the filters, or None when nothing restricts (fast path)."""
        if not filters:
            return None
        # One parameter per key (its values as a JSON array) and one query per key, intersected
        # here: SQLite caps both variables (250,000) and expression depth (~1,000 terms), and the
        # API's limits (names.MAX_FILTER_*) should not be the only thing between a caller and a 500.
        allowed: set[int] | None = None
        for key, value in filters.items():
            cond, args = _filter_condition(key, value)
            if kind is not None:
                cond += " AND kind = ?"
                args.append(kind.value)
            # A reader's snapshot, never the writer's connection: a write in progress stays unseen.
            with self._reading() as db:
                rows = {int(r[0]) for r in db.execute(f"SELECT rowid FROM chunks WHERE {cond}", args)}
            allowed = rows if allowed is None else allowed & rows
            if not allowed:
                break
        return allowed if allowed is not None else set()

    def document_count(self, filters: Filters | None) -> int:
        """How many documents have a chunk within `filters` (any kind); with none, the index's
        documents (`describe`). One query: the keys' conditions joined by AND (a request's
        filters are a few keys, far from SQLite's expression depth)."""
        if not filters:
            return self.describe().documents
        conds: list[str] = []
        args: list[str] = []
        for key, value in filters.items():
            cond, cond_args = _filter_condition(key, value)
            conds.append(f"({cond})")
            args.extend(cond_args)
        with self._reading() as db:
            row = db.execute(
                f"SELECT COUNT(DISTINCT document_id) FROM chunks WHERE {' AND '.join(conds)}", args
            ).fetchone()
        return int(row[0])

    def allowed_rowids(self, filters: Filters | None, kind: ChunkKind | None) -> np.ndarray | None:
        """`filtered_rowids` as a sorted array, kept for the write generation: the same filter
        on every query (a document type, a tenant) costs one SQL query per write, not one per
        query (at 1M passages a 10% filter's rowids took ~150 ms to read)."""
        if not filters:
            return None
        key = (json.dumps(filters, sort_keys=True, default=str), kind.value if kind else "")
        gen = self.generation()
        with self._small:
            if self._allowed_gen != gen:
                self._allowed.clear()
                self._allowed_gen = gen
            found = self._allowed.pop(key, None)
            if found is not None:
                # Least recently used goes first: a filter on every query (a document type, a
                # tenant) must outlive the one-off document sets of the refusal's agreement,
                # else it is read again (~170 ms at 1M passages) every ALLOWED_CACHE_SIZE queries.
                self._allowed[key] = found
        if found is not None:
            return found
        rows = self.filtered_rowids(filters, kind) or set()
        arr = np.sort(np.fromiter(rows, dtype=np.int64, count=len(rows)))
        with self._small:
            if self._allowed_gen == gen:
                if len(self._allowed) >= ALLOWED_CACHE_SIZE:
                    self._allowed.pop(next(iter(self._allowed)))
                self._allowed[key] = arr
        return arr

    def lookup(self, filters: Filters, limit: int, kind: ChunkKind | None) -> list[SearchHit]:
        allowed = self.filtered_rowids(filters, kind)
        if allowed is None:
            with self._reading() as db:
                rows = [r[0] for r in db.execute("SELECT rowid FROM chunks ORDER BY rowid")]
        else:
            rows = sorted(allowed)
        chunks = self.chunks_by_rowid(rows)
        out = [chunks[r] for r in rows if r in chunks and (kind is None or chunks[r].kind is kind)]
        return [SearchHit(chunk=c, score=0.0) for c in out[:limit]]

    def ordered_lookup(self, filters: Filters, limit: int, kind: ChunkKind | None) -> list[OrderedChunks]:
        """`lookup(filters, limit, kind)`'s chunks by document, each in document order
        (`base.ordered_lookup`). With a `document_id` filter, each document's chunks of `kind` are
        read once per write generation and kept (`_document_ordered`), and the other filter keys
        (a tenant's) are the rowids `allowed_rowids` keeps: what a question pays is a few array
        operations, not reading, decoding and sorting every chunk of its documents. The chunks
        are those `lookup` returns: the rows every key allows (each key's rows intersected, as
        `filtered_rowids` does), the first `limit` of them by rowid."""
        if not filters or "document_id" not in filters:
            return group_ordered([h.chunk for h in self.lookup(filters, limit, kind)])
        documents = sorted({filter_value(v) for v in filter_values(filters["document_id"])})
        rest = {k: v for k, v in filters.items() if k != "document_id"}
        allowed = self.allowed_rowids(rest, kind) if rest else None
        read = [self._document_ordered(d, kind) for d in documents]
        kept: list[tuple[OrderedChunks, np.ndarray, np.ndarray | None]] = []
        for doc, rowids in (r for r in read if r is not None):
            keep = None if allowed is None else np.isin(rowids, allowed)
            kept.append((doc, rowids, keep))
        total = sum(len(r) if k is None else int(k.sum()) for _, r, k in kept)
        cutoff = None
        if total > limit:
            every = np.concatenate([r if k is None else r[k] for _, r, k in kept])
            cutoff = np.partition(every, limit - 1)[limit - 1] if limit > 0 else -1
        out: list[OrderedChunks] = []
        for doc, rowids, allowed_here in kept:
            keep = allowed_here
            if cutoff is not None:
                keep = (rowids <= cutoff) if keep is None else (keep & (rowids <= cutoff))
            if keep is None or keep.all():
                out.append(doc)
            elif keep.any():
                out.append(
                    ordered_chunks(
                        doc.document_id,
                        [c for c, k in zip(doc.chunks, keep, strict=True) if k],
                        doc.content_hash,
                    )
                )
        return out

    def _document_ordered(
        self, document_id: str, kind: ChunkKind | None
    ) -> tuple[OrderedChunks, np.ndarray] | None:
        """One document's chunks of `kind` in document order and their rowids (None: it has
        none), with the document's content hash, kept per write generation (read in one
        snapshot, kept only when that snapshot is the newest generation seen)."""
        key = (document_id, kind.value if kind else "")
        with self._snapshot() as db:
            gen = self.generation(db)
            with self._small:
                if gen > self._ordered_gen:
                    self._ordered.clear()
                    self._ordered_size = 0
                    self._ordered_gen = gen
                found = self._ordered.pop(key, None) if gen == self._ordered_gen else None
                if found is not None:
                    self._ordered[key] = found  # most recently used last
                    return found
            cond, args = "document_id = ?", [document_id]
            if kind is not None:
                cond += " AND kind = ?"
                args.append(kind.value)
            rows = db.execute(
                f"SELECT {_CHUNK_COLS} FROM chunks WHERE {cond} ORDER BY rowid", args
            ).fetchall()
            hashed = db.execute(
                "SELECT content_hash FROM documents WHERE document_id = ?", (document_id,)
            ).fetchone()
        if not rows:
            return None
        chunks = [self._row_to_chunk(r) for r in rows]
        rowid_of = {id(c): int(r[0]) for c, r in zip(chunks, rows, strict=True)}
        doc = ordered_chunks(document_id, chunks, str(hashed[0]) if hashed else "")
        rowids = np.fromiter((rowid_of[id(c)] for c in doc.chunks), dtype=np.int64, count=len(chunks))
        if len(chunks) <= ORDERED_CACHE_CHUNKS:
            with self._small:
                if gen == self._ordered_gen and key not in self._ordered:
                    while self._ordered and self._ordered_size + len(chunks) > ORDERED_CACHE_CHUNKS:
                        old_doc, _ = self._ordered.pop(next(iter(self._ordered)))
                        self._ordered_size -= len(old_doc.chunks)
                    self._ordered[key] = (doc, rowids)
                    self._ordered_size += len(chunks)
        return doc, rowids

    # --- whole-index reads ----------------------------------------------------------------

    def document_infos(self) -> list[DocumentInfo]:
        """Every document's id, source and chunk counts, by id (`evidence list --index`)."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT document_id, source, passages, spans FROM documents ORDER BY document_id"
            ).fetchall()
        return [DocumentInfo(str(d), str(s), int(p), int(n)) for d, s, p, n in rows]
