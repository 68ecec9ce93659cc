"""The embedded backend's storage engine: one index = one SQLite file + tantivy directories.

Layout per index (`<store>/indexes/<name>/`):
- `records.sqlite3`: documents, chunks (text, metadata, vectors as float32 blobs),
  a `doc_meta` table for filters (a chunk's metadata is its document's), and
  `lexical_pending`, the journal that keeps the inverted index consistent with the records.
- `lexical/<kind>/`: a tantivy index per chunk kind over the pre-analysed text (see
  `analysis.py`), so BM25 is Lucene's formula over OpenSearch's `english` analysis.

Crash safety: SQLite is the source of truth. An upsert (1) commits records and a
`lexical_pending` row per document in one transaction, (2) updates and commits
tantivy, (3) clears the pending rows. A process killed anywhere leaves either
the old or the new records, and any document still pending is re-synced into
tantivy (delete by document, re-add from SQLite) the next time the index is
opened for writing; tantivy commits are atomic, so re-syncing is idempotent.
`IndexStore.consistency()` checks exactly that.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evidence.errors import BackendError, EmbedderMismatchError
from evidence.records import Chunk, ChunkKind, DocumentChunks, SearchHit, SpanType
from evidence.search.analysis import AnalyzerConfig, EnglishAnalyzer, get_analyzer
from evidence.search.ann import REBUILD_SHARE, AnnConfig, AnnIndex, crc_of
from evidence.search.ann import available as ann_available
from evidence.search.base import DocumentInfo, Filters, IndexInfo, UpsertResult, Vector

if TYPE_CHECKING:
    import tantivy

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
"""

_CHUNK_COLS = (
    "rowid, chunk_id, document_id, kind, text, title, source, section, page, sequence, "
    "char_start, char_end, span_type, metadata, content_hash"
)
#: Built-in fields that filters may name besides metadata keys.
BUILTIN_FILTER_FIELDS = ("chunk_id", "document_id", "kind", "span_type", "section")
_WRITER_HEAP = 64_000_000
#: How metadata pairs become lexical terms (`meta_term`); a store without it is re-synced once.
_META_TERMS = "escaped-key"
#: Chunks kept decoded in memory per open index (~1-2 kB each).
CHUNK_CACHE_SIZE = 50_000
#: Filters whose allowed rowids are kept per index (each up to 8 bytes per matching chunk).
ALLOWED_CACHE_SIZE = 16
#: Past the ANN threshold, a filter allowing at most this many chunks is searched exactly.
EXACT_FILTERED_MAX = 4096


