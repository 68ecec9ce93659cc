"""Prove the built Lambda assets run: every handler, imported from its function folder and the
layer only, invoked on its events/ samples, in a clean interpreter of the Lambda runtime's Python.

What it stands up on loopback: a moto server (S3) that boto3 in the bundle reaches through
AWS_ENDPOINT_URL, and an HTTP listener for the custom resource's CloudFormation response. The
search backend is the embedded one (EVIDENCE_STORE_DIR in a temporary folder) with the real MiniLM
model from the layer; OpenSearch is the one part that is not run (no cluster here).

The driver runs inside the bundle's interpreter (`python -I -B`, sys.path = function folder +
layer) and refuses, with a meta-path hook, any import of CDK, moto, pytest, hypothesis, cfn-lint or
the developer modules left out of the layer: such an import fails the invocation and is reported.

Used by tests/infra/test_bundle.py and `make deploy-check`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from infra import bundle

EVENTS = bundle.ROOT / "events"
UPLOADS_BUCKET = "acme-evidence-uploads"  # the bucket events/sqs/*.json name
RESULTS_BUCKET = "acme-evidence-results"  # the output_uri of events/stepfunctions/*.json
FOLLOWUP_KEY = "indexes/vendor-acme/followups/Round 2 answers (encryption).txt"
FOLLOWUP_TEXT = (
    "Q: Do you encrypt customer data at rest?\n"
    "A: Yes. Customer data at rest is encrypted with AES-256 through AWS KMS managed keys.\n"
)

#: The import names of the build, test and CDK tooling (`bundle.FORBIDDEN` names their
#: distributions): no bundle holds or imports them.
TOOLING_MODULES = (
    "aws_cdk",
    "constructs",
    "cdk_nag",
    "jsii",
    "moto",
    "pytest",
    "_pytest",
    "hypothesis",
    "cfnlint",
)
#: Top-level modules no bundle may import, and the developer modules of `evidence`.
FORBIDDEN_IMPORTS = (*TOOLING_MODULES, *(f"evidence.{name}" for name in sorted(bundle.DEV_MODULES)))

#: function -> [(label, event file or inline event, expectation)]; run in order, one process each.
Invocation = tuple[str, "str | dict[str, Any]", str]
PLAN: dict[str, list[Invocation]] = {
    "indexer": [
        ("s3 test event", "sqs/s3_test_event.json", "no_batch_failures"),
        ("s3 put", "sqs/s3_put.json", "no_batch_failures"),
    ],
    "retriever": [
        ("health", "apigw/health.json", "http_200"),
        ("index document", "apigw/index_document.json", "http_2xx"),
        ("retrieve", "apigw/retrieve.json", "http_200_hits"),
        ("bad index name", "apigw/bad_index_name.json", "http_4xx"),
        ("batch retrieve task", "stepfunctions/retrieve_task.json", "retrieve_uri"),
    ],
    "planner": [
        ("plan", "planner/plan.json", "plan"),
        ("batch plan task", "stepfunctions/plan_task.json", "task_plan"),
    ],
    "formatter": [
        ("format", "formatter/format.json", "evidence_xml"),
        ("batch format task", "stepfunctions/format_task.json", "status_ok"),
    ],
    "search_setup": [("delete", "<custom resource delete>", "cfn_success")],
}

DRIVER = r"""
import importlib, importlib.abc, json, sys, time, traceback

spec = json.loads(sys.argv[1])
FORBIDDEN = tuple(spec["forbidden"])
attempts = []

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
            attempts.append(name)
            raise ModuleNotFoundError(f"{name} must not be imported in a Lambda bundle", name=name)
        return None

sys.meta_path.insert(0, Refuse())
sys.path[:0] = [spec["function_dir"], spec["layer_dir"]]

