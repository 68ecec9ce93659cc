"""WAL mode on a SQLite file that other processes may be opening at the same moment."""

from __future__ import annotations

import sqlite3
import time


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
