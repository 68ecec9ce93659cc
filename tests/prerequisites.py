"""What a test needs from outside the repository (the OpenSearch API spec, the SciFact dataset,
the osmem-server binary): skipped on a developer machine that lacks it, a failure under CI.

A prerequisite that is silently missing in CI turns whole tiers into no-ops (the k-NN contract
is proven on the spec, so a missing spec would leave k-NN proven nowhere).
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(what: str, how: str, *, module_level: bool = False) -> NoReturn:
    """Skip (locally) or fail (CI=true) because `what` is absent; `how` says how to get it."""
    message = f"{what} not found; {how}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing prerequisite fails instead of skipping)", pytrace=False)
    pytest.skip(message, allow_module_level=module_level)
