"""Document embedding in a worker process at a lower OS priority, for `evidence serve`.

Under mixed load the server's reads and writes shared one onnxruntime session and the same two
cores: a query's embedding queued behind documents' batches, and an upload's 256-token batches
took the cores a retrieve needed (RELIABILITY.md, "Load"). Here, documents go to one worker
process started at `write_nice`; the kernel gives a retrieve's threads the cores first, and the
worker has them whenever reads leave them idle. Queries are embedded in the server, as before.

A process, not a niced thread: a low-priority thread that holds the GIL when the kernel
preempts it stalls every request thread until it runs again. The worker holds its own model
(~100 MB resident, more while it embeds long passages), the price of that isolation.

`serve --workers N` has one such process for all its workers (`SharedEmbedding`, started by the
supervisor; the workers reach it over a Unix socket through `SharedDocuments`): one per worker
doubled the model's memory and put two niced embedders on the same two cores, for no more
embedding than the cores give one (RELIABILITY.md, "Worker processes").
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evidence.embed.base import Matrix, PieceEmbedder
from evidence.errors import ServiceUnavailableError

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from evidence.config import Settings
    from evidence.embed.base import Embedder

#: How long a serving worker waits for the shared embedding process to accept a connection: it
#: is starting, or the supervisor is starting another after it died.
CONNECT_WAIT_S = 60.0

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


def _embed_late(texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]]) -> Late:
    return _worker[0].embed_documents_and_late(texts, ranges)  # type: ignore[attr-defined,no-any-return]


#: What `embed_documents_and_late` returns: the texts' vectors and each range's late vector.
Late = tuple[Matrix, list[list[Matrix | None]]]


class _DocumentsElsewhere:
    """An Embedder whose documents are embedded in another process (`_embed_elsewhere`) and whose
    queries are embedded here, by `inner`, the same model.

    When `inner` gives word pieces (a `PieceEmbedder`: a local MiniLM, the one model embedded
    apart), so does this, here, by `inner`: the span scorer's pieces, and a span's vector with its
    pieces from one pass when neither is cached (`CachedEmbedder.embed_with_pieces`,
    docs/verbatim.md#one-pass). That is query-time work, run where the query's own pass runs;
    only the vector of a span whose pieces are cached, a heading's, and every upload's passages
    go to the other process."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.document_rule = getattr(inner, "document_rule", "")
        self.dimension = inner.dimension
        if isinstance(inner, PieceEmbedder):
            # attributes, not methods: without them this is no `PieceEmbedder` (isinstance)
            self.piece_key = inner.piece_key
            self.embed_tokens = inner.embed_tokens
            self.embed_documents_and_tokens = inner.embed_documents_and_tokens

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return self._embed_elsewhere(list(texts))

    def _embed_elsewhere(self, texts: list[str]) -> Matrix:
        raise NotImplementedError

    def embed_query(self, text: str) -> Matrix:
        return self.inner.embed_query(text)

    @property
    def late_capable(self) -> bool:
        """Whether the model (the same here and in the other process) gives late-chunked span
        vectors (`EVIDENCE_EMBED_SPANS_AT_INDEX=late`, `embed.late`)."""
        from evidence.embed.base import LateEmbedder

        return isinstance(self.inner, LateEmbedder)

    def first_window_chars(self, texts: Sequence[str], *, keep: bool = True) -> list[int]:
        """The tokenizer's answer (`MiniLMEmbedder.first_window_chars`), here: no model runs. The
        encodings are not kept: the pass that would take them runs in the other process, which
        tokenizes the texts itself."""
        return self.inner.first_window_chars(texts, keep=False)  # type: ignore[attr-defined,no-any-return]

    def embed_documents_and_late(
        self, texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]]
    ) -> Late:
        """`MiniLMEmbedder.embed_documents_and_late` in the other process."""
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32), []
        return self._late_elsewhere(list(texts), [list(r) for r in ranges])

    def _late_elsewhere(self, texts: list[str], ranges: list[list[tuple[int, int]]]) -> Late:
        raise NotImplementedError


