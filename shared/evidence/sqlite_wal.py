"""SQLite files that several processes open at once: the store's records (`search/store_records.py`),
its embedding cache (`embed/cache.py`) and its word-piece cache (`embed/pieces.py`).

Each is opened the same way (`open_wal`: WAL, so readers never wait for the one writer, and
`synchronous=NORMAL`: a commit survives a crash of the process, and the last ones may be lost to
a power cut, never the file) and written the same way (`immediate`: one transaction that takes
the write lock at its start and is committed whole or not at all).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def enable_wal(db: sqlite3.Connection, timeout_s: float = 60.0) -> None:
    """`PRAGMA journal_mode=WAL`, retried while another process holds the file: turning a new
    file to WAL takes an exclusive lock, and SQLite may answer "database is locked" at once
    there instead of waiting out the busy timeout (two `serve --workers` workers opening a new
    store together: one of them failed to start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # the other opener's exclusive lock lasts milliseconds


def open_wal(path: Path, *, busy_s: float, page_size: int | None = None) -> sqlite3.Connection:
    """A connection to `path` in WAL mode with `synchronous=NORMAL`, shared by the caller's threads
    (under its own lock), in autocommit (`isolation_level=None`: transactions are `immediate`'s).
    `busy_s`: how long a statement waits for another process's write lock. `page_size` is set
    before anything else, so a new file takes it (an existing one keeps its own). The connection
    is closed if any of this fails."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_s)
    try:
        if page_size is not None:
            db.execute(f"PRAGMA page_size={int(page_size)}")
        enable_wal(db)
        db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


@contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction on an autocommit connection (`isolation_level=None`): BEGIN IMMEDIATE
    takes the write lock at once, COMMIT at the block's end. Whatever the block raises rolls it
    back, unless SQLite rolled back by itself (SQLITE_FULL), where a second ROLLBACK would raise
    and hide the cause."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
