"""The embedded backend's storage engine: one index = one SQLite file + tantivy directories.

Layout per index (`<store>/indexes/<name>/`):
- `records.sqlite3`: documents, chunks (text, metadata, vectors as float16 blobs),
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

One class, four modules by responsibility: `store_records.py` (schema, reader snapshots, chunks
and their cache, filters: the base), `store_lexical.py` (tantivy and the journal replay),
`store_dense.py` (exact cosine and the ANN index) and this one (`IndexStore`: opening, writes,
whole-index reads, the consistency check).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from evidence.errors import BackendError
from evidence.records import ChunkKind, DocumentChunks
from evidence.search import initialisms
from evidence.search.analysis import AnalyzerConfig, EnglishAnalyzer, get_analyzer
from evidence.search.ann import AnnConfig
from evidence.search.base import UpsertResult, Vector
from evidence.search.group_commit import GroupCommit
from evidence.search.store_dense import VECTOR_FORMAT, DenseStore, decode_vectors

# Re-exported: a test patches `_vector_blob` here, where `upsert` reads it.
from evidence.search.store_dense import _vector_blob as _vector_blob  # noqa: PLC0414
from evidence.search.store_lexical import LexicalStore
from evidence.search.store_records import _CHUNK_COLS, _metadata_terms
from evidence.sqlite_wal import immediate

#: How metadata pairs become lexical terms (`meta_term`); a store without it is re-synced once.
_META_TERMS = "escaped-key"


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


@dataclass(frozen=True)
class _Upsert:
    documents: tuple[DocumentChunks, ...]
    vectors: tuple[Vector | None, ...]


@dataclass(frozen=True)
class _Delete:
    document_id: str


_Write = _Upsert | _Delete


class IndexStore(LexicalStore, DenseStore):
    """One index: a SQLite file and a tantivy directory per chunk kind."""

    def __init__(
        self, root: Path, analyzer: EnglishAnalyzer, k1: float, b: float, ann: AnnConfig | None = None
    ) -> None:
        super().__init__(root, analyzer, k1, b, ann)
        #: Concurrent upserts and deletes, committed together (`_commit_group`).
        self._group: GroupCommit[_Write, list[UpsertResult] | int] = GroupCommit(self._commit_group)
        #: (generation, table) of `initialisms`, rebuilt when a commit changed the index.
        self._initialisms: tuple[int, initialisms.Table] = (-1, {})
        #: What this process writes documents with (`search.written`), recorded in `info` by a
        #: commit whose upserts changed a document; set by `EmbeddedBackend` (None: not recorded).
        self.written_with: str | None = None
        #: Called inside a write's transaction, under SQLite's write lock, with the index's record
        #: as committed then (JSON, None when it has none), its dimension and whether it holds a
        #: sectioned chunk then (`has_sections`, asked only when a header rule differs); raises to
        #: refuse the write (`EmbeddedBackend._refuse_record`). Set by `EmbeddedBackend`; None: no check.
        self.settings_check: Callable[[str | None, int, Callable[[], bool]], None] | None = None

    @classmethod
    def open(
        cls, root: Path, analyzer: AnalyzerConfig, *, k1: float, b: float, ann: AnnConfig | None = None
    ) -> IndexStore:
        """Open (or create) the index under `root`. A new index records `analyzer`; an existing
        one keeps the analysis it was built with, so its queries are analysed as its documents were."""
        try:
            store = cls(root, get_analyzer(analyzer), k1, b, ann)
            recorded = store.info("analyzer") or store._record_analyzer(analyzer.name)
            if recorded != analyzer.name:
                store.analyzer = get_analyzer(AnalyzerConfig.from_name(recorded))
            if store.info("meta_terms") != _META_TERMS:
                # Written before keys were escaped: documents with "=" or "\\" in a metadata key
                # get their lexical terms again (the records are the truth; see sync_pending).
                store._db.execute(
                    "INSERT OR IGNORE INTO lexical_pending SELECT DISTINCT document_id FROM doc_meta "
                    "WHERE instr(key, '=') > 0 OR instr(key, '\\') > 0"
                )
                store.set_info("meta_terms", _META_TERMS)
            if store.info("vector_format") != VECTOR_FORMAT:
                # Written before vectors were float16 (or new): converted in place, once.
                store.convert_vectors()
        except sqlite3.DatabaseError as exc:
            raise BackendError(f"index {root.name!r} store is unreadable: {exc}") from exc
        return store

    def _record_analyzer(self, name: str) -> str:
        """The analysis of a new index: `name` recorded when the index records none, read and
        written in one write transaction (SQLite's write lock, across processes); else the one
        recorded meanwhile. Read and written apart, two first openers of other analyzer settings
        both recorded theirs (the last one kept) and each analysed its documents its own way."""
        with self._lock, immediate(self._db):
            recorded = self.info("analyzer", self._db)
            if recorded is None:
                self.set_info("analyzer", name)
                return name
            return recorded

    def upsert(
        self, documents: Sequence[DocumentChunks], vectors: Sequence[Vector | None]
    ) -> list[UpsertResult]:
        results = self._group.submit(_Upsert(tuple(documents), tuple(vectors)))
        assert isinstance(results, list)
        return results

    def delete_document(self, document_id: str) -> int:
        n = self._group.submit(_Delete(document_id))
        assert isinstance(n, int)
        return n

    def _commit_group(self, writes: list[_Write]) -> list[list[UpsertResult] | int | BaseException]:
        """Concurrent writes (`group_commit.py`) in one transaction, one generation and one
        tantivy commit. Each runs in a savepoint: one that raises is rolled back alone and its
        caller gets the exception, the others commit. They become visible together at the
        COMMIT (records, dense) and at the tantivy commit (lexical), like a single write."""
        outcomes: list[list[UpsertResult] | int | BaseException] = []
        with self._lock:
            if not self._synced:
                self.sync_pending()
            db = self._db
            changed = deleted = False
            removed: list[int] = []
            added: list[tuple[int, str, bytes]] = []
            db.execute("BEGIN IMMEDIATE")
            wrote_documents = False
            try:
                before = self.generation(db)
                for write in writes:
                    kept = (len(removed), list(added))
                    db.execute("SAVEPOINT write")
                    try:
                        if isinstance(write, _Upsert):
                            self._check_settings(db)
                            results, wrote = self._upsert_rows(write, removed, added)
                            outcome: list[UpsertResult] | int = results
                        else:
                            outcome = self._delete_rows(write.document_id, removed, added)
                            if outcome:
                                db.execute(
                                    "INSERT OR IGNORE INTO lexical_pending VALUES (?)", (write.document_id,)
                                )
                            wrote = outcome > 0
                    except Exception as exc:
                        if not db.in_transaction:
                            raise  # SQLite rolled the whole transaction back (SQLITE_FULL): all fail
                        db.execute("ROLLBACK TO write")
                        db.execute("RELEASE write")
                        del removed[kept[0] :]
                        added[:] = kept[1]
                        outcomes.append(exc)
                        continue
                    db.execute("RELEASE write")
                    changed = changed or wrote
                    wrote_documents = wrote_documents or (isinstance(write, _Upsert) and wrote)
                    deleted = deleted or (isinstance(write, _Delete) and wrote)
                    outcomes.append(outcome)
                if changed:
                    self.set_info("generation", str(before + 1))
                    if wrote_documents and self.written_with is not None:
                        # The record as this transaction read it agreed (`_check_settings`), or
                        # there was none: recorded under the same write lock, so a writer of
                        # other settings that read "no record" before this commit is refused at
                        # its own (docs/ingest.md#indexing-settings-of-an-index).
                        self.set_info("written_with", self.written_with)
                    self._publish(before, removed, added)
                else:
                    db.execute("COMMIT")
            except BaseException:
                # SQLite rolls back by itself on some errors (SQLITE_FULL): a second ROLLBACK
                # would raise and hide the cause.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            # A bulk load defers its upserts' lexical commits to its end; a delete never waits
            # for it: the document leaves BM25 before the call returns.
            if changed and (deleted or not self.deferred):
                self.sync_pending()
        return outcomes

    def _check_settings(self, db: sqlite3.Connection) -> None:
        """Refuse an upsert (`settings_check`) when the index's record, read inside this write
        transaction, differs from this process's: the backend's earlier check read it before
        the lock, when another first writer may not yet have committed its own."""
        if self.settings_check is not None and self.written_with is not None:
            self.settings_check(
                self.info("written_with", db),
                int(self.info("dimension", db) or 0),
                lambda: self.has_sections(db),
            )

    def has_sections(self, db: sqlite3.Connection | None = None) -> bool:
        """Whether a chunk of the index has a section, as last committed (`db`: the writer's
        connection inside its own transaction, as `info`): the per-index flag under which a header
        rule shapes what the index holds (`written.HEADER_KEYS`). Derived, not stored: a seek on
        the `chunks_section` index, which SQLite keeps in the transaction that writes the chunks,
        so it is never out of step with them, an index written before session 51 needs no record
        (nor a re-index), and an index whose last sectioned document is deleted has none again."""
        query = "SELECT 1 FROM chunks WHERE section > '' LIMIT 1"
        if db is not None:
            return db.execute(query).fetchone() is not None
        with self._reading() as reader:
            return reader.execute(query).fetchone() is not None

    def _upsert_rows(
        self, write: _Upsert, removed: list[int], added: list[tuple[int, str, bytes]]
    ) -> tuple[list[UpsertResult], bool]:
        """One upsert's rows, inside the group's transaction; True when a document changed."""
        db = self._db
        results: list[UpsertResult] = []
        changed = False
        for doc, vecs in zip(write.documents, write.vectors, strict=True):
            n_pass = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
            n_span = len(doc.chunks) - n_pass
            row = db.execute(
                "SELECT content_hash FROM documents WHERE document_id = ?", (doc.document_id,)
            ).fetchone()
            if row is not None and row[0] == doc.content_hash:
                results.append(UpsertResult(doc.document_id, "unchanged", n_pass, n_span))
                continue
            if vecs is not None and len(vecs) != len(doc.chunks):
                raise BackendError(f"{doc.document_id}: {len(vecs)} vectors for {len(doc.chunks)} chunks")
            self._delete_rows(doc.document_id, removed, added)
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
            self._insert_chunks(doc, vecs, added)
            db.execute("INSERT OR IGNORE INTO lexical_pending VALUES (?)", (doc.document_id,))
            changed = True
            status = "created" if row is None else "updated"
            results.append(UpsertResult(doc.document_id, status, n_pass, n_span))
        return results, changed

    def _insert_chunks(
        self, doc: DocumentChunks, vecs: Vector | None, added: list[tuple[int, str, bytes]]
    ) -> None:
        """Insert one document's chunk rows in one statement; the vectors' rowids go to `added`."""
        db = self._db
        rows = []
        blobs: dict[str, tuple[str, bytes]] = {}
        meta_of, meta_json = None, ""
        for i, c in enumerate(doc.chunks):
            blob = _vector_blob(None if vecs is None else vecs[i])
            if blob is not None:
                blobs[c.chunk_id] = (c.kind.value, blob)
            if c.metadata is not meta_of:  # a document's chunks share one mapping
                meta_of, meta_json = c.metadata, json.dumps(dict(c.metadata))
            rows.append(
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
                    meta_json,
                    c.content_hash,
                    blob,
                )
            )
        db.executemany(
            "INSERT INTO chunks (chunk_id, document_id, kind, text, title, source, section,"
            " page, sequence, char_start, char_end, span_type, metadata, content_hash, vector)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        if blobs and vecs is not None and self.dimension(db) is None:
            # Vectors written without `ensure_embedder`: a blob's format is read from its length.
            self.set_info("dimension", str(len(vecs[0])))
        if blobs:  # the rowids SQLite gave them (executemany reports none)
            for rowid, cid in db.execute(
                "SELECT rowid, chunk_id FROM chunks WHERE document_id = ? ORDER BY rowid",
                (doc.document_id,),
            ):
                if cid in blobs:
                    added.append((int(rowid), *blobs[cid]))

    def _delete_rows(
        self, document_id: str, removed: list[int], added: list[tuple[int, str, bytes]] | None = None
    ) -> int:
        """Delete a document's rows; their rowids go to `removed`. Rows inserted earlier in the
        same transaction (`added`: a document written twice in one group) leave `added`, so the
        caches carried to the commit hold no row that is gone (SQLite may give a rowid again)."""
        db = self._db
        gone = [
            int(r[0]) for r in db.execute("SELECT rowid FROM chunks WHERE document_id = ?", (document_id,))
        ]
        removed.extend(gone)
        if added and gone:
            dropped = set(gone)
            added[:] = [a for a in added if a[0] not in dropped]
        db.execute("DELETE FROM doc_meta WHERE document_id = ?", (document_id,))
        n = db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,)).rowcount
        db.execute("DELETE FROM documents WHERE document_id = ?", (document_id,))
        return int(n)

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
                decode_vectors(blobs, self.dimension(self._db))
                if blobs and all(b is not None for b in blobs)
                else None
            )
            yield DocumentChunks(did, chash, source, chunks, json.loads(meta)), vecs

    def initialisms(self) -> initialisms.Table:
        """The initials of the names the index's passages spell out (`search.initialisms`), with
        the words they abbreviate: read from every passage (text, title, section) once per store
        generation and kept in memory. Index-wide: a caller counts an expansion's words within
        its filters (`term_counts`) before reading an acronym as present."""
        with self._snapshot() as db:
            gen = self.generation(db)
            if self._initialisms[0] == gen:
                return self._initialisms[1]
            table: dict[str, list[tuple[str, ...]]] = {}
            heads: set[str] = set()
            for text, title, section in db.execute(
                "SELECT text, title, section FROM chunks WHERE kind = ?", (ChunkKind.PASSAGE.value,)
            ):
                initialisms.add_text(table, text)
                for head in (title, section):
                    if head and head not in heads:
                        heads.add(head)
                        initialisms.add_text(table, head)
        built = {k: tuple(v) for k, v in table.items()}
        self._initialisms = (gen, built)
        return built

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
