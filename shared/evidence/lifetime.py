"""A child process that ends with its parent (`serve --workers`' workers, the embedding worker)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM to this process when `parent` dies, even by SIGKILL (Linux; elsewhere nothing):
    a killed server leaves no worker behind holding its pipes, its port or its model.

    The kernel sends it when the *thread* that forked this process ends, so only for a child
    forked by a thread that lives as long as its process (the supervisor's main thread);
    elsewhere `exit_with_parent`."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # it died before prctl: nobody would send the signal
        os._exit(0)


def exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """Exit within `every_s` of `parent`'s death, from a daemon thread that watches for it: for
    a child started by a short-lived thread (a process pool spawns its worker from the request
    thread that first submits), where `die_with_parent` would fire when that thread ends."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(0)

    if os.getppid() != parent:
        os._exit(0)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
