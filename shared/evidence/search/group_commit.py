"""Group commit: writes that arrive while another is committing are committed together.

A write to the embedded store costs a fixed part (a SQLite transaction, then a tantivy commit
per chunk kind, with its merge) and a part per document. Measured on the SciFact load store,
the fixed part is nearly all of it: one document 50-200 ms, eight documents 58-134 ms, on a
busy 2-core machine (RELIABILITY.md, "Load"). Concurrent writes took turns on the writer's
lock, each paying the fixed part. Here the first caller to find no batch in flight leads:
it takes every write queued so far and runs them as one batch; callers that arrive meanwhile
queue and the first of them leads the next batch. Nobody waits on a timer: a write alone is
committed at once, as before.

Each caller gets its own outcome: a result, or the exception its own item raised (the batch
function isolates items; see `IndexStore._commit_group`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    __slots__ = ("done", "item", "outcome")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.outcome: R | BaseException | None = None


class GroupCommit(Generic[T, R]):
    """Run `batch(items)` for the items of callers that arrive while a batch is in flight."""

    def __init__(self, batch: Callable[[list[T]], Sequence[R | BaseException]]) -> None:
        self._batch = batch
        self._cond = threading.Condition()
        self._queue: list[_Slot[T, R]] = []
        self._busy = False
        #: Batches run and items in them, since start (tests and benchmarks read them).
        self.batches = 0
        self.items = 0

    def waiting(self) -> int:
        """Items queued behind the batch in flight."""
        with self._cond:
            return len(self._queue)

    def submit(self, item: T) -> R:
        slot: _Slot[T, R] = _Slot(item)
        with self._cond:
            self._queue.append(slot)
            while self._busy and not slot.done:
                self._cond.wait()
            if not slot.done:  # no batch in flight and this item still queued: lead the next one
                batch, self._queue = self._queue, []
                self._busy = True
        if not slot.done:
            self._lead(batch)
        outcome = slot.outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]  # done: a result of type R

    def _lead(self, batch: list[_Slot[T, R]]) -> None:
        try:
            outcomes: Sequence[R | BaseException] = self._batch([s.item for s in batch])
            if len(outcomes) != len(batch):
                raise AssertionError(f"{len(outcomes)} outcomes for {len(batch)} writes")
        except BaseException as exc:  # the whole batch failed (a full disk, an interrupt): all of it
            outcomes = [exc] * len(batch)
        with self._cond:
            for slot, outcome in zip(batch, outcomes, strict=True):
                slot.outcome = outcome
                slot.done = True
            self.batches += 1
            self.items += len(batch)
            self._busy = False
            self._cond.notify_all()
