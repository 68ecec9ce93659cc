"""Handler modules are cheap to import: no SDK, no client, no environment read.

The targets: docs/architecture.md#targets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import json, os, sys
reads = []
class Recording(dict):
    def __getitem__(self, key):
        reads.append(key); return super().__getitem__(key)
    def get(self, key, default=None):
        reads.append(key); return super().get(key, default)
    def __contains__(self, key):
        reads.append(key); return super().__contains__(key)
os.environ = Recording(os.environ)
import importlib
importlib.import_module(f"functions.{sys.argv[1]}.handler")
heavy = [m for m in ("boto3", "botocore", "onnxruntime", "opensearchpy", "cohere", "aws_xray_sdk", "numpy",
                     "tantivy", "aws_lambda_powertools.event_handler") if m in sys.modules]
ours = sorted({k for k in reads if k.startswith(("EVIDENCE_", "POWERTOOLS_", "AWS_"))})
print(json.dumps({"heavy": heavy, "env": ours}))
"""


@pytest.mark.parametrize("function", ["retriever", "indexer", "planner", "formatter"])
def test_import_reads_no_env_and_loads_no_sdk(function: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, function], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {"heavy": [], "env": []}
