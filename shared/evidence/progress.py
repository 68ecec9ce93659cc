"""A dependency-free progress line for terminals; silent when stderr is not a TTY."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.perf_counter()
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int | None, unit: str) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        rate = done / max(now - self.start, 1e-9)
        if total:
            width = 24
            filled = int(width * min(done / total, 1.0))
            bar = "#" * filled + "-" * (width - filled)
            line = f"\r{self.label} [{bar}] {done:,}/{total:,} {unit} ({rate:,.1f}/s)"
        else:
            line = f"\r{self.label}: {done:,} {unit} ({rate:,.1f}/s)"
        self.stream.write(line)
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()
