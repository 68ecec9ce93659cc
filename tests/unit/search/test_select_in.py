"""`select_in`: keys past SQLite's bound-parameter limit are asked in batches, none lost or repeated."""

from __future__ import annotations

import sqlite3

from evidence.search.store_records import IN_BATCH, select_in


def test_keys_across_several_batches_each_come_back_once_with_trailing_params() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, flag INTEGER)")
    n = 2 * IN_BATCH + 7  # three batches, the last a short one
    db.executemany("INSERT INTO t VALUES (?, ?)", [(k, k % 2) for k in range(n + 50)])
    keys = list(range(n))
    rows = list(select_in(db, "SELECT k FROM t WHERE k IN ({marks}) AND flag = ?", keys, 1))
    assert sorted(r[0] for r in rows) == [k for k in keys if k % 2 == 1]


def test_no_keys_asks_nothing() -> None:
    db = sqlite3.connect(":memory:")
    assert list(select_in(db, "SELECT 1 FROM missing_table WHERE k IN ({marks})", [])) == []