class BackgroundDocuments(_DocumentsElsewhere):
    """An Embedder: `embed_documents` in one worker process at `nice`, `embed_query` in this one.

    One worker: writes already take turns on the store's write lock, and a second model would
    double the memory for nothing the cores could give. A worker that dies (killed, out of
    memory) is replaced on the next call, and that call is tried once more."""

    def __init__(self, inner: Embedder, *, build: Callable[[], Embedder], nice: int) -> None:
        """`inner` embeds queries here; `build` (picklable) makes the worker's embedder, the same
        model as `inner`."""
        super().__init__(inner)
        self.build = build
        self.nice = nice
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

    def _embed_elsewhere(self, texts: list[str]) -> Matrix:
        out: Matrix = self._in_worker(_embed, texts)
        return out

    def _late_elsewhere(self, texts: list[str], ranges: list[list[tuple[int, int]]]) -> Late:
        out: Late = self._in_worker(_embed_late, texts, ranges)
        return out

    def _in_worker(self, fn: Callable[..., object], *args: object) -> Any:
        for attempt in range(2):
            pool = self._executor()
            try:
                return pool.submit(fn, *args).result()
            except BrokenProcessPool:
                self._replace(pool)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


# --- one embedding process for every worker of `serve --workers N` ---------------------------


def _serve_embeddings(
    *, address: str, authkey: bytes, nice: int, build: Callable[[], Embedder], parent: int, concurrency: int
) -> None:
    """The shared embedding process: a request is one connection (the texts in, ("ok", matrix)
    or ("error", exception) out). Up to `concurrency` requests (one per serving worker, as
    when each worker had its own process) run at once on the one model: onnxruntime sessions
    take concurrent runs, and one upload's few short batches leave the cores idle between
    operators. The model is built on the first request: a server that only reads never loads it."""
    import signal

    from evidence.lifetime import die_with_parent

    # The supervisor starts this process with SIGTERM, SIGINT and SIGCHLD blocked (it takes them
    # with sigtimedwait), and exec keeps a signal mask: left blocked, the supervisor's SIGTERM would
    # stay pending until its SIGKILL, STOP_GRACE_S later, and every stop would take that long.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD})
    die_with_parent(parent)  # started by the supervisor's main thread, which lives as long as it
    lower_priority(nice)  # before onnxruntime starts its threads: they inherit it
    listener = Listener(address, family="AF_UNIX", authkey=authkey)
    model: list[Embedder] = []
    building = threading.Lock()
    turns = threading.BoundedSemaphore(max(1, concurrency))

    def answer(conn: Connection) -> None:
        with conn:
            try:
                texts = conn.recv()
            except (EOFError, OSError):
                return
            reply: tuple[str, object]
            try:
                with turns:
                    with building:
                        if not model:
                            model.append(build())
                    if isinstance(texts, tuple):  # ("late", texts, ranges): `embed_documents_and_late`
                        late = model[0].embed_documents_and_late  # type: ignore[attr-defined]
                        reply = ("ok", late(texts[1], texts[2]))
                    else:
                        reply = ("ok", model[0].embed_documents(texts))
            except Exception as exc:  # the caller's to raise, as if it had embedded itself
                reply = ("error", exc)
            try:
                conn.send(reply)
            except (OSError, ValueError):
                pass  # the caller went away
            except Exception as exc:  # an exception that does not pickle
                conn.send(("error", RuntimeError(f"embedding failed: {exc!r}")))

    while True:
        try:
            conn = listener.accept()
        except OSError:  # a client that failed the handshake
            continue
        threading.Thread(target=answer, args=(conn,), name="embed", daemon=True).start()


