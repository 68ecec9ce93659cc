"""Missing prerequisites skip on a laptop and fail under CI=true (issue 9, "no silent skips")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prerequisites import in_ci, missing

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setenv("CI", ci)
    assert in_ci() is bool(ci)
    with pytest.raises(outcome, match="opensearch-api-spec not found"):
        missing("opensearch-api-spec", "check it out")


@pytest.mark.slow
@pytest.mark.parametrize("ci", ["true", "false"])
def test_spec_tests_fail_in_ci_without_the_spec(tmp_path: Path, ci: str) -> None:
    """The real wiring: the spec fixture, with the spec pointed somewhere empty."""
    env = {**os.environ, "CI": ci, "OPENSEARCH_API_SPEC": str(tmp_path / "no-spec")}
    test = "tests/unit/search/opensearch/test_opensearch_bodies.py::test_hybrid_body"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", test],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if ci == "true":
        assert proc.returncode == 1, proc.stdout
        assert "CI=true: a missing prerequisite fails" in proc.stdout
    else:
        assert proc.returncode == 0, proc.stdout
        assert "SKIPPED [1]" in proc.stdout and "opensearch-api-spec not found" in proc.stdout