def filter_value(value: object) -> str:
    """One string form for filter terms, shared by the lexical and record sides."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


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


def _meta_terms(chunk: Chunk) -> list[tuple[str, str]]:
    terms = [
        ("document_id", chunk.document_id),
        ("kind", chunk.kind.value),
        ("section", chunk.section),
    ]
    if chunk.span_type is not None:
        terms.append(("span_type", chunk.span_type.value))
    terms.extend(_metadata_terms(chunk.metadata))
    return terms


def _vector_blob(vec: Vector | None) -> bytes | None:
    """A row of NaN means "no vector for this chunk" (spans are not embedded)."""
    if vec is None:
        return None
    arr = np.asarray(vec, dtype=np.float32)
    return None if np.isnan(arr).any() else arr.tobytes()


@dataclass(frozen=True)
class Consistency:
    """What `IndexStore.consistency` found: consistent when every record is in its inverted
    index once, no chunk lacks its document and the journal is empty."""

    documents: int
    records: dict[ChunkKind, int]
    lexical: dict[ChunkKind, int]
    orphan_chunks: int
    pending: int

    @property
    def ok(self) -> bool:
        return self.records == self.lexical and self.orphan_chunks == 0 and self.pending == 0


@dataclass
class _DenseCache:
    generation: int
    rowids: np.ndarray  # int64
    kinds: np.ndarray  # bool: True = passage
    matrix: np.ndarray  # (n, dim) float32


class IndexStore:
    """One index: a SQLite file and a tantivy directory per chunk kind."""

    def __init__(
        self, root: Path, analyzer: EnglishAnalyzer, k1: float, b: float, ann: AnnConfig | None = None
    ) -> None:
        self.root = root
        #: Above `ann.min_vectors` vectors the dense leg is approximate (`ann.py`); None = always exact.
        self.ann_config = ann
        self._ann: AnnIndex | None = None
        #: Searches and in-place updates of `_ann` take turns (faiss indexes are not thread-safe).
        self._ann_lock = threading.Lock()
        self._vector_count: tuple[int, int] = (-1, 0)  # (generation, vectors)
        self._count_lock = threading.Lock()
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
        self._dense_lock = threading.Lock()  # one thread rebuilds the dense matrix, others wait for it
        # Another process (a second `evidence index`, the server) may hold the write lock for a
        # batch: wait for it rather than fail.
        self._db = sqlite3.connect(
            root / "records.sqlite3", check_same_thread=False, isolation_level=None, timeout=60
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._tantivy: dict[ChunkKind, tantivy.Index] = {}
        self._dense: _DenseCache | None = None
        self._synced = False
        self._cache_gen = -1
        #: The lexical generation the tantivy readers last reloaded at (other processes write too).
        self._lexical_gen = -1
        self._by_rowid: dict[int, Chunk] = {}
        self._rowid_of: dict[str, int] = {}
        #: While True (inside `EmbeddedBackend.bulk`), lexical sync waits for the bulk's end:
        #: one tantivy commit instead of one per batch. The journal keeps this crash-safe.
        self.deferred = False

    @classmethod
    def open(
        cls, root: Path, analyzer: AnalyzerConfig, *, k1: float, b: float, ann: AnnConfig | None = None
    ) -> IndexStore:
        """Open (or create) the index under `root`. A new index records `analyzer`; an existing
        one keeps the analysis it was built with, so its queries are analysed as its documents were."""
        try:
            store = cls(root, get_analyzer(analyzer), k1, b, ann)
            recorded = store.info("analyzer")
            if recorded is None:
                store.set_info("analyzer", analyzer.name)
            elif recorded != analyzer.name:
                store.analyzer = get_analyzer(AnalyzerConfig.from_name(recorded))
            if store.info("meta_terms") != _META_TERMS:
                # Written before keys were escaped: documents with "=" or "\\" in a metadata key
                # get their lexical terms again (the records are the truth; see sync_pending).
                store._db.execute(
                    "INSERT OR IGNORE INTO lexical_pending SELECT DISTINCT document_id FROM doc_meta "
                    "WHERE instr(key, '=') > 0 OR instr(key, '\\') > 0"
                )
                store.set_info("meta_terms", _META_TERMS)
        except sqlite3.DatabaseError as exc:
            raise BackendError(f"index {root.name!r} store is unreadable: {exc}") from exc
        return store

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

    def ensure_embedder(self, embedder_id: str, dimension: int) -> None:
        """Record the embedder of a new index; refuse another one on an existing index."""
        with self._lock:
            current = self.info("embedder_id", self._db)
            if current is None:
                self.set_info("embedder_id", embedder_id)
                self.set_info("dimension", str(dimension))
            elif current != embedder_id or int(self.info("dimension", self._db) or 0) != dimension:
                raise EmbedderMismatchError(
                    f"index {self.root.name!r} was built with embedder {current} "
                    f"({self.info('dimension')} dims), not {embedder_id} ({dimension} dims); "
                    "use the same embedder or index into a new index",
                    field="index",
                )

    def describe(self) -> IndexInfo:
        with self._snapshot() as db:
            docs, chunks = self.counts(db)
            return IndexInfo(
                name=self.root.name,
                embedder_id=self.info("embedder_id", db) or "",
                dimension=int(self.info("dimension", db) or 0),
                documents=docs,
                chunks=chunks,
            )

    # --- tantivy --------------------------------------------------------------------------

    def _open_lexical(self, kind: ChunkKind) -> tantivy.Index:
        """One tantivy index per chunk kind: tantivy computes N and the average length over
        every document of an index, so passages and spans sharing one would skew BM25."""
        found = self._tantivy.get(kind)
        if found is not None:
            return found
        with self._lock:  # opening (and perhaps rebuilding) an inverted index is a write
            return self._tantivy.get(kind) or self._create_lexical(kind)

    def _create_lexical(self, kind: ChunkKind) -> tantivy.Index:
        import tantivy

        path = self.root / "lexical" / kind.value
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
        sb.add_text_field("document_id", stored=False, tokenizer_name="raw")
        sb.add_text_field("meta", stored=False, tokenizer_name="raw")
        sb.add_text_field("body", stored=False, tokenizer_name="ws", index_option="freq")
        schema = sb.build()
        fresh = not (path / "meta.json").exists()
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        try:
            index = tantivy.Index(schema, path=str(path), reuse=True)
        except ValueError:
            # An unreadable inverted index is derived data: rebuild it from the records.
            shutil.rmtree(path)
            path.mkdir()
            index = tantivy.Index(schema, path=str(path), reuse=True)
            fresh = True
        index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        self._tantivy[kind] = index
        if fresh:
            # Everything in the records must be (re)indexed lexically.
            self._db.execute("INSERT OR IGNORE INTO lexical_pending SELECT document_id FROM documents")
        return index

    def _tantivy_doc(self, chunk: Chunk) -> tantivy.Document:
        import tantivy

        doc = tantivy.Document()
        doc.add_text("chunk_id", chunk.chunk_id)
        doc.add_text("document_id", chunk.document_id)
        for key, value in _meta_terms(chunk):
            doc.add_text("meta", meta_term(key, value))
        doc.add_text("body", " ".join(self.analyzer.analyze(chunk.search_text)))
        return doc

    @contextmanager
    def _process_lock(self) -> Iterator[None]:
        """Tantivy allows one IndexWriter per directory across processes (a second one fails
        with LockBusy): writers from other processes (`evidence index` beside `evidence serve`)
        take turns on this advisory lock instead."""
        import fcntl

        with (self.root / "write.lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def sync_pending(self) -> int:
        """Bring tantivy in line with the records for every journalled document."""
        with self._lock:
            indexes = {kind: self._open_lexical(kind) for kind in ChunkKind}
            pending = [r[0] for r in self._db.execute("SELECT document_id FROM lexical_pending")]
            if pending:
                with self._process_lock():
                    # Read again under the lock: another process may have synced them meanwhile.
                    pending = [r[0] for r in self._db.execute("SELECT document_id FROM lexical_pending")]
                    self._write_lexical(indexes, pending)
            self._reload(indexes)
            self._synced = True
            return len(pending)

    def _write_lexical(self, indexes: Mapping[ChunkKind, tantivy.Index], pending: list[str]) -> None:
        if not pending:
            return
        writers = {k: ix.writer(heap_size=_WRITER_HEAP, num_threads=1) for k, ix in indexes.items()}
        for doc_id in pending:
            for writer in writers.values():
                writer.delete_documents_by_term("document_id", doc_id)
            for chunk in self._chunks_of(doc_id):
                writers[chunk.kind].add_document(self._tantivy_doc(chunk))
        for writer in writers.values():
            writer.commit()
            writer.wait_merging_threads()
        del writers  # tantivy's own directory lock goes with the writers, before our lock
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("DELETE FROM lexical_pending WHERE document_id = ?", [(d,) for d in pending])
            # Readers in other processes reload their searchers when this moves (the records'
            # generation moved before tantivy had these documents). A counter of its own: the
            # record caches keyed by `generation` stay valid.
            self.set_info("lexical_generation", str(self._lexical_generation(db) + 1))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _lexical_generation(self, db: sqlite3.Connection | None = None) -> int:
        return int(self.info("lexical_generation", db) or 0)

    def _reload(self, indexes: Mapping[ChunkKind, tantivy.Index] | None = None) -> None:
        gen = self._lexical_generation()
        for ix in (indexes or {k: self._open_lexical(k) for k in ChunkKind}).values():
            ix.reload()
        self._lexical_gen = gen

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
    # moves the cache to its generation (`_after_write`); a write of another process empties it.

    def _cache_at(self, gen: int) -> bool:
        """Move the cache to `gen` if it is newer; True when the cache holds generation `gen`
        (a reader of an older snapshot neither reads nor fills it)."""
        with self._small:
            if gen > self._cache_gen:
                self._by_rowid.clear()
                self._rowid_of.clear()
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
            cached = self._cache_at(gen)
            with self._small:
                out = {r: self._by_rowid[r] for r in rowids if cached and r in self._by_rowid}
            missing = [int(r) for r in rowids if r not in out]
            fresh: list[tuple[int, Chunk]] = []
            for start in range(0, len(missing), 900):
                part = missing[start : start + 900]
                marks = ",".join("?" * len(part))
                for row in db.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE rowid IN ({marks})", part):
                    chunk = self._row_to_chunk(row)
                    out[row[0]] = chunk
                    fresh.append((row[0], chunk))
        self._cache_fill(gen, fresh)
        return out

    def chunks_by_id(self, chunk_ids: Sequence[str]) -> dict[str, tuple[int, Chunk]]:
        with self._snapshot() as db:
            gen = self.generation(db)
            cached = self._cache_at(gen)
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
            for start in range(0, len(missing), 900):
                part = missing[start : start + 900]
                marks = ",".join("?" * len(part))
                for row in db.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE chunk_id IN ({marks})", part):
                    chunk = self._row_to_chunk(row)
                    out[row[1]] = (row[0], chunk)
                    fresh.append((row[0], chunk))
        self._cache_fill(gen, fresh)
        return out

    def _after_write(
        self, before: int, after: int, removed: list[int], added: list[tuple[int, str, bytes]]
    ) -> None:
        """Carry the caches of generation `before` to `after` (this process's own write): drop
        the rows it removed, add the vectors it inserted (rowid, kind, float32 blob). Without
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
        keep = ~np.isin(cache.rowids, np.asarray(removed, dtype=np.int64)) if removed else None
        rowids, kinds, matrix = cache.rowids, cache.kinds, cache.matrix
        if keep is not None:
            rowids, kinds, matrix = rowids[keep], kinds[keep], matrix[keep]
        if added:
            dim = len(added[0][2]) // 4
            if matrix.shape[1] not in (0, dim):
                self._dense = None
                return
            new = np.frombuffer(b"".join(v for _, _, v in added), dtype=np.float32).reshape(len(added), dim)
            rowids = np.concatenate([rowids, np.asarray([r for r, _, _ in added], dtype=np.int64)])
            kinds = np.concatenate([kinds, np.asarray([k == "passage" for _, k, _ in added], dtype=bool)])
            matrix = np.concatenate(
                [matrix.reshape(len(matrix), -1) if len(matrix) else matrix.reshape(0, dim), new]
            )
        self._dense = _DenseCache(after, rowids, kinds, matrix)
        self._vector_count = (after, len(rowids))

    def _publish(self, before: int, removed: list[int], added: list[tuple[int, str, bytes]]) -> None:
        """COMMIT this process's write and carry the caches to it, as one step for readers: a
        reader that sees the new generation before the caches do waits on `_dense_lock` for
        them. Patched after the commit, outside the lock, a reader in between found a stale
        matrix and rebuilt it from the records, every vector read again, while the others
        queued behind the rebuild (a race, rare in the profiles: RELIABILITY.md, "Load")."""
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
            ann.remove(np.asarray(removed, dtype=np.int64))
            if added:
                dim = len(added[0][2]) // 4
                matrix = np.frombuffer(b"".join(v for _, _, v in added), dtype=np.float32).reshape(
                    len(added), dim
                )
                ann.add(
                    np.asarray([r for r, _, _ in added], dtype=np.int64),
                    np.asarray([crc_of(v) for _, _, v in added], dtype=np.uint32),
                    np.asarray([k == "passage" for _, k, _ in added], dtype=bool),
                    matrix,
                )
            ann.generation = after

    def upsert(
        self, documents: Sequence[DocumentChunks], vectors: Sequence[Vector | None]
    ) -> list[UpsertResult]:
        results: list[UpsertResult] = []
        with self._lock:
            if not self._synced:
                self.sync_pending()
            db = self._db
            changed: list[str] = []
            removed: list[int] = []
            added: list[tuple[int, str, bytes]] = []
            db.execute("BEGIN IMMEDIATE")
            try:
                before = self.generation(db)
                for doc, vecs in zip(documents, vectors, strict=True):
                    n_pass = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
                    n_span = len(doc.chunks) - n_pass
                    row = db.execute(
                        "SELECT content_hash FROM documents WHERE document_id = ?", (doc.document_id,)
                    ).fetchone()
                    if row is not None and row[0] == doc.content_hash:
                        results.append(UpsertResult(doc.document_id, "unchanged", n_pass, n_span))
                        continue
                    if vecs is not None and len(vecs) != len(doc.chunks):
                        raise BackendError(
                            f"{doc.document_id}: {len(vecs)} vectors for {len(doc.chunks)} chunks"
                        )
                    self._delete_rows(doc.document_id, removed)
                    db.executemany(
                        "INSERT INTO doc_meta VALUES (?, ?, ?)",
                        [(doc.document_id, k, v) for k, v in _metadata_terms(doc.metadata)],
                    )
                    db.execute(
                        "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            doc.document_id,
                            doc.content_hash,
                            doc.source,
                            json.dumps(dict(doc.metadata)),
                            n_pass,
                            n_span,
                        ),
                    )
                    for i, c in enumerate(doc.chunks):
                        blob = _vector_blob(None if vecs is None else vecs[i])
                        cursor = db.execute(
                            "INSERT INTO chunks (chunk_id, document_id, kind, text, title, source, section,"
                            " page, sequence, char_start, char_end, span_type, metadata, content_hash,"
                            " vector)"
                            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (
                                c.chunk_id,
                                c.document_id,
                                c.kind.value,
                                c.text,
                                c.title,
                                c.source,
                                c.section,
                                c.page,
                                c.sequence,
                                c.char_start,
                                c.char_end,
                                c.span_type.value if c.span_type else None,
                                json.dumps(dict(c.metadata)),
                                c.content_hash,
                                blob,
                            ),
                        )
                        if blob is not None and cursor.lastrowid is not None:
                            added.append((cursor.lastrowid, c.kind.value, blob))
                    db.execute("INSERT OR IGNORE INTO lexical_pending VALUES (?)", (doc.document_id,))
                    changed.append(doc.document_id)
                    status = "created" if row is None else "updated"
                    results.append(UpsertResult(doc.document_id, status, n_pass, n_span))
                if changed:
                    self.set_info("generation", str(before + 1))
                    self._publish(before, removed, added)
                else:
                    db.execute("COMMIT")
            except BaseException:
                # SQLite rolls back by itself on some errors (SQLITE_FULL): a second ROLLBACK
                # would raise and hide the cause.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if changed and not self.deferred:
                self.sync_pending()
        return results

    def _delete_rows(self, document_id: str, removed: list[int]) -> int:
        db = self._db
        removed.extend(
            int(r[0]) for r in db.execute("SELECT rowid FROM chunks WHERE document_id = ?", (document_id,))
        )
        db.execute("DELETE FROM doc_meta WHERE document_id = ?", (document_id,))
        n = db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,)).rowcount
        db.execute("DELETE FROM documents WHERE document_id = ?", (document_id,))
        return int(n)

    def delete_document(self, document_id: str) -> int:
        with self._lock:
            if not self._synced:
                self.sync_pending()
            db = self._db
            removed: list[int] = []
            db.execute("BEGIN IMMEDIATE")
            try:
                before = self.generation(db)
                n = self._delete_rows(document_id, removed)
                if n:
                    db.execute("INSERT OR IGNORE INTO lexical_pending VALUES (?)", (document_id,))
                    self.set_info("generation", str(before + 1))
                    self._publish(before, removed, [])
                else:
                    db.execute("COMMIT")
            except BaseException:
                # SQLite rolls back by itself on some errors (SQLITE_FULL): a second ROLLBACK
                # would raise and hide the cause.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if n:
                self.sync_pending()
            return n

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
            values = (
                [filter_value(v) for v in value] if isinstance(value, list | tuple) else [filter_value(value)]
            )
            args: list[str] = [json.dumps(values)]
            if key in BUILTIN_FILTER_FIELDS:
                cond = f"{key} IN (SELECT value FROM json_each(?))"
            else:
                cond = (
                    "document_id IN (SELECT document_id FROM doc_meta WHERE key = ? "
                    "AND value IN (SELECT value FROM json_each(?)))"
                )
                args.insert(0, key)
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
            found = self._allowed.get(key)
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

    # --- search ---------------------------------------------------------------------------

    def lexical(self, text: str, k: int, filters: Filters | None, kind: ChunkKind | None) -> list[SearchHit]:
        terms = self.analyzer.analyze(text)
        if not terms:
            return []
        scored: list[tuple[float, str]] = []
        if not self._synced:
            self.sync_pending()
        elif self._lexical_generation() != self._lexical_gen:
            self._reload()  # another process wrote: see its commits
        for kd in [kind] if kind is not None else list(ChunkKind):
            scored.extend(self._search_kind(kd, terms, k, filters))
        found = self.chunks_by_id([cid for _, cid in scored])
        hits = [
            SearchHit(chunk=found[cid][1], score=score, lexical=score)
            for score, cid in scored
            if cid in found
        ]
        # Tantivy breaks ties by doc address; make order independent of segment layout.
        hits.sort(key=lambda h: (-h.score, h.chunk.chunk_id))
        return hits[:k]

    def _search_kind(
        self, kind: ChunkKind, terms: list[str], k: int, filters: Filters | None
    ) -> list[tuple[float, str]]:
        import tantivy

        index = self._open_lexical(kind)
        schema = index.schema
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in terms]
        )
        if filters:
            musts = [(tantivy.Occur.Must, query)]
            for key, value in filters.items():
                vals = list(value) if isinstance(value, list | tuple) else [value]
                if key == "chunk_id":  # its own raw field: restricting to known chunks (score completion)
                    tq = tantivy.Query.term_set_query(schema, "chunk_id", [str(v) for v in vals])
                else:
                    terms = [meta_term(key, filter_value(v)) for v in vals]
                    tq = tantivy.Query.term_set_query(schema, "meta", terms)
                # Zero-weight filter: restricts the set without touching BM25 scores.
                musts.append((tantivy.Occur.Must, tantivy.Query.const_score_query(tq, 0.0)))
            query = tantivy.Query.boolean_query(musts)
        searcher = index.searcher()
        result = searcher.search(query, k)
        scale = 1.0 + self.k1
        return [(float(score) / scale, searcher.doc(addr)["chunk_id"][0]) for score, addr in result.hits]

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
            cache = self._load_dense()
            self._dense = cache
            return cache

    def _load_dense(self) -> _DenseCache:
        # Every write (from any process) lands here on the next dense query. Holding the old
        # matrix, every row's blob and their join at once tripled the peak, and the tens of
        # thousands of small blobs fragmented the allocator: RSS grew under sustained writes
        # (RELIABILITY.md, "Load"). One snapshot, one preallocated matrix filled in slices.
        self._dense = None
        with self._snapshot() as db:  # the count and the rows agree
            gen = self.generation(db)
            n, dim = db.execute(
                "SELECT COUNT(*), MAX(LENGTH(vector)) / 4 FROM chunks WHERE vector IS NOT NULL"
            ).fetchone()
            rowids = np.empty(n, dtype=np.int64)
            kinds = np.empty(n, dtype=bool)
            matrix = np.empty((n, dim or 0), dtype=np.float32)
            cursor = db.execute(
                "SELECT rowid, kind, vector FROM chunks WHERE vector IS NOT NULL ORDER BY rowid"
            )
            at = 0
            while rows := cursor.fetchmany(2048):
                end = at + len(rows)
                rowids[at:end] = [r[0] for r in rows]
                kinds[at:end] = [r[1] == "passage" for r in rows]
                matrix[at:end] = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(
                    len(rows), -1
                )
                at = end
        return _DenseCache(gen, rowids, kinds, matrix)

    # --- approximate dense search (ann.py) ------------------------------------------------

    @property
    def _ann_path(self) -> Path:
        return self.root / "ann.npz"

    def vectors_count(self) -> int:
        """Vectors as last committed, cached per generation: the COUNT scans every record, and
        with every reader that saw a write counting at once it was a quarter of a retrieve's time
        under mixed load. Own writes carry it (`_after_write`); one reader counts for the others."""
        with self._snapshot() as db:
            gen = self.generation(db)
            if self._vector_count[0] == gen:
                return self._vector_count[1]
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

    @staticmethod
    def _vectors_of(db: sqlite3.Connection, rowids: np.ndarray) -> np.ndarray:
        """The vectors of `rowids` (sorted), as a float32 matrix, read in slices."""
        out: np.ndarray | None = None
        for start in range(0, len(rowids), 4096):
            part = [int(r) for r in rowids[start : start + 4096]]
            rows = db.execute(
                "SELECT vector FROM chunks WHERE rowid IN (SELECT value FROM json_each(?)) ORDER BY rowid",
                (json.dumps(part),),
            ).fetchall()
            block = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1)
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
            allowed: np.ndarray | None = None
            if wanted is not None:
                pos = np.minimum(np.searchsorted(ann.ids, wanted), max(ann.size - 1, 0))
                allowed = wanted[ann.ids[pos] == wanted] if ann.size else wanted[:0]
            elif kind is not None:
                match = ann.passage if kind is ChunkKind.PASSAGE else ~ann.passage
                if not match.all():
                    allowed = ann.ids[match]
            return ann.search(q, k, allowed, self.ann_config.probe_fraction)

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

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        with self._snapshot() as db:
            for start in range(0, len(chunk_ids), 900):
                part = list(chunk_ids[start : start + 900])
                marks = ",".join("?" * len(part))
                for cid, blob in db.execute(
                    f"SELECT chunk_id, vector FROM chunks WHERE chunk_id IN ({marks}) AND vector IS NOT NULL",
                    part,
                ):
                    out[cid] = np.frombuffer(blob, dtype=np.float32)
        return out

    # --- whole-index reads ----------------------------------------------------------------

    def document_infos(self) -> list[DocumentInfo]:
        """Every document's id, source and chunk counts, by id (`evidence list --index`)."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT document_id, source, passages, spans FROM documents ORDER BY document_id"
            ).fetchall()
        return [DocumentInfo(str(d), str(s), int(p), int(n)) for d, s, p, n in rows]

    def documents(self) -> Iterator[tuple[DocumentChunks, Vector | None]]:
        """Every document with its chunks and their vectors (None unless every chunk has one),
        in document id order: what a migration to another backend copies."""
        doc_rows = self._db.execute(
            "SELECT document_id, content_hash, source, metadata FROM documents ORDER BY document_id"
        ).fetchall()
        for did, chash, source, meta in doc_rows:
            rows = self._db.execute(
                f"SELECT {_CHUNK_COLS}, vector FROM chunks WHERE document_id = ? ORDER BY rowid", (did,)
            ).fetchall()
            chunks = tuple(self._row_to_chunk(r[:-1]) for r in rows)
            blobs = [r[-1] for r in rows]
            vecs = (
                np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])
                if blobs and all(b is not None for b in blobs)
                else None
            )
            yield DocumentChunks(did, chash, source, chunks, json.loads(meta)), vecs

    def consistency(self) -> Consistency:
        """Records against the inverted indexes, as they are on disk now (no journal replay)."""
        with self._lock:
            db = self._db
            records = {
                kind: int(
                    db.execute("SELECT COUNT(*) FROM chunks WHERE kind = ?", (kind.value,)).fetchone()[0]
                )
                for kind in ChunkKind
            }
            lexical = {}
            for kind in ChunkKind:
                index = self._open_lexical(kind)
                index.reload()
                lexical[kind] = int(index.searcher().num_docs)
            orphans = db.execute(
                "SELECT COUNT(*) FROM chunks WHERE document_id NOT IN (SELECT document_id FROM documents)"
            ).fetchone()[0]
            return Consistency(
                documents=int(db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]),
                records=records,
                lexical=lexical,
                orphan_chunks=int(orphans),
                pending=int(db.execute("SELECT COUNT(*) FROM lexical_pending").fetchone()[0]),
            )

    def close(self) -> None:
        with self._lock:
            with self._ann_lock:
                ann = self._ann
                if ann is not None and ann.dirty:
                    ann.save(self._ann_path)  # a crash before this is reconciled on next use
            self._db.close()
            with self._small:
                self._closed = True
                idle, self._readers = self._readers, []
            for reader in idle:  # a reader in use is closed by its thread when it is done
                reader.close()
            self._tantivy.clear()
