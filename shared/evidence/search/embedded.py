"""The embedded backend: one machine, no server, persistent under a store directory.

`EmbeddedBackend` is the `SearchBackend` façade: it names, opens and caches the indexes of a
store; each index is an `IndexStore` (`embedded_store.py`: SQLite records + tantivy, crash-safe).
"""

from __future__ import annotations

import errno
import functools
import json
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from evidence.errors import BackendError, IndexNotFoundError, StorageFullError
from evidence.names import validate_index_name
from evidence.records import ChunkKind, DocumentChunks, SearchHit
from evidence.search.analysis import AnalyzerConfig
from evidence.search.ann import AnnConfig
from evidence.search.base import DocumentInfo, Filters, IndexInfo, OrderedChunks, UpsertResult, Vector
from evidence.search.embedded_store import Consistency, IndexStore
from evidence.search.headers import OFF, SectionHeaders
from evidence.search.initialisms import Table

DEFAULT_ANN = AnnConfig()

__all__ = ["Consistency", "EmbeddedBackend", "IndexStore", "iter_chunks"]


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
#: How a full disk reads in SQLite's and tantivy's (Rust io::Error) messages. When the disk fills
#: inside tantivy's indexing thread, the writer reports only that the thread died of an io::Error
#: ("An index writer was killed"): the same outcome (the journal replays it), so the same answer.
_FULL_MESSAGES = (
    "database or disk is full",
    "os error 28",
    "os error 27",
    "os error 122",
    "An index writer was killed",
)


def _is_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    # SQLite reports a write refused by the OS (EFBIG past a file-size limit, EIO) as
    # SQLITE_IOERR_WRITE, without the errno: the same answer, the store was not written.
    if str(getattr(exc, "sqlite_errorname", "")).startswith(("SQLITE_FULL", "SQLITE_IOERR")):
        return True
    return any(m in str(exc) for m in _FULL_MESSAGES)


@contextmanager
def _writing(store_dir: Path, index: str) -> Iterator[None]:
    """A write to the store; a full disk becomes the typed StorageFullError (507)."""
    try:
        yield
    except (OSError, sqlite3.Error, ValueError) as exc:
        if not _is_full(exc):
            raise
        raise StorageFullError(
            f"the store under {store_dir} could not be written for index {index!r} (no space left, "
            "or a file-size limit); nothing was written: free space and send the same request again",
            field="index",
        ) from exc


