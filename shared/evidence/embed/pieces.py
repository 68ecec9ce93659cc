"""On-disk cache of texts' word-piece vectors (`MiniLMEmbedder.embed_tokens`), next to the store's
embedding cache: `<store>/pieces.sqlite3`.

The verbatim span scorer's `token_paraphrase` reads the word pieces of the dense model's 40 best
spans (`verbatim.span_rank.TokenCache`). Held in process only, every new process (each `evidence
eval`, each `evidence serve` worker, a restarted server) embedded them again: ~28 ms a span on a
loaded machine, +0.6 s p50 per question whose spans were new to the process. Here they are kept
by content hash (BLAKE2b-128 of the exact text), model and piece window, and scope (the index, as
the embedding cache scopes document vectors: what a query costs tells nothing about other
indexes), so any process on the same store reads what another computed.

Stored as float16, the dtype the in-process cache already holds them in, so a vector read here is
the vector the process would have computed and kept (the model's pieces do not depend on what
else is in the batch: tests/unit/embed/test_pieces.py). About 26 KB a span: the QA suite's 4,734
ranked spans average 34 pieces x 384 dimensions x 2 bytes (docs/verbatim.md, "The token-level
match"). int8 with a per-row scale would halve that, but it reordered the evidence of 4 of the
suite's 353 questions (`bench/token_cache.py answers --quantise int8`); float16 changes none.

Bounded: past `max_bytes` of vectors, the least recently used rows are deleted down to 90 % of
it. "Used" is the time a row was written or last read; a read refreshes it at most once per
`TOUCH_S`, so a steady state of repeated questions writes nothing. SQLite frees the pages of
deleted rows for reuse, so the file stays near the bound (it never shrinks without VACUUM).

Several processes: WAL (readers never wait; one writer at a time), opened and written as
`embeddings.sqlite3` and the store's records are (`sqlite_wal`: each write one transaction, whole
or not at all, so a process killed mid-write leaves a readable file). Every write is best effort:
a busy or full disk costs a re-embedding later, never the query. A file that is not a database
(or whose pages are found malformed) is moved aside to `pieces.sqlite3.corrupt` and a new one
started; a row whose vectors are not unit rows is ignored and recomputed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence.sqlite_wal import immediate, open_wal

#: Embeds texts into their contextual word-piece vectors (`MiniLMEmbedder.embed_tokens`: one
#: matrix per text, its first window's pieces, unit rows). Here, beside the pieces' cache: the
#: span scorer (`verbatim.span_rank`) reads the refusal signal (`verbatim.grounding`), so the
#: signal cannot import it from there.
EmbedTokens = Callable[[Sequence[str]], Sequence[Any]]


def asking_with(embed_tokens: EmbedTokens, question: str) -> EmbedTokens:
    """`embed_tokens` for a call that holds `question`: a store-backed cache keeps spans' pieces,
    not questions', so it gives its `asking(question)` view; any other embedder as it is."""
    asking = getattr(embed_tokens, "asking", None)
    return asking(question) if callable(asking) else embed_tokens


log = logging.getLogger(__name__)

#: A hot row's "used" time is refreshed at most this often (seconds): LRU at this granularity.
TOUCH_S = 3600
#: Eviction deletes down to this share of the bound, so it does not run again on the next write.
EVICT_TO = 0.9
#: How long a write waits for another process's write (seconds); past it, the write is skipped.
BUSY_S = 2.0
#: Rows of an IN (...) list (SQLite's default limit on host parameters is 999).
_CHUNK = 900

