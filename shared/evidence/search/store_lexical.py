"""The embedded store's inverted indexes: one tantivy index per chunk kind, kept in line with the
records through the `lexical_pending` journal (`embedded_store.py` explains the crash safety)."""

from __future__ import annotations

import bisect
import itertools
import json
import operator
import re
import shutil
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.records import ChunkKind, SearchHit
from evidence.search.analysis import EnglishAnalyzer, with_joined_compounds
from evidence.search.ann import AnnConfig
from evidence.search.base import Filters, filter_value
from evidence.search.headers import OFF, SectionHeaders
from evidence.search.store_records import RecordStore, _metadata_terms, meta_term
from evidence.sqlite_wal import immediate

if TYPE_CHECKING:
    import tantivy

_WRITER_HEAP = 64_000_000
#: Indexing threads per tantivy writer (two made a full disk fail as an untyped error once).
_WRITER_THREADS = 1
#: Journalled documents whose rows are read in one query when the inverted index is brought up to date.
_SYNC_READ_DOCS = 512
#: Filter sets up to this many terms are asked as one term query each (`_filter_query`).
TERM_QUERY_MAX = 256
_LEXICAL_COLS = "chunk_id, document_id, kind, section, span_type, metadata, title, text, char_start, char_end"
_WORD_CHAR = re.compile(r"\w")


def _meta_terms(
    document_id: str, kind: str, section: str, span_type: str | None, metadata: Mapping[str, object]
) -> list[str]:
    """A chunk's filter terms: its built-in fields and its metadata pairs."""
    pairs = [("document_id", document_id), ("kind", kind), ("section", section)]
    if span_type is not None:
        pairs.append(("span_type", span_type))
    pairs.extend(_metadata_terms(metadata))
    return [meta_term(key, value) for key, value in pairs]


def _separates(gap: str, inner: bool) -> bool:
    """Whether text analysed on either side of `gap` gives the same tokens as analysed whole: no
    word character in it, and between two pieces not a lone character either ("a.b" is one
    token: `.` joins letters)."""
    if _WORD_CHAR.search(gap):
        return False
    return not inner or len(gap) >= 2 or gap.isspace()