class EmbeddedBackend:
    """SearchBackend on local disk. Thread-safe within a process; one writer per store at a time."""

    def __init__(
        self,
        store_dir: Path,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        analyzer: AnalyzerConfig | None = None,
        ann: AnnConfig | None = DEFAULT_ANN,
        headers: SectionHeaders = OFF,
        written_with: Mapping[str, str] | None = None,
    ) -> None:
        if (k1, b) != (1.2, 0.75):
            # tantivy fixes BM25's k1 and b; other values would silently not apply.
            raise BackendError(
                "the embedded backend computes BM25 with k1=1.2, b=0.75 (OpenSearch's defaults)"
            )
        self.store_dir = Path(store_dir)
        self.k1 = k1
        self.b = b
        #: For new indexes; an existing index keeps the analysis it was built with.
        self.analyzer_config = analyzer or AnalyzerConfig()
        self._indexes: dict[str, IndexStore] = {}
        self._lock = threading.Lock()
        #: When an index's dense leg turns approximate (search/ann.py); None = always exact.
        self.ann = ann
        #: What of a chunk's section its BM25 document carries (docs/ingest.md#section-headers).
        self.headers = headers
        #: The settings this process writes documents with (`search.written`), recorded by each
        #: index at a write that changes a document; None records nothing.
        self.written_with = json.dumps(dict(written_with), sort_keys=True) if written_with else None
        self._written = dict(written_with) if written_with else None
        #: Indexes whose recorded settings agree with `written_with` (`_refuse_other_settings`):
        #: checked once per index per backend; forgotten by `delete_index`.
        self._settings_checked: set[str] = set()

    def _root(self, index: str) -> Path:
        validate_index_name(index)
        return self.store_dir / "indexes" / index

    def index_store(self, index: str, *, create: bool = False) -> IndexStore:
        """The storage engine of one index, opened once per backend (IndexNotFoundError if absent)."""
        with self._lock:
            found = self._indexes.get(index)
            if found is not None:
                return found
            root = self._root(index)
            if not (root / "records.sqlite3").exists():
                if not create:
                    raise IndexNotFoundError(index)
                root.mkdir(parents=True, exist_ok=True)
            opened = IndexStore.open(root, self.analyzer_config, k1=self.k1, b=self.b, ann=self.ann)
            opened.headers = self.headers
            opened.written_with = self.written_with
            opened.settings_check = functools.partial(self._refuse_record, index)
            self._indexes[index] = opened
            return opened

    def create_index(self, index: str, *, embedder_id: str, dimension: int) -> IndexInfo:
        with _writing(self.store_dir, index):
            store = self.index_store(index, create=True)
            store.ensure_embedder(embedder_id, dimension)
        # After the embedder's own check (another model: `embedder_mismatch`, its message), and
        # before the caller embeds anything (`Indexing._ensure_index`).
        self._refuse_other_settings(index, store)
        return self.get_index(index)

    def _refuse_other_settings(self, index: str, store: IndexStore) -> None:
        """IndexSettingsMismatchError (`field`: the setting) when `index` records other indexing
        settings (`written_with` in its info) than this backend writes with (`search.written`):
        its documents would not match the index's others (another window, long-text rule, header
        rule, span vectors, cache scope). Compared on the settings both records hold, a
        lexical-only index without the vector keys (`written.VECTOR_KEYS`). Once per index per
        backend; an index without a record (written before session 48, or by nothing yet) is not
        compared and is read again at the next write, until it has one. This is the early check
        (before anything is embedded); the commit compares again under its write lock
        (`IndexStore.settings_check`), so two first writers cannot both write."""
        from evidence.search.written import EXTRA_KEY

        if self._written is None or index in self._settings_checked:
            return
        recorded = store.info(EXTRA_KEY)
        if recorded is None:
            return
        self._refuse_record(index, recorded, int(store.info("dimension") or 0), store.has_sections)
        self._settings_checked.add(index)

    def _refuse_record(
        self, index: str, recorded: str | None, dimension: int, has_sections: Callable[[], bool]
    ) -> None:
        """IndexSettingsMismatchError when the stored record `recorded` (JSON; None: no record,
        nothing to compare) differs from this backend's for an index of `dimension`; a header
        rule alone is not compared while the index holds no sectioned chunk (`has_sections`:
        `written.HEADER_KEYS`), and the commit then records this backend's rule."""
        from evidence.search.written import parse, refuse_difference

        if self._written is None:
            return
        refuse_difference(
            parse(recorded),
            self._written,
            lambda setting, stored, ours: (
                f"index {index!r} of the store {str(self.store_dir)!r} was written with "
                f"{setting}={stored!r}, but this process has {setting}={ours!r}: set "
                f"EVIDENCE_{setting.upper()}={stored} (the index's setting) to write into it, or "
                f"index into a new index name, or delete the index (`evidence delete --index {index} "
                "--all`) and index it again under the current settings. Nothing was written"
            ),
            dimension=dimension,
            has_sections=has_sections,
        )

    def get_index(self, index: str) -> IndexInfo:
        return self.index_store(index).describe()

    def list_indexes(self) -> list[IndexInfo]:
        root = self.store_dir / "indexes"
        if not root.exists():
            return []
        return [self.get_index(p.name) for p in sorted(root.iterdir()) if (p / "records.sqlite3").exists()]

    def list_documents(self, index: str) -> list[DocumentInfo]:
        return self.index_store(index).document_infos()

    def delete_index(self, index: str) -> None:
        root = self._root(index)
        with self._lock:
            found = self._indexes.pop(index, None)
            self._settings_checked.discard(index)
        if found is not None:
            found.close()
        if not root.exists():
            raise IndexNotFoundError(index)
        shutil.rmtree(root)

    def has_sections(self, index: str) -> bool:
        """`search.base.SectionsProbe`: whether a chunk of `index` has a section, as last
        committed (`IndexStore.has_sections`, a seek)."""
        return self.index_store(index).has_sections()

    def document_hash(self, index: str, document_id: str) -> str | None:
        return self.index_store(index).document_hash(document_id)

    def upsert(
        self, index: str, documents: Sequence[DocumentChunks], vectors: Sequence[Vector | None]
    ) -> list[UpsertResult]:
        with _writing(self.store_dir, index):
            store = self.index_store(index)
            # Before anything is written (docs/ingest.md#indexing-settings-of-an-index).
            self._refuse_other_settings(index, store)
            return store.upsert(documents, vectors)

    def delete_document(self, index: str, document_id: str) -> int:
        with _writing(self.store_dir, index):
            return self.index_store(index).delete_document(document_id)

    def lexical(
        self,
        index: str,
        text: str,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> list[SearchHit]:
        return self.index_store(index).lexical(text, k, filters, kind)

    def term_counts(
        self,
        index: str,
        texts: Sequence[str],
        *,
        cap: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> dict[str, int]:
        return self.index_store(index).term_counts(texts, cap, filters, kind)

    def document_count(self, index: str, *, filters: Filters | None = None) -> int:
        return self.index_store(index).document_count(filters)

    def initialisms(self, index: str) -> Table:
        """The initials of the names the index's passages spell out (`search.initialisms`), for
        the refusal signal (`verbatim.grounding.index_df`): index-wide, cached per generation."""
        return self.index_store(index).initialisms()

    def dense(
        self,
        index: str,
        vector: Vector,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
        light: bool = False,  # ignored: the chunks are local, whole chunks cost nothing
    ) -> list[SearchHit]:
        return self.index_store(index).dense(vector, k, filters, kind)

    def lookup(
        self, index: str, filters: Filters, *, limit: int = 100, kind: ChunkKind | None = None
    ) -> list[SearchHit]:
        return self.index_store(index).lookup(filters, limit, kind)

    def ordered_lookup(
        self, index: str, filters: Filters, *, limit: int, kind: ChunkKind | None
    ) -> list[OrderedChunks]:
        return self.index_store(index).ordered_lookup(filters, limit, kind)

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return self.index_store(index).vectors(chunk_ids)

    @contextmanager
    def bulk(self, index: str) -> Iterator[None]:
        """Defer lexical commits to the end of a bulk load (records still commit per batch)."""
        idx = self.index_store(index)
        idx.deferred = True
        try:
            yield
        finally:
            idx.deferred = False
            idx.sync_pending()

    def sync(self, index: str) -> int:
        """Repair the inverted index after a crash; returns how many documents were re-synced."""
        return self.index_store(index).sync_pending()

    def close(self) -> None:
        with self._lock:
            for idx in self._indexes.values():
                idx.close()
            self._indexes.clear()


def iter_chunks(backend: EmbeddedBackend, index: str) -> Iterator[tuple[DocumentChunks, Vector | None]]:
    """Every document of `index` with its chunks and vectors, for migration to another backend."""
    return backend.index_store(index).documents()


def dense_path(backend: EmbeddedBackend, index: str) -> str:
    """ "ann" when the index's dense leg is approximate, else "exact" (benchmarks report it)."""
    return "ann" if backend.index_store(index).uses_ann() else "exact"
