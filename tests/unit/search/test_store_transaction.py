"""The stores' write transaction (`sqlite_wal.immediate`): committed whole or not at all, and a
failure inside it surfaces as itself."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from evidence.sqlite_wal import immediate


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(tmp_path / "t.sqlite3", isolation_level=None)) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        yield conn


def test_a_block_that_finishes_is_committed(db: sqlite3.Connection, tmp_path: Path) -> None:
    with immediate(db):
        assert db.in_transaction
        db.execute("INSERT INTO t VALUES (1)")
    assert not db.in_transaction
    with closing(sqlite3.connect(tmp_path / "t.sqlite3")) as other:
        assert other.execute("SELECT x FROM t").fetchall() == [(1,)]


def test_a_block_that_raises_is_rolled_back_and_its_error_surfaces(db: sqlite3.Connection) -> None:
    with pytest.raises(KeyError), immediate(db):
        db.execute("INSERT INTO t VALUES (1)")
        raise KeyError("boom")
    assert not db.in_transaction
    assert db.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)


def test_a_transaction_sqlite_already_ended_is_not_rolled_back_twice(db: sqlite3.Connection) -> None:
    # As after SQLITE_FULL: the transaction is gone when the error reaches the block's end, and a
    # second ROLLBACK ("no transaction is active") would replace the cause.
    with pytest.raises(ValueError, match="the cause"), immediate(db):
        db.execute("INSERT INTO t VALUES (1)")
        db.execute("ROLLBACK")
        raise ValueError("the cause")
    assert db.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
