"""The embedded store's inverted indexes: one tantivy index per chunk kind, kept in line with the
records through the `lexical_pending` journal (`embedded_store.py` explains the crash safety)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from evidence.records import Chunk, ChunkKind, SearchHit
from evidence.search.analysis import EnglishAnalyzer
from evidence.search.ann import AnnConfig
from evidence.search.base import Filters
from evidence.search.store_records import RecordStore, _meta_terms, filter_value, meta_term

if TYPE_CHECKING:
    import tantivy

_WRITER_HEAP = 64_000_000


class LexicalStore(RecordStore):
    """BM25 over tantivy, and the journal replay that keeps it consistent with the records."""

    def __init__(
        self, root: Path, analyzer: EnglishAnalyzer, k1: float, b: float, ann: AnnConfig | None = None
    ) -> None:
        super().__init__(root, analyzer, k1, b, ann)
        self._tantivy: dict[ChunkKind, tantivy.Index] = {}
        self._synced = False
        #: The lexical generation the tantivy readers last reloaded at (other processes write too).
        self._lexical_gen = -1
        #: While True (inside `EmbeddedBackend.bulk`), lexical sync waits for the bulk's end:
        #: one tantivy commit instead of one per batch. The journal keeps this crash-safe.
        self.deferred = False

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
