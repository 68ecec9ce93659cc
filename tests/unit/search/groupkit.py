"""Writes grouped on purpose: the first is held inside its commit (its tantivy sync) until the
others have queued behind it, so a test of group commit does not depend on timing. Used by
`test_group_commit` and by the functional serve test that groups writes over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest

from evidence.search.embedded import IndexStore


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _queued(store: IndexStore, n: int) -> bool:
    return bool(store._group.waiting() == n)


@contextmanager
def grouped(
    store: IndexStore,
    monkeypatch: pytest.MonkeyPatch,
    first: Callable[[], Any],
    rest: list[Callable[[], Any]],
) -> Iterator[list[Any]]:
    """Run `first` and hold it in its commit (its tantivy sync) until every one of `rest` has
    queued behind it, in the order given; then let all run. Yields the outcomes (a result or the
    exception), in order."""
    held, release = threading.Event(), threading.Event()
    sync = store.sync_pending

    def gated() -> int:
        if not held.is_set():
            held.set()
            assert release.wait(60), "the test never released the first write"
        return sync()

    monkeypatch.setattr(store, "sync_pending", gated)
    outcomes: list[Any] = [None] * (1 + len(rest))

    def run(i: int, call: Callable[[], Any]) -> None:
        try:
            outcomes[i] = call()
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(0, first))]
    threads[0].start()
    try:
        assert held.wait(30)
        for i, call in enumerate(rest, start=1):
            threads.append(threading.Thread(target=run, args=(i, call)))
            threads[-1].start()
            # One at a time: threads started together queue in any order, and the group commits
            # them in the order they queued (a delete may otherwise run before its upsert).
            wait_for(partial(_queued, store, i), f"write {i} to queue")
    finally:
        release.set()
        for t in threads:
            t.join(60)
    yield outcomes
