"""Suite-wide hooks. The workbench's browser tests save screenshots; CI's log names them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

SCREENSHOTS = Path(__file__).resolve().parents[1] / "build" / "screenshots"
_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the screenshots this run wrote (tests/functional/test_workbench_browser.py), also
    under xdist, where the workers' own output is not shown."""
    shots = sorted(p for p in SCREENSHOTS.glob("*.png") if p.stat().st_mtime >= _STARTED - 1)
    if shots:
        terminalreporter.section("workbench screenshots")
        for path in shots:
            terminalreporter.write_line(str(path))
