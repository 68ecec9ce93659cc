"""What a Lambda handler runs never needs the developer tools, which stay out of the layer.

Each handler is imported in a fresh process, together with what it imports at its first
invocation, its service is built, and (for the handlers that need neither the model nor AWS)
it is invoked on an events/ sample; then no developer tool and no test or CDK tooling may be
loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.bundle import DEV_MODULES

ROOT = Path(__file__).resolve().parents[2]

#: Developer tools: importable by the CLI, never by handler code (infra/bundle.py leaves them out).
DEV_TOOLS = tuple(f"evidence.{name}" for name in sorted(DEV_MODULES))
TOOLING = ("pytest", "moto", "aws_cdk", "constructs", "cdk_nag", "hypothesis", "schemathesis")

#: handler -> (modules its `_handle` imports at the first invocation, event to invoke it on or None)
HANDLERS = {
    "retriever": (("evidence.api.app", "evidence.api.tasks"), "apigw/health.json"),
    "indexer": (("evidence.api.indexer",), None),  # needs S3: imported, not invoked
    "planner": (("evidence.api.tasks",), "planner/plan.json"),
    "formatter": (("evidence.api.tasks",), "formatter/format.json"),
}

_PROBE = r"""
import importlib, json, sys, uuid
function, lazy, event_file = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
module = importlib.import_module(f"functions.{function}.handler")
for name in lazy:
    importlib.import_module(name)
from evidence.api import runtime
runtime.get_service()

class Context:  # the Lambda runtime's context object, as Powertools reads it
    function_name = f"evidence-{function}"
    function_version = "$LATEST"
    memory_limit_in_mb = 1024
    aws_request_id = str(uuid.uuid4())
    invoked_function_arn = f"arn:aws:lambda:eu-west-1:123456789012:function:evidence-{function}"
    log_group_name = log_stream_name = "local"
    def get_remaining_time_in_millis(self):
        return 30_000

response = None
if event_file:
    with open(f"events/{event_file}", encoding="utf-8") as f:
        response = module.handler(json.load(f), Context())
runtime.close()
print(json.dumps({"modules": sorted(sys.modules), "response": response}))
"""


def _loaded(prefixes: tuple[str, ...], modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


@pytest.mark.parametrize("function", list(HANDLERS))
def test_handler_closure_has_no_developer_tools(function: str, tmp_path: Path) -> None:
    lazy, event = HANDLERS[function]
    env = {
        "PATH": "/usr/bin:/bin",
        "EVIDENCE_STORE_DIR": str(tmp_path / "store"),
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "Test",
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, function, ",".join(lazy), event or ""],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    modules: list[str] = report["modules"]
    assert "evidence.service" in modules and set(lazy) <= set(modules)  # the probe did load the code
    if event is not None:
        assert report["response"], "the handler answered nothing"
    assert _loaded(DEV_TOOLS, modules) == []
    assert _loaded(TOOLING, modules) == []