class SharedEmbedding:
    """The supervisor's handle on the shared embedding process: a private directory holds its
    Unix socket, a random key authenticates the workers (they inherit it by fork)."""

    def __init__(self, build: Callable[[], Embedder], nice: int, concurrency: int = 1) -> None:
        self.build = build
        self.nice = nice
        self.concurrency = concurrency
        self.directory = Path(tempfile.mkdtemp(prefix="evidence-embed-"))  # mode 0700
        self.address = str(self.directory / "socket")
        self.authkey = os.urandom(32)
        self.process: BaseProcess | None = None

    def prepare(self) -> None:
        """Start multiprocessing's resource tracker, which every spawn needs: it unblocks SIGINT
        and SIGTERM in the process that starts it, so the supervisor starts it before it blocks
        them for `sigtimedwait`."""
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()

    def start(self) -> int:
        """Start the process (again, after it died); its pid. Spawned, not forked, and from the
        supervisor, which runs no thread."""
        import multiprocessing

        with_socket = Path(self.address)
        with_socket.unlink(missing_ok=True)  # a dead process's socket
        self.process = multiprocessing.get_context("spawn").Process(
            target=_serve_embeddings,
            kwargs={
                "address": self.address,
                "authkey": self.authkey,
                "nice": self.nice,
                "build": self.build,
                "parent": os.getpid(),
                "concurrency": self.concurrency,
            },
            name="evidence-embed",
            daemon=False,
        )
        self.process.start()
        assert self.process.pid is not None
        return self.process.pid

    def close(self) -> None:
        """Remove the socket's directory (the supervisor stops and reaps the process itself)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def client(self, inner: Embedder) -> SharedDocuments:
        return SharedDocuments(inner, address=self.address, authkey=self.authkey)


class SharedDocuments(_DocumentsElsewhere):
    """An Embedder: `embed_documents` in the shared embedding process, `embed_query` in this one."""

    def __init__(
        self, inner: Embedder, *, address: str, authkey: bytes, wait_s: float = CONNECT_WAIT_S
    ) -> None:
        super().__init__(inner)
        self.address = address
        self.authkey = authkey
        self.wait_s = wait_s

    def _connect(self) -> Connection:
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                return Client(self.address, family="AF_UNIX", authkey=self.authkey)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                # Starting, or being restarted by the supervisor: wait for its socket.
                if time.monotonic() > deadline:
                    raise ServiceUnavailableError(
                        f"the document-embedding process is not accepting ({exc}); try again", retry_after_s=5
                    ) from exc
                time.sleep(0.05)

    def _embed_elsewhere(self, texts: list[str]) -> Matrix:
        out: Matrix = self._ask(texts)
        return out

    def _late_elsewhere(self, texts: list[str], ranges: list[list[tuple[int, int]]]) -> Late:
        out: Late = self._ask(("late", texts, ranges))
        return out

    def _ask(self, request: object) -> Any:
        for attempt in range(2):
            try:
                with self._connect() as conn:
                    conn.send(request)
                    status, value = conn.recv()
            except (EOFError, ConnectionResetError, BrokenPipeError):
                if attempt:  # it died during this request twice: not a passing crash
                    raise ServiceUnavailableError(
                        "the document-embedding process ended while embedding; try again", retry_after_s=5
                    ) from None
                continue  # the supervisor starts another: this call is tried once more
            if status == "error":
                assert isinstance(value, BaseException)
                raise value
            return value
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Nothing to close here: the process is the supervisor's."""


def embeds_apart(settings: Settings) -> bool:
    """Whether `evidence serve` embeds documents in a process of their own: not when `write_nice`
    is 0 or the embedder is remote (then each worker embeds as one server would)."""
    from evidence.config import EmbedderKind

    return bool(settings.write_nice) and settings.embedder is EmbedderKind.MINILM


def shared_embedding(settings: Settings, workers: int) -> SharedEmbedding | None:
    """The shared embedding process of `serve --workers N` (`workers` requests at once), not
    yet started; None when `write_nice` is 0 or the embedder is remote (each worker then embeds
    as one server would)."""
    if not embeds_apart(settings):
        return None
    from functools import partial

    from evidence.embed.factory import build_embedder

    return SharedEmbedding(partial(build_embedder, settings), settings.write_nice, workers)


def serving_embedder(
    settings: Settings, shared: SharedEmbedding | None = None
) -> tuple[Embedder | None, BackgroundDocuments | SharedDocuments | None]:
    """`evidence serve`'s embedder (with the store's embedding cache in front, as the service
    builds it) and its document embedder: a worker process of its own, or `shared`, the one of
    every worker of `serve --workers N`; (None, None) when `write_nice` is 0 or the embedder is
    remote."""
    if not embeds_apart(settings):
        return None, None
    from functools import partial

    from evidence.embed.factory import build_embedder, with_store_cache

    background: BackgroundDocuments | SharedDocuments
    if shared is not None:
        background = shared.client(build_embedder(settings))
    else:
        background = BackgroundDocuments(
            build_embedder(settings), build=partial(build_embedder, settings), nice=settings.write_nice
        )
    return with_store_cache(settings, background), background
