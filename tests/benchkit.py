"""The repository's bench scripts, imported by the tests that check them (`bench/` is no package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(relative: str, name: str) -> ModuleType:
    """`bench/<relative>` as module `name`, registered in `sys.modules` first: its dataclasses
    resolve their postponed annotations through it."""
    spec = importlib.util.spec_from_file_location(name, BENCH / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
