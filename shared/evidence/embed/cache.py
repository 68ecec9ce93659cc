"""On-disk embedding cache keyed by (scope, model id and long-text rule, sha256 of the exact text).

Re-indexing unchanged text costs no inference. The scope is the index by default: a cache
shared by every index answered a tenant's upload of text that another tenant already held in
~60-200 ms instead of ~1-2 s, which told the second tenant what the first one had indexed
(issue 26.5). `EVIDENCE_EMBEDDING_CACHE_SCOPE=shared` shares one scope across indexes again, for
a store whose indexes all belong to one owner. SQLite in WAL mode (`sqlite_wal`): concurrent
readers and one writer at a time, in any number of processes; each write is one transaction, so a
process killed mid-write leaves the rows of its earlier writes and none of that one.

The same store keeps texts' word-piece vectors apart (`embed.pieces`, `<store>/pieces.sqlite3`,
in the same scopes), for the verbatim span scorer's token-level match.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import numpy as np

from evidence.embed.base import Embedder, LateEmbedder, Matrix, PieceEmbedder, document_key
from evidence.embed.late import LATE_SUFFIX
from evidence.embed.pieces import PieceCache, ScopedPieces
from evidence.ids import content_hash
from evidence.retry import check_deadline
from evidence.sqlite_wal import immediate, open_wal

#: Passages embedded between two looks at the request's deadline (~1-2 s of MiniLM on 2 cores).
EMBED_SLICE = 32

#: The scope of a cache shared by every index (EVIDENCE_EMBEDDING_CACHE_SCOPE=shared).
SHARED_SCOPE = "*"

#: Decoded vectors `EmbeddingCache.get_kept` keeps per process (384 float32 each: ~1.5 KB, so
#: ~30 MB for MiniLM's).
KEPT_VECTORS = 20_000

K = TypeVar("K")
R = TypeVar("R")


class EmbeddingCache:
    def __init__(self, path: Path, *, pieces_max_bytes: int = 0) -> None:
        """`pieces_max_bytes`: the bound of the word-piece cache next to it (0: none)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.pieces_max_bytes = pieces_max_bytes
        self._pieces: PieceCache | None = None
        self._db = open_wal(path, busy_s=60)
        # A table of its own: the rows of the earlier, unscoped table (`embeddings`) belong to no
        # index, so they are not read (a scoped store must not answer from them).
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS scoped_embeddings"
            " (scope TEXT, model TEXT, hash TEXT, vector BLOB, PRIMARY KEY(scope, model, hash))"
        )
        self._lock = threading.Lock()
        self._pieces_lock = threading.Lock()
        #: (scope, model, hash) -> a vector read before (`get_kept`), at `_kept_version`.
        self._kept: OrderedDict[tuple[str, str, str], Matrix] = OrderedDict()
        self._kept_version: int | None = None

    def get_many(self, model: str, hashes: Sequence[str], *, scope: str = SHARED_SCOPE) -> dict[str, Matrix]:
        with self._lock:
            return self._read(model, hashes, scope)

    def _read(self, model: str, hashes: Sequence[str], scope: str) -> dict[str, Matrix]:
        """The rows of `hashes` the file holds (the caller holds `_lock`)."""
        out: dict[str, Matrix] = {}
        for start in range(0, len(hashes), 900):
            part = list(hashes[start : start + 900])
            marks = ",".join("?" * len(part))
            for h, blob in self._db.execute(
                "SELECT hash, vector FROM scoped_embeddings"
                f" WHERE scope = ? AND model = ? AND hash IN ({marks})",
                [scope, model, *part],
            ):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def get_kept(self, model: str, hashes: Sequence[str], *, scope: str = SHARED_SCOPE) -> dict[str, Matrix]:
        """`get_many`, answering from the vectors this process read before (decoded, at most
        `KEPT_VECTORS`, the least recently used dropped first) while no other connection has
        written the file since (SQLite's `data_version`: any other connection's commit, from this
        process or another, empties them; this connection's own writes drop what they touch).
        Only vectors found are kept: a text the file did not hold is asked of it again. What the
        query-time span read uses (`CachedEmbedder.cached_documents`)."""
        with self._lock:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            if version != self._kept_version:
                self._kept.clear()
                self._kept_version = version
            out: dict[str, Matrix] = {}
            missing: list[str] = []
            for h in hashes:
                key = (scope, model, h)
                v = self._kept.get(key)
                if v is None:
                    missing.append(h)
                else:
                    self._kept.move_to_end(key)
                    out[h] = v
            if missing:
                fresh = self._read(model, missing, scope)
                for h, v in fresh.items():
                    self._kept[(scope, model, h)] = v
                while len(self._kept) > KEPT_VECTORS:
                    self._kept.popitem(last=False)
                out.update(fresh)
        return out

    def put_many(self, model: str, items: Sequence[tuple[str, Matrix]], *, scope: str = SHARED_SCOPE) -> None:
        """Best effort: a cache that cannot be written (a full disk) costs a re-embedding later,
        never the caller's write. The items are written in one transaction, whole or not at all."""
        rows = [(scope, model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items]
        with self._lock:
            for h, _ in items:
                self._kept.pop((scope, model, h), None)
            try:
                with immediate(self._db):
                    self._db.executemany("INSERT OR REPLACE INTO scoped_embeddings VALUES (?, ?, ?, ?)", rows)
            except sqlite3.Error as exc:
                logging.getLogger(__name__).warning("embedding cache not written: %s", exc)

    def delete_many(self, model: str, hashes: Sequence[str], *, scope: str = SHARED_SCOPE) -> None:
        """Forget these rows (those the file holds), in one transaction; best effort as
        `put_many` (a failure is logged)."""
        if not hashes:
            return
        rows = [(scope, model, h) for h in hashes]
        with self._lock:
            for h in hashes:
                self._kept.pop((scope, model, h), None)
            try:
                with immediate(self._db):
                    self._db.executemany(
                        "DELETE FROM scoped_embeddings WHERE scope = ? AND model = ? AND hash = ?", rows
                    )
            except sqlite3.Error as exc:
                logging.getLogger(__name__).warning("embedding cache not written: %s", exc)

    @property
    def pieces_path(self) -> Path:
        return self.path.with_name("pieces.sqlite3")

    def pieces(self) -> PieceCache | None:
        """The word-piece cache next to this one, opened on first use; None when it is off."""
        if self.pieces_max_bytes <= 0:
            return None
        with self._pieces_lock:  # not the vectors' lock: opening may wait on another process
            if self._pieces is None:
                self._pieces = PieceCache(self.pieces_path, max_bytes=self.pieces_max_bytes)
            return self._pieces

    def drop_scope(self, scope: str) -> None:
        """Forget a scope's vectors and word pieces (its index was deleted)."""
        with self._lock:
            self._kept.clear()
            try:
                self._db.execute("DELETE FROM scoped_embeddings WHERE scope = ?", (scope,))
            except sqlite3.Error as exc:
                logging.getLogger(__name__).warning("embedding cache not cleared: %s", exc)
        # Also when this process never opened it (the pieces were written by another one), and
        # when it keeps none now (EVIDENCE_TOKEN_CACHE_MB=0 after a run that kept them): a deleted
        # index's pieces must not outlive it.
        if not self.pieces_path.exists():
            return
        pieces = self.pieces()
        if pieces is not None:
            pieces.drop_scope(scope)
            return
        once = PieceCache(self.pieces_path, max_bytes=0)
        try:
            once.drop_scope(scope)
        finally:
            once.close()

    def close(self) -> None:
        self._db.close()
        if self._pieces is not None:
            self._pieces.close()


def in_slices(keys: Sequence[K], embed: Callable[[list[K]], R], what: str) -> Iterator[tuple[list[K], R]]:
    """`embed` of `keys` (what it embeds for them is the caller's: texts, or texts and ranges),
    `EMBED_SLICE` at a time, each slice with its keys: embedding is most of an upload's cost, so
    the request's deadline is checked before each slice (`what` names the work in its error), and
    a caller that caches each slice as it comes lets a retry resume where this stopped."""
    for start in range(0, len(keys), EMBED_SLICE):
        check_deadline(what)
        part = list(keys[start : start + EMBED_SLICE])
        yield part, embed(part)


#: A text's key in the cache (`content_hash`: sha256 of its UTF-8), remembered for the texts read
#: again and again (the span anchor's spans, question after question); indexing's texts are hashed
#: once and not kept.
_kept_key = lru_cache(maxsize=65536)(content_hash)


class CachedEmbedder:
    """Wraps an Embedder; document embeddings go through the cache (in `scope`), queries do not."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache, *, scope: str = SHARED_SCOPE) -> None:
        self.inner = inner
        self.cache = cache
        self.scope = scope
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        #: The cache's key for the model: a vector made under another long-text rule is not reused.
        self.document_rule = getattr(inner, "document_rule", "")
        self._key = document_key(inner)
        self.hits = 0
        self.misses = 0

    def scoped(self, scope: str) -> CachedEmbedder:
        """The same model and cache, reading and writing only `scope`'s vectors."""
        return CachedEmbedder(self.inner, self.cache, scope=scope)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        keys = [content_hash(t) for t in texts]
        found = self.cache.get_many(self._key, list(dict.fromkeys(keys)), scope=self.scope)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            todo = list(dict.fromkeys(keys[i] for i in missing))
            first_text = {keys[i]: texts[i] for i in missing}

            def embed(part: list[str]) -> Matrix:
                return self.inner.embed_documents([first_text[k] for k in part])

            for part, fresh in in_slices(todo, embed, "embedding the document's passages"):
                self.cache.put_many(self._key, list(zip(part, fresh, strict=True)), scope=self.scope)
                found.update(zip(part, fresh, strict=True))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Matrix:
        return self.inner.embed_query(text)

    def embed_with_pieces(self, texts: Sequence[str]) -> dict[str, Matrix]:
        """For texts whose word pieces are wanted and not cached (the span scorer's,
        `verbatim.span_rank.TokenCache.prime`): those whose document vector this cache does not
        hold either are run through the model once (`PieceEmbedder.embed_documents_and_tokens`),
        their vectors cached as `embed_documents` caches them (same key, scope and bytes, slice
        by slice between looks at the deadline); their pieces are returned by text, for the
        word-piece caches. A text whose vector is cached is left out (its pieces alone are
        embedded later), and so is every text when the inner embedder cannot give both (a remote
        model): `embed_documents` and `embed_tokens` then embed them apart, as before. Under
        `evidence serve` the inner embedder sends documents to a worker process and gives both
        here, from the server's model (`embed.background._DocumentsElsewhere`)."""
        inner = self.inner
        if not texts or not isinstance(inner, PieceEmbedder):
            return {}
        first_text = {content_hash(t): t for t in texts}
        found = self.cache.get_many(self._key, list(first_text), scope=self.scope)
        todo = [k for k in first_text if k not in found]
        out: dict[str, Matrix] = {}

        def embed(part: list[str]) -> tuple[Matrix, list[Matrix]]:
            return inner.embed_documents_and_tokens([first_text[k] for k in part])

        for part, (fresh, pieces) in in_slices(todo, embed, "embedding the spans"):
            self.cache.put_many(self._key, list(zip(part, fresh, strict=True)), scope=self.scope)
            out.update((first_text[k], m) for k, m in zip(part, pieces, strict=True))
        self.misses += len(todo)
        return out

    def cached_documents(self, texts: Sequence[str]) -> list[Matrix | None]:
        """Each text's document vector as the cache holds it (in this scope, this model), None
        for a text it does not hold: a read only, nothing is ever embedded (the `default`
        profile's span anchor reads the span vectors indexing put there, docs/ranking.md)."""
        if not texts:
            return []
        keys = [_kept_key(t) for t in texts]
        found = self.cache.get_kept(self._key, list(dict.fromkeys(keys)), scope=self.scope)
        return [found.get(k) for k in keys]

    @property
    def late_capable(self) -> bool:
        """Whether the model can give late-chunked span vectors (`embed_late`): a MiniLM, here or
        in `serve`'s document-embedding process (`embed.background`)."""
        capable = getattr(self.inner, "late_capable", None)
        return bool(capable) if capable is not None else isinstance(self.inner, LateEmbedder)

    def embed_late(
        self, texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[Matrix, list[list[Matrix | None]]]:
        """`embed_documents(texts)` and each range's late-chunked vector
        (`MiniLMEmbedder.embed_documents_and_late`): every text is run through the model (a late
        vector needs its hidden state), its vector taken from the cache when the cache holds it
        (the same bits) and cached when it does not, slice by slice between looks at the
        deadline."""
        inner = self.inner
        assert isinstance(inner, LateEmbedder), "embed_late needs a late-chunking embedder"
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32), []
        keys = [content_hash(t) for t in texts]
        found = self.cache.get_many(self._key, list(dict.fromkeys(keys)), scope=self.scope)
        # A text whose vector is cached and that has no range asks nothing of the model.
        todo = [i for i in range(len(texts)) if ranges[i] or keys[i] not in found]

        def embed(part: list[int]) -> tuple[Matrix, list[list[Matrix | None]]]:
            return inner.embed_documents_and_late([texts[i] for i in part], [ranges[i] for i in part])

        late: dict[int, list[Matrix | None]] = {}
        for part, (fresh, pooled) in in_slices(todo, embed, "embedding the document's passages"):
            new = {keys[i]: fresh[k] for k, i in enumerate(part) if keys[i] not in found}
            if new:
                self.cache.put_many(self._key, list(new.items()), scope=self.scope)
                found.update(new)
            late.update(zip(part, pooled, strict=True))
        self.misses += len(todo)
        vectors = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        return vectors, [late.get(i, []) for i in range(len(texts))]

    def first_window_chars(self, texts: Sequence[str], *, keep: bool = True) -> list[int]:
        inner = self.inner
        assert isinstance(inner, LateEmbedder), "first_window_chars needs a late-chunking embedder"
        return inner.first_window_chars(texts, keep=keep)

    def put_late(self, items: Sequence[tuple[str, Matrix]]) -> None:
        """Cache late vectors by key (`embed.late.late_key`; their own model key: `LATE_SUFFIX`)."""
        if items:
            self.cache.put_many(self._key + LATE_SUFFIX, items, scope=self.scope)

    def drop_late(self, keys: Sequence[str]) -> None:
        """Forget late vectors by key (`Indexing.write_documents`: the old-format keys,
        `embed.late.legacy_late_key`, of a document it writes)."""
        self.cache.delete_many(self._key + LATE_SUFFIX, keys, scope=self.scope)

    def cached_late(self, keys: Sequence[str]) -> list[Matrix | None]:
        """Late vectors as the cache holds them (`embed.late.late_key` of each span), None for
        one it does not: a read only (the focus span anchor under `late`)."""
        if not keys:
            return []
        found = self.cache.get_kept(self._key + LATE_SUFFIX, list(dict.fromkeys(keys)), scope=self.scope)
        return [found.get(k) for k in keys]

    def pieces(self, model: str) -> ScopedPieces | None:
        """The store's word-piece cache in this embedder's scope, for pieces made by `model` (a
        word-piece model's `piece_key`); None when it is off."""
        cache = self.cache.pieces()
        return ScopedPieces(cache, scope=self.scope, model=model) if cache is not None else None