class Context:
    function_name = spec["function"]
    function_version = "$LATEST"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + spec["function"]
    aws_request_id = "00000000-0000-0000-0000-000000000001"
    log_group_name = "/aws/lambda/" + spec["function"]
    log_stream_name = "2026/11/22/[$LATEST]bundle-check"
    def __init__(self):
        self._deadline = time.monotonic() + 120
    def get_remaining_time_in_millis(self):
        return int((self._deadline - time.monotonic()) * 1000)

results = []
module_name, function_name = spec["handler"].split(".")
try:
    module = importlib.import_module(module_name)
    handler = getattr(module, function_name)
    files = {"module": module.__file__, "evidence": getattr(sys.modules.get("evidence"), "__file__", None)}
except BaseException:
    print(json.dumps({"import_error": traceback.format_exc(), "attempts": attempts}))
    sys.exit(0)
for label, event in spec["events"]:
    try:
        results.append({"label": label, "result": handler(event, Context())})
    except BaseException:
        results.append({"label": label, "error": traceback.format_exc()})
import evidence
files["evidence"] = evidence.__file__
print("\n" + json.dumps({"results": results, "attempts": attempts, "files": files}, default=str))
"""


@dataclass
class Outcome:
    function: str
    label: str
    ok: bool
    detail: str


@dataclass
class SmokeReport:
    python: str
    outcomes: list[Outcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(o.ok for o in self.outcomes)

    def lines(self) -> list[str]:
        out = [f"bundle import/invoke check ({self.python}):"]
        out += [f"  {'ok ' if o.ok else 'FAIL'} {o.function}: {o.label} {o.detail}" for o in self.outcomes]
        out += [f"  FAIL {p}" for p in self.problems]
        return out


class _CfnResponses(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        type(self).received.append(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def _loopback_services() -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(moto endpoint, CloudFormation response URL, responses received)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per S3 request otherwise
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    responses: list[dict[str, Any]] = []
    handler = type("Responses", (_CfnResponses,), {"received": responses})
    cfn = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=cfn.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{port}", f"http://127.0.0.1:{cfn.server_port}/cfn-response", responses
    finally:
        cfn.shutdown()
        cfn.server_close()
        moto.stop()


def _event(source: str | dict[str, Any], response_url: str) -> dict[str, Any]:
    if isinstance(source, dict):
        return source
    if source == "<custom resource delete>":
        return {
            "RequestType": "Delete",
            "ResponseURL": response_url,
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/Evidence/1",
            "RequestId": "bundle-check",
            "LogicalResourceId": "SearchSetup",
            "PhysicalResourceId": "evidence-search-setup:https://search.example",
            "ResourceType": "Custom::EvidenceSearchSetup",
            "ResourceProperties": {"Endpoint": "https://search.example", "Service": "es"},
        }
    return dict(json.loads((EVENTS / source).read_text()))


def _judge(expect: str, result: Any, responses: list[dict[str, Any]]) -> tuple[bool, str]:
    def body() -> Any:
        return json.loads(result.get("body") or "null")

    if expect == "no_batch_failures":
        return result == {"batchItemFailures": []}, json.dumps(result)[:200]
    status = result.get("statusCode") if isinstance(result, dict) else None
    if expect == "http_200":
        return status == 200, f"HTTP {status}"
    if expect == "http_2xx":
        return isinstance(status, int) and 200 <= status < 300, f"HTTP {status}"
    if expect == "http_4xx":
        code = (body() or {}).get("error", {}).get("code") if isinstance(status, int) else None
        return isinstance(status, int) and 400 <= status < 500 and bool(code), f"HTTP {status} {code}"
    if expect == "http_200_hits":
        hits = len((body() or {}).get("hits", [])) if status == 200 else 0
        return status == 200 and hits > 0, f"HTTP {status}, {hits} hits"
    if expect == "retrieve_uri":
        return str(result.get("retrieve_uri", "")).startswith("s3://"), str(result.get("retrieve_uri"))
    if expect in {"plan", "task_plan"}:
        plan = (result.get("plan") if expect == "task_plan" else result) or {}
        return bool(plan.get("normalized_query")), f"plan {plan.get('normalized_query')!r}"
    if expect == "evidence_xml":
        return "<index_1>" in str(result.get("evidence_xml", "")), f"{len(str(result))} chars"
    if expect == "status_ok":
        return result.get("status") == "ok", json.dumps(result)[:200]
    if expect == "cfn_success":
        statuses = [r.get("Status") for r in responses]
        return statuses == ["SUCCESS"], f"CloudFormation got {statuses}"
    raise ValueError(expect)


def run(
    report: bundle.BundleReport,
    python: Path,
    *,
    plan: dict[str, list[Invocation]] | None = None,
    timeout_s: float = 240,
) -> SmokeReport:
    """Invoke every handler of the built bundle (`report`) with `python`, on `plan` (default
    `PLAN`: every function on its events/ samples); see the module doc."""
    import boto3

    smoke = SmokeReport(python=f"{python}")
    with _loopback_services() as (endpoint, response_url, responses), tempfile.TemporaryDirectory() as tmp:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": tmp,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL": endpoint,
            "POWERTOOLS_TRACE_DISABLED": "1",
            "POWERTOOLS_METRICS_NAMESPACE": "Evidence",
            "LOG_LEVEL": "WARNING",
            "EVIDENCE_BACKEND": "embedded",
            "EVIDENCE_STORE_DIR": str(Path(tmp) / "store"),
            "EVIDENCE_AWS_REGION": "us-east-1",
        }
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        for bucket in (UPLOADS_BUCKET, RESULTS_BUCKET):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=UPLOADS_BUCKET, Key=FOLLOWUP_KEY, Body=FOLLOWUP_TEXT.encode())

        for name, invocations in (plan or PLAN).items():
            _, handler = bundle.FUNCTIONS[name]
            spec = {
                "function": name,
                "handler": handler,
                "function_dir": str(report.function_dir(name)),
                "layer_dir": str(report.layer_dir / "python"),
                "forbidden": FORBIDDEN_IMPORTS,
                "events": [(label, _event(src, response_url)) for label, src, _ in invocations],
            }
            done = subprocess.run(
                [str(python), "-I", "-B", "-c", DRIVER, json.dumps(spec)],
                env={**env, "POWERTOOLS_SERVICE_NAME": f"evidence-{name}"},
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            lines = done.stdout.strip().splitlines()
            try:
                out = json.loads(lines[-1])
            except (IndexError, ValueError):
                smoke.problems.append(f"{name}: driver exited {done.returncode}: {done.stderr[-2000:]}")
                continue
            if out.get("attempts"):
                smoke.problems.append(f"{name}: imported forbidden modules {sorted(set(out['attempts']))}")
            if "import_error" in out:
                smoke.problems.append(f"{name}: handler import failed:\n{out['import_error'][-2000:]}")
                continue
            files = out["files"]
            for key, root in (("module", report.function_dir(name)), ("evidence", report.layer_dir)):
                if not str(files.get(key) or "").startswith(str(root)):
                    smoke.problems.append(f"{name}: {key} came from {files.get(key)}, not the bundle")
            for (label, _, expect), got in zip(invocations, out["results"], strict=True):
                if "error" in got:
                    smoke.outcomes.append(Outcome(name, label, False, got["error"][-1500:]))
                    continue
                ok, detail = _judge(expect, got["result"], responses)
                smoke.outcomes.append(Outcome(name, label, ok, detail))
    return smoke


def interpreter(python_version: str) -> Path | None:
    """The Lambda runtime's Python on this machine, or None. Under CI=true a missing one is an
    error, not a skip: the import check is what proves the bundle runs."""
    found = bundle.target_python(python_version)
    if found is None and os.environ.get("CI", "").lower() == "true":
        raise bundle.BundleError(
            f"CI=true and no python{python_version} here: the bundle import check cannot run "
            f"(install CPython {python_version}, e.g. `pyenv install {python_version}`)"
        )
    return found
