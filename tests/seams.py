"""Kill points a test observes instead of a time it guesses (CONTRIBUTING.md, "speed").

`pausing_cli` runs an `evidence` command in a subprocess with one seam: after the N-th call of a
named function (`module:attr` or `module:Class.method`), the process writes a marker file,
atomically, and blocks until it is killed. `wait_for_pause` waits for the marker. The outcome
then does not depend on how fast the machine does the work before the pause.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_DRIVER = """
import importlib, os, sys, threading
from pathlib import Path

from evidence.cli import main

target, marker, pause_after = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
module, _, path = target.partition(":")
*parents, name = path.split(".")
owner = importlib.import_module(module)
for parent in parents:
    owner = getattr(owner, parent)
real, calls = getattr(owner, name), 0


def paused(*args, **kwargs):
    global calls
    result = real(*args, **kwargs)
    calls += 1
    if calls == pause_after:
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(str(calls))
        os.replace(tmp, marker)  # seen whole or not at all
        threading.Event().wait()  # held here until the test's SIGKILL
    return result


setattr(owner, name, paused)
sys.exit(main(sys.argv[4:]))
"""


def pausing_cli(
    target: str,
    pause_after: int,
    marker: Path,
    cli_args: list[str],
    *,
    stdout: int | None = None,
    stderr: int | None = None,
) -> subprocess.Popen[bytes]:
    """`evidence CLI_ARGS…` that pauses after `target`'s `pause_after`-th call returns."""
    driver = marker.with_suffix(".py")
    driver.write_text(_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    command = [sys.executable, str(driver), target, str(marker), str(pause_after), *cli_args]
    return subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr)


def wait_for_pause(marker: Path, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else b""
            raise AssertionError(f"{what} exited ({proc.returncode}) before the pause: {err!r}")
        assert time.monotonic() < deadline, f"{what} did not reach the pause within {timeout_s:.0f} s"
        time.sleep(0.05)


def run_together(actions: Mapping[str, Callable[[], object]], timeout: float = 60) -> dict[str, object]:
    """Each action in a thread of its own, all started before any is joined: each one's return
    value, or the exception it raised (a race test asserts on which writer lost, and how). The
    interleaving is the caller's seam (a barrier inside the code under test), not a sleep."""
    outcomes: dict[str, object] = {}

    def run(key: str, action: Callable[[], object]) -> None:
        try:
            outcomes[key] = action()
        except Exception as exc:  # the caller's assertion shows it
            outcomes[key] = exc

    threads = [threading.Thread(target=run, args=item) for item in actions.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return outcomes
