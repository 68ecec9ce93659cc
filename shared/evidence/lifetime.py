"""A child process that ends with its parent (`serve --workers`' workers, the embedding worker)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM to this process when `parent` dies, even by SIGKILL (Linux; elsewhere nothing):
    a killed server leaves no worker behind holding its pipes, its port or its model."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # it died before prctl: nobody would send the signal
        os._exit(0)
