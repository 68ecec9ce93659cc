"""`make synth`'s command, end to end: builds (or reuses) the real bundle, runs cdk-nag as a
validation plugin (synth fails on any unacknowledged finding), writes the cloud assembly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.infra, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_make_synth_command_writes_the_assembly(tmp_path: Path) -> None:
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    env.pop("CDK_CONTEXT_JSON", None)
    done = subprocess.run(
        [sys.executable, "-m", "infra.app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "AwsSolutions-" not in done.stderr, "a cdk-nag finding slipped through"
    template = json.loads((tmp_path / "Evidence.template.json").read_text())
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) >= 5
    manifest = json.loads((tmp_path / "Evidence.assets.json").read_text())
    sources = [
        Path(tmp_path / a["source"]["path"])
        for a in manifest["files"].values()
        if a["source"].get("packaging") == "zip"
    ]
    layer = [s for s in sources if (s / "python" / "evidence").is_dir()]
    assert len(layer) == 1, "the real layer (not a placeholder) is staged"
    assert not (layer[0] / "python" / "PLACEHOLDER").exists()