def _tiled_terms(
    analyzer: EnglishAnalyzer,
    text: str,
    start: int,
    spans: Sequence[tuple[int, int, str, list[str]]],
    starts: Sequence[int],
) -> list[str]:
    """The terms of a passage (`text`, at `start` in its document) joined from its spans' terms
    when the spans inside it tile it with separating gaps (a passage is runs of sentences, which
    are its fact spans): every word is then analysed once, not twice. Otherwise analysed whole."""
    end = start + len(text)
    at = bisect.bisect_left(starts, start)
    terms: list[str] = []
    pos = 0  # offset in `text` covered so far
    for cs, ce, span_text, span_terms in spans[at:]:
        if cs >= end:
            break
        a, b = cs - start, ce - start
        if b > len(text) or text[a:b] != span_text or not _separates(text[pos:a], inner=pos > 0):
            return analyzer.analyze(text)
        terms.extend(span_terms)
        pos = b
    if pos == 0 or not _separates(text[pos:], inner=False):
        return analyzer.analyze(text)
    return terms


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
        #: The contextual section header rule (`search.headers`); set by `EmbeddedBackend`.
        self.headers: SectionHeaders = OFF

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
        index = None
        if (path / "meta.json").exists():
            try:
                index, fresh = tantivy.Index(schema, path=str(path), reuse=True), False
            except ValueError:
                index = None
        if index is None:
            # Creating or rebuilding the directory: another process opening the same new index
            # (two first writers) would otherwise remove the one this process is creating.
            with self._process_lock():
                index, fresh = self._make_lexical(path, schema)
        index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        self._tantivy[kind] = index
        if fresh:
            # Everything in the records must be (re)indexed lexically.
            self._db.execute("INSERT OR IGNORE INTO lexical_pending SELECT document_id FROM documents")
        return index

    @staticmethod
    def _make_lexical(path: Path, schema: tantivy.Schema) -> tuple[tantivy.Index, bool]:
        """The inverted index under `path`, created when absent or unreadable (derived data:
        rebuilt from the records), with True when it was; under `_process_lock`."""
        import tantivy

        fresh = not (path / "meta.json").exists()
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        try:
            return tantivy.Index(schema, path=str(path), reuse=True), fresh
        except ValueError:
            shutil.rmtree(path)
            path.mkdir()
            return tantivy.Index(schema, path=str(path), reuse=True), True

    def _tantivy_docs(self, rows: Sequence[Sequence[Any]]) -> Iterator[tuple[ChunkKind, tantivy.Document]]:
        """The inverted-index documents of one document's chunk rows (`_LEXICAL_COLS`). Its title
        is analysed once, and a passage made of its spans is not analysed again (`_tiled_terms`).
        With a section header rule (`self.headers`), the header's terms follow the title's."""
        import tantivy

        analyze = self.analyzer.analyze
        headers = self.headers
        titles: dict[str, list[str]] = {}
        heads: dict[tuple[str, str, str, str], list[str]] = {}
        metas: dict[tuple[str, str, str | None, str], list[str]] = {}
        spans = sorted((r[8], r[9], r[7], analyze(r[7])) for r in rows if r[2] != ChunkKind.PASSAGE.value)
        starts = [s[0] for s in spans]
        span_terms = {(s[0], s[1], s[2]): s[3] for s in spans}
        for cid, did, kind, section, span_type, meta, title, text, cs, ce in rows:
            title_terms = titles.get(title)
            if title_terms is None:
                title_terms = titles[title] = analyze(title)
            if kind == ChunkKind.PASSAGE.value:
                text_terms = _tiled_terms(self.analyzer, text, cs, spans, starts) if spans else analyze(text)
            else:
                text_terms = span_terms[(cs, ce, text)]
            key = (kind, section, span_type, meta)
            meta_terms = metas.get(key)
            if meta_terms is None:
                meta_terms = metas[key] = _meta_terms(did, kind, section, span_type, json.loads(meta))
            if headers.lexical:
                head_key = (kind, section, meta, title)
                head_terms = heads.get(head_key)
                if head_terms is None:
                    head = headers.lexical_header(kind, section, json.loads(meta), title)
                    head_terms = heads[head_key] = analyze(head) if head else []
                title_terms = title_terms + head_terms
            doc = tantivy.Document()
            doc.add_text("chunk_id", cid)
            doc.add_text("document_id", did)
            for term in meta_terms:
                doc.add_text("meta", term)
            doc.add_text("body", " ".join(title_terms + text_terms))
            yield ChunkKind(kind), doc

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
        writers = {
            k: ix.writer(heap_size=_WRITER_HEAP, num_threads=_WRITER_THREADS) for k, ix in indexes.items()
        }
        for doc_id in pending:
            for writer in writers.values():
                # Before any add: a delete removes only what was added before it.
                writer.delete_documents_by_term("document_id", doc_id)
        for start in range(0, len(pending), _SYNC_READ_DOCS):
            rows = self._db.execute(
                f"SELECT {_LEXICAL_COLS} FROM chunks WHERE document_id IN (SELECT value FROM json_each(?))"
                " ORDER BY document_id, rowid",
                (json.dumps(pending[start : start + _SYNC_READ_DOCS]),),
            ).fetchall()
            for _, doc_rows in itertools.groupby(rows, key=operator.itemgetter(1)):
                for kind, doc in self._tantivy_docs(list(doc_rows)):
                    writers[kind].add_document(doc)
        for writer in writers.values():
            writer.commit()
            writer.wait_merging_threads()
        del writers  # tantivy's own directory lock goes with the writers, before our lock
        db = self._db
        with immediate(db):
            db.executemany("DELETE FROM lexical_pending WHERE document_id = ?", [(d,) for d in pending])
            # Readers in other processes reload their searchers when this moves (the records'
            # generation moved before tantivy had these documents). A counter of its own: the
            # record caches keyed by `generation` stay valid.
            self.set_info("lexical_generation", str(self._lexical_generation(db) + 1))

    def _lexical_generation(self, db: sqlite3.Connection | None = None) -> int:
        return int(self.info("lexical_generation", db) or 0)

    def _reload(self, indexes: Mapping[ChunkKind, tantivy.Index] | None = None) -> None:
        gen = self._lexical_generation()
        for ix in (indexes or {k: self._open_lexical(k) for k in ChunkKind}).values():
            ix.reload()
        self._lexical_gen = gen

    # --- search ---------------------------------------------------------------------------

    def lexical(self, text: str, k: int, filters: Filters | None, kind: ChunkKind | None) -> list[SearchHit]:
        terms = self._query_terms(text)
        if not terms:
            return []
        scored: list[tuple[float, str]] = []
        self._fresh_lexical()
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

    def _fresh_lexical(self) -> None:
        """Before a search: the journal replayed once, and other processes' commits seen."""
        if not self._synced:
            self.sync_pending()
        elif self._lexical_generation() != self._lexical_gen:
            self._reload()  # another process wrote: see its commits

    def term_counts(
        self, texts: Sequence[str], cap: int, filters: Filters | None, kind: ChunkKind | None
    ) -> dict[str, int]:
        """How many chunks `lexical(text, …)` would match for each text, up to `cap`: the same
        query and filter, counted by tantivy without ranking, fetching or reading a record."""
        import tantivy

        self._fresh_lexical()
        kinds = [kind] if kind is not None else list(ChunkKind)
        searchers = {kd: self._open_lexical(kd).searcher() for kd in kinds}
        out: dict[str, int] = {}
        for text in dict.fromkeys(texts):
            terms = self._query_terms(text)
            n = 0
            if terms and cap > 0:
                for kd, searcher in searchers.items():
                    # A constant score: no BM25 for a count; limit 1 because tantivy needs one.
                    query = tantivy.Query.const_score_query(self._query(kd, terms, filters), 1.0)
                    found = searcher.search(query, limit=1, count=True)
                    n += int(getattr(found, "count", 0) or 0)  # tantivy's stub omits `count`
            out[text] = min(n, cap)
        return out

    def _query_terms(self, text: str) -> list[str]:
        """A query's terms: its hyphenated compounds also asked joined
        (`analysis.with_joined_compounds`), as OpenSearch is asked them (`lexical_query`)."""
        return self.analyzer.analyze(with_joined_compounds(text))

    def _query(self, kind: ChunkKind, terms: list[str], filters: Filters | None) -> tantivy.Query:
        """Any of `terms` in the body, restricted to `filters` by zero-weight clauses."""
        import tantivy

        schema = self._open_lexical(kind).schema
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in terms]
        )
        if filters:
            musts = [(tantivy.Occur.Must, query)]
            for key, value in filters.items():
                vals = list(value) if isinstance(value, list | tuple) else [value]
                if key == "chunk_id":  # its own raw field: restricting to known chunks (score completion)
                    tq = _filter_query(schema, "chunk_id", [str(v) for v in vals])
                else:
                    tq = _filter_query(schema, "meta", [meta_term(key, filter_value(v)) for v in vals])
                # Zero-weight filter: restricts the set without touching BM25 scores.
                musts.append((tantivy.Occur.Must, tantivy.Query.const_score_query(tq, 0.0)))
            query = tantivy.Query.boolean_query(musts)
        return query

    def _search_kind(
        self, kind: ChunkKind, terms: list[str], k: int, filters: Filters | None
    ) -> list[tuple[float, str]]:
        query = self._query(kind, terms, filters)
        searcher = self._open_lexical(kind).searcher()
        result = searcher.search(query, k)
        scale = 1.0 + self.k1
        return [(float(score) / scale, searcher.doc(addr)["chunk_id"][0]) for score, addr in result.hits]


def _filter_query(schema: tantivy.Schema, field: str, values: list[str]) -> tantivy.Query:
    """The documents holding any of `values` in `field`. A term set query walks the field's whole
    term dictionary (0.53 ms for 90 chunk ids over SciFact's passages, the score completion of
    every retrieve); a few term queries look their terms up (0.16 ms, the same documents)."""
    import tantivy

    if not values or len(values) > TERM_QUERY_MAX:
        return tantivy.Query.term_set_query(schema, field, values)
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, field, v)) for v in values]
    )
