"""Run the fault and concurrency tests many times, alone and beside a CPU burner.

A test whose outcome depends on the machine's speed passes on one machine and fails on
another: quiet machines finish work before a fixed sleep ends, busy ones miss tight bounds.
`make test-stress` runs the tests RUNS times on a quiet machine, then RUNS times while one
busy-looping process per core competes for the CPU, and reports every run that failed.

    python bench/stress.py --runs 20 tests/functional/test_faults.py -k killed_midway
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _burn(stop: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


@contextmanager
def cpu_burner(processes: int) -> Iterator[None]:
    """One busy loop per core: every core stays at 100% while the tests run."""
    stop = mp.Event()
    workers = [mp.Process(target=_burn, args=(stop,), daemon=True) for _ in range(processes)]
    for w in workers:
        w.start()
    try:
        yield
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=5)
            if w.is_alive():
                w.kill()


def run_once(pytest_args: list[str]) -> tuple[bool, float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
        capture_output=True,
        text=True,
        check=False,
    )
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    return proc.returncode == 0, time.monotonic() - t0, tail


def series(label: str, runs: int, pytest_args: list[str]) -> int:
    failed = 0
    for i in range(1, runs + 1):
        ok, seconds, tail = run_once(pytest_args)
        failed += not ok
        print(f"{label} run {i}/{runs}: {'pass' if ok else 'FAIL'} ({seconds:.1f} s)", flush=True)
        if not ok:
            print("  " + tail.replace("\n", "\n  "), flush=True)
    print(f"{label}: {runs - failed}/{runs} passed", flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="runs per series (default 20)")
    parser.add_argument(
        "--burners", type=int, default=os.cpu_count() or 2, help="busy processes (default: cores)"
    )
    parser.add_argument("--only", choices=("alone", "burner"), help="run one series only")
    args, pytest_args = parser.parse_known_args(argv)
    if not pytest_args:
        parser.error("name the tests to stress (pytest arguments)")
    failed = 0
    if args.only in (None, "alone"):
        failed += series("alone", args.runs, pytest_args)
    if args.only in (None, "burner"):
        with cpu_burner(args.burners):
            failed += series(f"beside {args.burners} CPU burners", args.runs, pytest_args)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
