"""Document embedding in a worker process at a lower OS priority, for `evidence serve`.

Under mixed load the server's reads and writes shared one onnxruntime session and the same two
cores: a query's embedding queued behind documents' batches, and an upload's 256-token batches
took the cores a retrieve needed (RELIABILITY.md, "Load"). Here, documents go to one worker
process started at `write_nice`; the kernel gives a retrieve's threads the cores first, and the
worker has them whenever reads leave them idle. Queries are embedded in the server, as before.

A process, not a niced thread: a low-priority thread that holds the GIL when the kernel
preempts it stalls every request thread until it runs again. The worker holds its own model
(~100 MB resident, more while it embeds long passages), the price of that isolation.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

import numpy as np

from evidence.embed.base import Matrix

if TYPE_CHECKING:
    from evidence.config import Settings
    from evidence.embed.base import Embedder

#: The worker's own embedder (one slot), built once by `_start` in the worker process.
_worker: list[Embedder] = []


def lower_priority(nice: int) -> None:
    """Run this thread, and the threads it starts from now on, at niceness `nice` at least
    (Linux: niceness is per thread and inherited). Idempotent; it never raises the priority."""
    current = os.nice(0)
    if nice > current:
        os.nice(nice - current)


def _start(nice: int, build: Callable[[], Embedder], parent: int) -> None:
    """In the worker, before onnxruntime starts its threads: they inherit the niceness."""
    from evidence.lifetime import exit_with_parent

    lower_priority(nice)
    exit_with_parent(parent)  # a server killed outright (or a replaced `serve --workers` worker)
    _worker.append(build())


def _embed(texts: Sequence[str]) -> Matrix:
    return _worker[0].embed_documents(texts)


class BackgroundDocuments:
    """An Embedder: `embed_documents` in one worker process at `nice`, `embed_query` in this one.

    One worker: writes already take turns on the store's write lock, and a second model would
    double the memory for nothing the cores could give. A worker that dies (killed, out of
    memory) is replaced on the next call, and that call is tried once more."""

    def __init__(self, inner: Embedder, *, build: Callable[[], Embedder], nice: int) -> None:
        """`inner` embeds queries here; `build` (picklable) makes the worker's embedder, the same
        model as `inner`."""
        self.inner = inner
        self.build = build
        self.nice = nice
        self.model_id = inner.model_id
        self.document_rule = getattr(inner, "document_rule", "")
        self.dimension = inner.dimension
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                import multiprocessing

                # spawn: forking a process with request and onnxruntime threads running is unsafe.
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start,
                    initargs=(self.nice, self.build, os.getpid()),
                )
            return self._pool

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                self._pool = None
        broken.shutdown(wait=False, cancel_futures=True)

    @property
    def started(self) -> bool:
        """Whether the worker process exists. It starts with the first document to embed, not
        with `evidence serve`: a server that only reads never pays its process and model."""
        with self._lock:
            return self._pool is not None

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        for attempt in range(2):
            pool = self._executor()
            try:
                return pool.submit(_embed, list(texts)).result()
            except BrokenProcessPool:
                self._replace(pool)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def embed_query(self, text: str) -> Matrix:
        return self.inner.embed_query(text)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def serving_embedder(settings: Settings) -> tuple[Embedder | None, BackgroundDocuments | None]:
    """`evidence serve`'s embedder (with the store's embedding cache in front, as the service
    builds it) and its worker; (None, None) when `write_nice` is 0 or the embedder is remote."""
    from evidence.config import EmbedderKind

    if not settings.write_nice or settings.embedder is not EmbedderKind.MINILM:
        return None, None
    from functools import partial

    from evidence.embed.factory import build_embedder, with_store_cache

    background = BackgroundDocuments(
        build_embedder(settings), build=partial(build_embedder, settings), nice=settings.write_nice
    )
    return with_store_cache(settings, background), background
