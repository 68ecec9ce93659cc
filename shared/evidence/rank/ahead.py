"""Work started ahead of its use, on one small pool of threads per process.

A retrieve's parts wait on native code that releases the GIL: onnxruntime embedding the query,
tantivy's BM25 search, faiss's IVF scan, SQLite reads. Run one after another they add up; the
first stage overlaps them instead (docs/scale.md, "Overlapping the legs"): the lexical leg runs
while the query is embedded, the dense leg does not wait for it, and the stored vectors of the
lexical hits are read as soon as it ends, while the dense leg searches.

`Ahead(fn)` submits `fn` to the pool; `result()` returns what it returned or raises what it
raised (the same exception object, so an error surfaces as it did when the work ran inline). When
no pool thread has started it yet (the pool busy with other requests' work), `result()` runs it
on the caller's thread instead of waiting in the queue: overlap is an optimisation, never a wait
a sequential run would not have had.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from evidence.rank.context import RankContext

T = TypeVar("T")

#: The pool of this process, by pid: a forked child finds its parent's entry and builds its own.
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """The process's pool, built on first use (never at import). A forked child (`serve --workers`)
    gets its own: threads do not survive a fork, and a copied pool would queue work forever."""
    pid = os.getpid()
    with _POOLS_LOCK:
        found = _POOLS.get(pid)
        if found is None:
            _POOLS.clear()  # a parent's, copied by fork: its threads are not in this process
            # Its threads mostly wait in native code; one per core plus one keeps both legs of a
            # couple of concurrent requests moving, and a busy pool costs nothing (`Ahead.result`).
            found = _POOLS[pid] = ThreadPoolExecutor(
                max_workers=(os.cpu_count() or 1) + 1, thread_name_prefix="ahead"
            )
        return found


class Ahead(Generic[T]):
    """`fn()` started on the pool now; its result later (`result`), or nothing (`abandon`).

    `key` says what the work was started for: a consumer uses the result only when its own key is
    equal (`matches`), so work started for other inputs is never mistaken for its own."""

    def __init__(self, fn: Callable[[], T], key: object = None) -> None:
        self.key = key
        self._fn = _Once(fn)
        # The caller's context (a deadline scope, a request id) holds on the pool thread too.
        self._future: Future[T] = pool().submit(contextvars.copy_context().run, self._fn)

    def matches(self, key: object) -> bool:
        return bool(self.key == key)

    def result(self) -> T:
        """What `fn` returned, or the exception it raised; run here if no thread had started it.
        Any number of threads may ask: `fn` runs once, and each gets its outcome (work chained
        on another `Ahead` asks for that one's result on a pool thread, its consumer too)."""
        if self._future.cancel():
            return self._fn()
        try:
            return self._future.result()
        except CancelledError:  # cancelled by `abandon` on another thread: do the work here
            return self._fn()

    def abandon(self) -> None:
        """Not needed after all (an earlier step failed): cancel it, or wait for it to end so no
        read outlives its request (its result or error is dropped)."""
        if not self._future.cancel():
            with contextlib.suppress(CancelledError):
                self._future.exception()


class _Once(Generic[T]):
    """`fn` run at most once, by whichever thread calls first; later callers wait for it and get
    the same value or the same exception object."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None

    def __call__(self) -> T:
        with self._lock:
            if not self._done:
                try:
                    self._value = self._fn()
                except BaseException as exc:
                    self._error = exc
                self._done = True
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


@runtime_checkable
class StartsEarly(Protocol):
    """A recall stage with work it can start before the query is embedded (`Profile.start`)."""

    def start(self, ctx: RankContext) -> Ahead[Any] | None: ...


__all__ = ["Ahead", "StartsEarly", "pool"]
