"""`evidence serve --workers N`: N forked processes serving one store on one port.

The retrieve is mostly Python under the GIL, so the threads of one server use one core. The
supervisor (this module) binds the listening socket once, forks N workers that each run the
ordinary server on it (their own service, caches and resolvers), restarts a worker that dies,
and stops them all on SIGTERM/SIGINT. Writes from several workers are the store's concern: it
already takes writes from several processes (`evidence index` beside `serve`): SQLite
transactions, one flock around tantivy's writer, and readers that reload at a new generation.

Documents are embedded in one process for all the workers (`SharedEmbedding`), a child of the
supervisor, which starts it before the workers and starts another if it dies.

The supervisor itself starts no thread (forking a threaded process copies locks mid-use): it
waits for signals with `sigtimedwait`, the signals it handles blocked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evidence.cli.common import EXIT_USAGE, CliError
from evidence.lifetime import die_with_parent

if TYPE_CHECKING:
    from evidence.embed.background import SharedEmbedding

#: Seconds a worker gets to finish after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0
#: Restarts within `CRASH_WINDOW_S` past which the supervisor stops: a worker that dies at once
#: (bad store, broken model) would otherwise be forked in a loop.
MAX_RESTARTS = 5
CRASH_WINDOW_S = 30.0

_HANDLED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
#: The slot of the shared embedding process among `Supervisor.children`.
EMBEDDING = -1


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """The listening socket every worker accepts on (blocking: `ApiServer.serve_forever`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


@dataclass
class Supervisor:
    """Forks `workers` children running `serve(listener)`, and keeps them running, with the
    `embedding` process they share (when there is one)."""

    workers: int
    serve: Callable[[socket.socket], int]
    listener: socket.socket
    embedding: SharedEmbedding | None = None
    #: Prints the `listening` line: once SIGTERM is blocked, so that a caller's SIGTERM right
    #: after it is handled (a clean stop) instead of killing the supervisor.
    announce: Callable[[], None] = lambda: None
    children: dict[int, int] = field(default_factory=dict)  # pid -> slot (EMBEDDING: the embedder)
    restarts: list[float] = field(default_factory=list)

    def _fork(self, slot: int) -> None:
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                die_with_parent(parent)
                code = self.serve(self.listener)
            except CliError as exc:  # bad settings: every worker would fail the same way
                print(f"evidence serve: {exc}", file=sys.stderr)
                code = exc.code
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except KeyboardInterrupt:
                code = 0
            except BaseException:  # reported, and the supervisor starts another
                print(f"evidence serve: worker {os.getpid()} failed:", file=sys.stderr)
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        self.children[pid] = slot

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT (0) or until workers keep dying (1)."""
        if self.embedding is not None:
            self.embedding.prepare()  # before signals are blocked: see `_start_embedding`
        signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
        try:
            if self.embedding is not None:  # before the workers, which connect to it
                self._start_embedding(self.embedding)
            self.announce()
            for slot in range(self.workers):
                self._fork(slot)
            return self._watch()
        finally:
            self._stop()
            if self.embedding is not None:
                self.embedding.close()  # its socket's directory; the process was stopped with the rest
            self.listener.close()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)

    def _start_embedding(self, embedding: SharedEmbedding) -> None:
        self.children[embedding.start()] = EMBEDDING
        # multiprocessing unblocks SIGINT and SIGTERM after starting its resource tracker (done
        # once, by `prepare`, unless the tracker died): blocked again, or SIGTERM would kill the
        # supervisor outright instead of reaching `sigtimedwait`.
        signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)

    def _watch(self) -> int:
        while True:
            got = signal.sigtimedwait(_HANDLED, 5.0)
            if got is not None and got.si_signo in {signal.SIGTERM, signal.SIGINT}:
                return 0
            for pid, status in self._reap():
                slot = self.children.pop(pid)
                code = os.waitstatus_to_exitcode(status)
                if code == EXIT_USAGE and slot != EMBEDDING:
                    return code  # the worker said why; another would fail alike
                what = "the document-embedding process" if slot == EMBEDDING else "worker"
                print(
                    f"evidence serve: {what} {pid} exited ({code}); starting another",
                    file=sys.stderr,
                    flush=True,
                )
                now = time.monotonic()
                self.restarts = [t for t in self.restarts if now - t < CRASH_WINDOW_S] + [now]
                if len(self.restarts) > MAX_RESTARTS:
                    print(
                        f"evidence serve: {len(self.restarts)} workers died within {CRASH_WINDOW_S:g} s; "
                        "stopping",
                        file=sys.stderr,
                        flush=True,
                    )
                    return 1
                if slot == EMBEDDING and self.embedding is not None:
                    self._start_embedding(self.embedding)
                else:
                    self._fork(slot)

    def _reap(self) -> list[tuple[int, int]]:
        reaped: list[tuple[int, int]] = []
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.children:
                reaped.append((pid, status))
        return reaped

    def _stop(self) -> None:
        """SIGTERM to every worker, then wait for them; SIGKILL to those still there after the
        grace period."""
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.children:
            for pid, _ in self._reap():
                self.children.pop(pid, None)
            if not self.children:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                for pid in self.children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + STOP_GRACE_S  # SIGKILL cannot be refused
                continue
            signal.sigtimedwait({signal.SIGCHLD}, min(left, 1.0))
