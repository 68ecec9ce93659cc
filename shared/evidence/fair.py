"""A work queue that takes turns across callers (issue 26.7).

One FIFO per caller and a ring of callers with work: `get` serves the caller at the head of the
ring one item and moves it to the back. A caller with 3,000 queued items therefore delays
another caller's single item by at most one item, not by all of its own. `limit` bounds what one
caller may have waiting; past it `put` raises TooManyRequestsError (429 with Retry-After).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from evidence.errors import TooManyRequestsError

T = TypeVar("T")


class FairQueue(Generic[T]):
    def __init__(self, *, limit: int | None = None, what: str = "jobs") -> None:
        self.limit = limit
        self.what = what
        self._queues: dict[Hashable, deque[T]] = {}
        #: Items per caller, queued or taken and not yet `done` (a job between two turns counts).
        self._owned: dict[Hashable, int] = {}
        self._ring: deque[Hashable] = deque()
        self._ready = threading.Condition()

    def owned(self, caller: Hashable) -> int:
        with self._ready:
            return self._owned.get(caller, 0)

    def put(self, caller: Hashable, item: T, *, front: bool = False) -> None:
        """Queue a new `item` for `caller`; `front=True` queues one it took back (its next turn,
        before its other items), which is not counted again."""
        with self._ready:
            owned = self._owned.get(caller, 0)
            if not front:
                if self.limit is not None and owned >= self.limit:
                    raise TooManyRequestsError(
                        f"this caller already has {owned} {self.what} queued or running (the limit is "
                        f"{self.limit}); wait for one to finish, then send this again",
                        retry_after_s=5,
                    )
                self._owned[caller] = owned + 1
            queue = self._queues.get(caller)
            if queue is None:
                queue = self._queues[caller] = deque()
                self._ring.append(caller)
            if front:
                queue.appendleft(item)
            else:
                queue.append(item)
            self._ready.notify()

    def get(self, timeout: float | None = None) -> tuple[Hashable, T] | None:
        """The next caller's next item, or None after `timeout` seconds with nothing queued."""
        with self._ready:
            if not self._ring and not self._ready.wait_for(lambda: bool(self._ring), timeout):
                return None
            caller = self._ring.popleft()
            queue = self._queues[caller]
            item = queue.popleft()
            if queue:
                self._ring.append(caller)  # its next item waits for every other caller's turn
            else:
                del self._queues[caller]
            return caller, item

    def drain(self) -> list[tuple[Hashable, T]]:
        """Take every queued item at once (a shutdown); each still needs its `done`."""
        with self._ready:
            items = [(caller, item) for caller, queue in self._queues.items() for item in queue]
            self._queues.clear()
            self._ring.clear()
            return items

    def done(self, caller: Hashable) -> None:
        """An item `get` handed out is finished (it no longer counts against `caller`'s limit)."""
        with self._ready:
            left = self._owned.get(caller, 0) - 1
            if left > 0:
                self._owned[caller] = left
            else:
                self._owned.pop(caller, None)
