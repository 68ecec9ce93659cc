"""`make test` says in one line what is missing instead of failing at collection (jsii needs node)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_missing_node_is_one_clear_line(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with the shell tools but without node
    bin_dir.mkdir()
    for tool in ("make", "sh", "bash", "env"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bin_dir)}
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "prerequisites"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    first = out.stdout.strip().splitlines()
    assert first == [
        "make test: Node.js 20+ is needed for the CDK tests (tests/infra); install it "
        "(e.g. apt-get install nodejs) or run make test-fast"
    ]


def test_prerequisites_pass_here() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed on this machine")
    out = subprocess.run(
        ["make", "-s", "prerequisites"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