Pieces = npt.NDArray[np.float16]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pieces (scope TEXT NOT NULL, model TEXT NOT NULL, hash BLOB NOT NULL,"
    " rows INTEGER NOT NULL, dim INTEGER NOT NULL, vectors BLOB NOT NULL, bytes INTEGER NOT NULL,"
    " used INTEGER NOT NULL, PRIMARY KEY (scope, model, hash))",
    "CREATE INDEX IF NOT EXISTS pieces_used ON pieces (used)",
    "CREATE TABLE IF NOT EXISTS pieces_total (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO pieces_total VALUES (0, 0)",
    # The running total of the vectors' bytes, kept by the rows themselves (an INSERT OR REPLACE
    # fires the delete trigger too: recursive_triggers is on).
    "CREATE TRIGGER IF NOT EXISTS pieces_added AFTER INSERT ON pieces"
    " BEGIN UPDATE pieces_total SET bytes = bytes + NEW.bytes WHERE id = 0; END",
    "CREATE TRIGGER IF NOT EXISTS pieces_removed AFTER DELETE ON pieces"
    " BEGIN UPDATE pieces_total SET bytes = bytes - OLD.bytes WHERE id = 0; END",
)


def _damaged(exc: sqlite3.Error) -> bool:
    """The file itself is bad (not a busy or full disk): SQLite's own words for it."""
    text = str(exc)
    return isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text)


def _busy(exc: sqlite3.Error) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _valid(m: Pieces) -> bool:
    """A text's piece vectors as `embed_tokens` makes them: finite unit rows (float16 keeps a
    unit vector's norm within ~1e-3). Anything else is a damaged row."""
    if not len(m):
        return True
    if not np.isfinite(m).all():
        return False
    norms = np.linalg.norm(m.astype(np.float32), axis=1)
    return bool(np.all(np.abs(norms - 1.0) < 0.01))


