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
        self._ring: deque[Hashable] = deque()
        self._ready = threading.Condition()

    def pending(self, caller: Hashable) -> int:
        with self._ready:
            return len(self._queues.get(caller, ()))

    def put(self, caller: Hashable, item: T, *, front: bool = False) -> None:
        """Queue `item` for `caller` (`front`: before its other items, a job taking its next turn)."""
        with self._ready:
            queue = self._queues.get(caller)
            if not front and self.limit is not None and queue is not None and len(queue) >= self.limit:
                raise TooManyRequestsError(
                    f"this caller already has {len(queue)} {self.what} waiting (the limit is "
                    f"{self.limit}); wait for one to finish, then send this again",
                    retry_after_s=5,
                )
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
