"""One retry policy for every remote call: attempts, exponential backoff with jitter, Retry-After,
and a deadline.

A request has one deadline (`deadline_scope`): the API resolver opens it from the Lambda's
remaining time (or `Settings.request_deadline_s` for `evidence serve`), and every remote call
made while serving the request (OpenSearch, Cohere) clamps its timeouts to it and stops retrying
when the next wait would pass it. Giving up early with a typed error beats API Gateway's 504.

Callers classify failures themselves (`classify` returns `Retry` or None): what is transient
differs per remote, the loop does not.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """`retries` after the first attempt; waits grow base·2^attempt up to `max_s`, each drawn in
    [half, full] (jitter spreads a fleet's retries); a server's Retry-After wins, capped at `max_s`."""

    retries: int = 3
    base_s: float = 0.5
    max_s: float = 8.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.base_s < 0 or self.max_s < 0:
            raise ValueError("Backoff: retries, base_s and max_s must be >= 0")

    def delay(
        self, attempt: int, retry_after_s: float | None = None, *, rng: Callable[[], float] = random.random
    ) -> float:
        if retry_after_s is not None and math.isfinite(retry_after_s):
            return min(max(retry_after_s, 0.0), self.max_s)
        base = min(self.base_s * 2.0 ** min(attempt, 62), self.max_s)
        return base * (0.5 + rng() / 2)


@dataclass(frozen=True, slots=True)
class Deadline:
    """An absolute point on the monotonic clock."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + max(seconds, 0.0))

    def remaining(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def clamp(self, timeout_s: float) -> float:
        """A per-attempt timeout that never outlives the deadline."""
        return max(min(timeout_s, self.remaining()), 0.0)


_current: ContextVar[Deadline | None] = ContextVar("evidence_deadline", default=None)


@contextmanager
def deadline_scope(seconds: float | None) -> Iterator[Deadline | None]:
    """Bound everything remote inside the block by `seconds` (None: no bound). Nested scopes
    keep the earlier deadline."""
    outer = _current.get()
    scope = None if seconds is None else Deadline.after(seconds)
    if outer is not None and (scope is None or outer.at < scope.at):
        scope = outer
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def current_deadline() -> Deadline | None:
    return _current.get()


def check_deadline(doing: str) -> None:
    """DeadlineExceededError (503) once the current deadline has passed: long local work (parsing,
    embedding) looks between its steps, as remote calls do through their timeouts."""
    deadline = _current.get()
    if deadline is not None and deadline.expired:
        from evidence.errors import DeadlineExceededError

        raise DeadlineExceededError(
            f"the request's deadline passed while {doing}; nothing was written. Large documents are "
            "indexed in the background by evidence serve (EVIDENCE_ASYNC_UPLOAD_BYTES); elsewhere, "
            "split the document or raise EVIDENCE_REQUEST_DEADLINE_S",
            retry_after_s=1,
        )


@dataclass(frozen=True, slots=True)
class Retry:
    """`classify`'s verdict that a failure is transient; `after_s` is the server's Retry-After."""

    after_s: float | None = None


class RetriesExhausted(Exception):
    """A transient failure outlasted the attempts or the deadline; `__cause__` is the last one."""

    def __init__(self, cause: BaseException, *, attempts: int, deadline_reached: bool, retry_after_s: float):
        super().__init__(str(cause))
        self.cause = cause
        self.attempts = attempts
        self.deadline_reached = deadline_reached
        #: When a caller might try again (for a Retry-After header), in whole seconds >= 1.
        self.retry_after_s = max(1, math.ceil(retry_after_s))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (HTTP-date values are not worth the parse here: None)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def call_with_retries(
    fn: Callable[[int], T],
    *,
    backoff: Backoff,
    classify: Callable[[Exception], Retry | None],
    deadline: Deadline | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[Exception, int, float], None] | None = None,
) -> T:
    """`fn(attempt)` until it returns. A failure `classify` does not call transient propagates as
    is; a transient one is retried after `backoff.delay`, unless the attempts are used up or the
    wait would end past `deadline`, in which case `RetriesExhausted` is raised from it."""
    attempt = 0
    while True:
        if deadline is not None and deadline.expired:
            # Nothing left to spend (a slow earlier step used it): fail fast, no request.
            late = TimeoutError("the request's deadline passed before this call could be made")
            raise RetriesExhausted(
                late, attempts=attempt, deadline_reached=True, retry_after_s=backoff.base_s
            )
        try:
            return fn(attempt)
        except Exception as exc:
            verdict = classify(exc)
            if verdict is None:
                raise
            delay = backoff.delay(attempt, verdict.after_s)
            out_of_time = deadline is not None and deadline.remaining() <= delay
            if attempt >= backoff.retries or out_of_time:
                raise RetriesExhausted(
                    exc,
                    attempts=attempt + 1,
                    deadline_reached=out_of_time and attempt < backoff.retries,
                    retry_after_s=max(delay, verdict.after_s or 0.0),
                ) from exc
            if on_retry is not None:
                on_retry(exc, attempt + 1, delay)
            sleep(delay)
            attempt += 1
