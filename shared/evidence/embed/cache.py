"""On-disk embedding cache keyed by (model id, sha256 of the exact text embedded).

Re-indexing unchanged text, or the same text in another index, costs no
inference. SQLite in WAL mode: safe for concurrent readers and one writer.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evidence.embed.base import Embedder, Matrix


class EmbeddingCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings"
            " (model TEXT, hash TEXT, vector BLOB, PRIMARY KEY(model, hash))"
        )
        self._lock = threading.Lock()

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, Matrix]:
        out: dict[str, Matrix] = {}
        with self._lock:
            for start in range(0, len(hashes), 900):
                part = list(hashes[start : start + 900])
                marks = ",".join("?" * len(part))
                for h, blob in self._db.execute(
                    f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",
                    [model, *part],
                ):
                    out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, items: Sequence[tuple[str, Matrix]]) -> None:
        """Best effort: a cache that cannot be written (a full disk) costs a re-embedding later,
        never the caller's write; the transaction is rolled back so the next one can begin."""
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                    [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items],
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.rollback()
                logging.getLogger(__name__).warning("embedding cache not written: %s", exc)

    def close(self) -> None:
        self._db.close()


class CachedEmbedder:
    """Wraps an Embedder; document embeddings go through the cache, queries do not."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.hits = 0
        self.misses = 0

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found = self.cache.get_many(self.model_id, list(dict.fromkeys(keys)))
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            todo = list(dict.fromkeys(keys[i] for i in missing))
            first_text = {keys[i]: texts[i] for i in missing}
            fresh = self.inner.embed_documents([first_text[k] for k in todo])
            self.cache.put_many(self.model_id, list(zip(todo, fresh, strict=True)))
            found.update(zip(todo, fresh, strict=True))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Matrix:
        return self.inner.embed_query(text)
