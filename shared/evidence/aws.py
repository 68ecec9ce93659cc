"""AWS clients built on first use, and the one Bedrock Converse call.

No client is built at import time (a Lambda cold start pays only for what a request uses), and
a client is built once even when threads race for it. boto3 and botocore are imported inside the
builders, so importing this module costs nothing.

`Converse` is shared by the coach's LLM steps and the verbatim planner: the request shape and the
reading of the answer stay with each caller, the client, its timeouts and the bounded wait live
here. `within` runs the call on a worker thread and stops waiting at the budget (botocore's read
timeout is set to the client's timeout, so the abandoned call ends soon after).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value built by `factory` on first `get()`, once, under a lock; or the one given."""

    def __init__(self, factory: Callable[[], T], value: T | None = None) -> None:
        self._factory = factory
        self._value = value
        self._lock = threading.Lock()

    @property
    def built(self) -> T | None:
        """The value if it exists yet (never builds it)."""
        return self._value

    def set(self, value: T) -> None:
        """Use `value` from now on (a test's stubbed client)."""
        with self._lock:
            self._value = value

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._factory()
            return self._value


def boto3_client(service: str, *, region: str | None, timeout_s: float, max_attempts: int = 1) -> Any:
    """A boto3 client whose connect and read timeouts are `timeout_s`, in botocore's standard
    retry mode; botocore reads `max_attempts` as retries after the first try."""
    import boto3
    from botocore.config import Config

    # The service is a runtime string here; boto3's stubs type each service name separately.
    build: Any = boto3.client
    return build(
        service,
        region_name=region,
        config=Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            retries={"max_attempts": max_attempts, "mode": "standard"},
        ),
    )


def lazy_boto3_client(
    service: str, *, region: str | None, timeout_s: float, max_attempts: int = 1, client: Any = None
) -> Lazy[Any]:
    """`boto3_client(...)` on first use; `client` (a test's stub) is used as is."""
    return Lazy(
        lambda: boto3_client(service, region=region, timeout_s=timeout_s, max_attempts=max_attempts),
        client,
    )


_POOLS: dict[str, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def worker_pool(name: str, max_workers: int = 4) -> ThreadPoolExecutor:
    """One named worker pool per process, built on first use."""
    with _POOLS_LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = _POOLS[name] = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)
        return pool


class Converse:
    """Bedrock Converse (`bedrock-runtime`) with one attempt per call and a hard time budget."""

    def __init__(
        self, *, region: str | None, timeout_s: float, client: Any = None, pool: str = "bedrock-converse"
    ) -> None:
        self.timeout_s = timeout_s
        self._pool = pool
        self._client = lazy_boto3_client("bedrock-runtime", region=region, timeout_s=timeout_s, client=client)

    def use(self, client: Any) -> None:
        """Send calls through `client` from now on (a test's stubbed client)."""
        self._client.set(client)

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """The response of one Converse call, on this thread (botocore's errors propagate)."""
        response: dict[str, Any] = self._client.get().converse(**request)
        return response

    def within(self, work: Callable[[], T], budget_s: float) -> T:
        """`work()` (which calls `call`) on a worker thread, waited for at most `budget_s`.

        Raises `concurrent.futures.TimeoutError` past the budget (the pending call is cancelled if
        it has not started) and whatever `work` raises otherwise.
        """
        future = worker_pool(self._pool).submit(work)
        try:
            return future.result(timeout=budget_s)
        except TimeoutError:
            future.cancel()
            raise