class PieceCache:
    """Word-piece matrices by (scope, model, text hash) in one SQLite file, within `max_bytes`."""

    def __init__(self, path: Path, *, max_bytes: int, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._inode = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if _damaged(exc):
                self._set_aside(exc)
            else:  # busy past the wait (another process creating it): this process goes without
                log.warning("word-piece cache %s not opened: %s", path, exc)

    # --- the file -------------------------------------------------------------------------

    def _open(self) -> None:
        db = open_wal(self.path, busy_s=BUSY_S)
        try:
            db.execute("PRAGMA recursive_triggers=ON")
            made = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'pieces_removed'").fetchone()
            if not made:  # the schema, once per file (an opener of a made file takes no write lock)
                with immediate(db):
                    for statement in _SCHEMA:
                        db.execute(statement)
        except BaseException:
            db.close()
            raise
        self._db = db
        self._inode = os.stat(self.path).st_ino

    def _set_aside(self, exc: sqlite3.Error) -> None:
        """The file is damaged: move it aside (once per file: another process that found the same
        damage may have replaced it already) and start a new one; failing that, no disk cache in
        this process (the pieces are computed, as without it)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        log.warning("word-piece cache %s unusable (%s): starting a new one", self.path, exc)
        try:
            if not self._inode or os.stat(self.path).st_ino == self._inode:
                os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
                for suffix in ("-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self._open()
        except (OSError, sqlite3.Error) as again:
            log.warning("word-piece cache %s disabled in this process: %s", self.path, again)
            self._db = None

    def _failed(self, exc: sqlite3.Error, doing: str) -> None:
        # A write's transaction is rolled back by `immediate`; a read's (or a ROLLBACK that
        # failed) is ended here.
        if self._db is not None and self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.rollback()
        if _damaged(exc):
            self._set_aside(exc)
        else:
            log.warning("word-piece cache not %s: %s", doing, exc)

    # --- rows -----------------------------------------------------------------------------

    def get_many(self, scope: str, model: str, hashes: Sequence[bytes]) -> dict[bytes, Pieces]:
        """The stored matrices of those of `hashes` held (a damaged row counts as absent)."""
        out: dict[bytes, Pieces] = {}
        stale: list[bytes] = []
        with self._lock:
            if self._db is None or not hashes:
                return out
            now = int(self._clock())
            try:
                for start in range(0, len(hashes), _CHUNK):
                    part = list(hashes[start : start + _CHUNK])
                    marks = ",".join("?" * len(part))
                    for h, rows, dim, blob, used in self._db.execute(
                        "SELECT hash, rows, dim, vectors, used FROM pieces"
                        f" WHERE scope = ? AND model = ? AND hash IN ({marks})",
                        [scope, model, *part],
                    ):
                        if len(blob) != rows * dim * 2:
                            continue
                        m = np.frombuffer(blob, dtype=np.float16).reshape(rows, dim)
                        if not _valid(m):
                            continue
                        out[bytes(h)] = m
                        if used < now - TOUCH_S:
                            stale.append(bytes(h))
            except sqlite3.Error as exc:
                self._failed(exc, "read")
                return {}
            if stale:
                self._touch(scope, model, stale, now)
        return out

    def _touch(self, scope: str, model: str, hashes: Sequence[bytes], now: int) -> None:
        """Refresh rows' use, if the file is free right now: a read never waits for a writer
        (an hour's LRU granularity does not need this one)."""
        assert self._db is not None
        try:
            self._db.execute("PRAGMA busy_timeout = 0")
            with immediate(self._db):
                self._db.executemany(
                    "UPDATE pieces SET used = ? WHERE scope = ? AND model = ? AND hash = ?",
                    [(now, scope, model, h) for h in hashes],
                )
        except sqlite3.Error as exc:
            if not _busy(exc):
                self._failed(exc, "refreshed")
        finally:
            # Best effort as the rest: a read that found its rows must not fail on the way out.
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_S * 1000)}")

    def put_many(self, scope: str, model: str, items: Sequence[tuple[bytes, npt.ArrayLike]]) -> None:
        """Store matrices (as float16), then evict past the bound. Best effort."""
        rows = []
        now = int(self._clock())
        for h, m in items:
            a = np.ascontiguousarray(np.asarray(m, dtype=np.float16))
            if a.ndim != 2:
                continue
            blob = a.tobytes()
            rows.append((scope, model, h, a.shape[0], a.shape[1], blob, len(blob), now))
        with self._lock:
            if self._db is None or not rows:
                return
            try:
                with immediate(self._db):
                    self._db.executemany(
                        "INSERT OR REPLACE INTO pieces VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
                    )
                    self._evict()
            except sqlite3.Error as exc:
                self._failed(exc, "written")

    def _evict(self) -> None:
        assert self._db is not None
        (total,) = self._db.execute("SELECT bytes FROM pieces_total WHERE id = 0").fetchone()
        if total <= self.max_bytes:
            return
        excess = total - int(self.max_bytes * EVICT_TO)
        doomed: list[int] = []
        for rowid, size in self._db.execute("SELECT rowid, bytes FROM pieces ORDER BY used, rowid"):
            if excess <= 0:
                break
            doomed.append(rowid)
            excess -= size
        for start in range(0, len(doomed), _CHUNK):
            part = doomed[start : start + _CHUNK]
            self._db.execute(f"DELETE FROM pieces WHERE rowid IN ({','.join('?' * len(part))})", part)

    def drop_scope(self, scope: str) -> None:
        """Forget a scope's pieces (its index was deleted)."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute("DELETE FROM pieces WHERE scope = ?", (scope,))
            except sqlite3.Error as exc:
                self._failed(exc, "cleared")

    def stored_bytes(self) -> int:
        """The vectors' bytes held now (the bound is on this; the file adds SQLite's pages)."""
        with self._lock:
            if self._db is None:
                return 0
            (total,) = self._db.execute("SELECT bytes FROM pieces_total WHERE id = 0").fetchone()
            return int(total)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class ScopedPieces:
    """One scope and model of a `PieceCache`: what `verbatim.span_rank.TokenCache` reads through."""

    def __init__(self, cache: PieceCache, *, scope: str, model: str) -> None:
        self.cache = cache
        self.scope = scope
        self.model = model

    def get_many(self, hashes: Sequence[bytes]) -> dict[bytes, Pieces]:
        return self.cache.get_many(self.scope, self.model, hashes)

    def put_many(self, items: Sequence[tuple[bytes, npt.ArrayLike]]) -> None:
        self.cache.put_many(self.scope, self.model, items)
