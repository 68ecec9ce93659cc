"""Dependency-free progress lines for terminals; silent when the stream is not a TTY.

Two bars: `Progress` for a count (evaluation, migration, assessments) and `FileProgress` for
`evidence index` (files done of the total, passages written, rate, ETA, the file being read).
A library (tqdm, rich) would add a dependency to the runtime install for ~80 lines we can test.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO

#: What long runs report to: progress(done, total or None, unit). `Progress` is one.
ProgressFn = Callable[[int, int | None, str], None]

#: Redraws at most this often (a redraw per file of a 10,000-file folder would cost more than it shows).
_MIN_INTERVAL_S = 0.1


class _Line:
    """A line redrawn in place on `stream` (stderr by default), drawn only when `enabled` (by
    default when the stream is a terminal); `close` ends it with a newline if it drew anything."""

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.perf_counter()
        self._last = 0.0
        self._shown = False

    def close(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()


class Progress(_Line):
    def __call__(self, done: int, total: int | None, unit: str) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < _MIN_INTERVAL_S and (total is None or done < total):
            return
        self._last = now
        rate = done / max(now - self.start, 1e-9)
        if total:
            line = f"\r{self.label} {_bar(done, total)} {done:,}/{total:,} {unit} ({rate:,.1f}/s)"
        else:
            line = f"\r{self.label}: {done:,} {unit} ({rate:,.1f}/s)"
        self.stream.write(line)
        self.stream.flush()
        self._shown = True


class IndexState(Protocol):
    """What `FileProgress` reads (`evidence.service.IndexProgress`)."""

    @property
    def files(self) -> int: ...
    @property
    def total_files(self) -> int | None: ...
    @property
    def documents(self) -> int: ...
    @property
    def passages(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def current(self) -> str: ...


class FileProgress(_Line):
    """`indexing into NAME [#####---] 7/11 files, 412 passages written, 0.9 files/s, ETA 4s  docs/a.pdf`,
    redrawn in place on a terminal; nothing elsewhere (the command prints its summary itself)."""

    def __call__(self, state: IndexState) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        final = state.total_files is not None and state.files >= state.total_files
        if now - self._last < _MIN_INTERVAL_S and not final:
            return
        self._last = now
        width = shutil.get_terminal_size((100, 24)).columns - 1
        line = self.line(state, now - self.start, width=width)
        # \r and erase-to-end-of-line: a shorter line leaves nothing of the longer one before it.
        self.stream.write("\r" + line[: max(width, 20)] + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def line(self, s: IndexState, elapsed: float, *, width: int | None = None) -> str:
        """The progress line; within `width` the file being read keeps its end (its name)."""
        elapsed = max(elapsed, 1e-9)
        parts = [f"{s.passages:,} passages written"]
        if s.failed:
            parts.append(f"{s.failed:,} failed")
        total = s.total_files
        if total and total > 1:
            rate = s.files / elapsed
            parts.append(f"{rate:,.1f} files/s")
            if 0 < s.files < total:
                parts.append(f"ETA {_duration((total - s.files) / rate)}")
            head = f"{self.label} {_bar(s.files, total)} {s.files:,}/{total:,} files"
        else:
            # One input (a BEIR corpus, a JSONL file): its records are what moves.
            parts.append(f"{s.documents:,} documents ({s.documents / elapsed:,.1f}/s)")
            head = f"{self.label}:"
        line = f"{head}, {', '.join(parts)}"
        current = s.current
        if width is not None and current and len(line) + 2 + len(current) > width:
            room = width - len(line) - 3
            current = "…" + current[-room:] if room >= 8 else ""
        return f"{line}  {current}".rstrip()


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = int(width * min(done / total, 1.0)) if total else width
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"
