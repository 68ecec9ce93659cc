"""Cold start of each Lambda handler, as docs/architecture.md#targets defines it.

For every handler, in a fresh interpreter (bytecode compiled first with compileall):

* import       — `import functions.<name>.handler` alone;
* first request — import + settings + the first invocation on a realistic event
                  (retriever: a retrieve on a prepared index, so the MiniLM model load is
                  included; indexer: an S3 put whose object comes from an in-memory S3 stub,
                  so parsing and embedding are included but no network).

Both are measured inside the process (from before the import to after the response); the
process wall time (interpreter start included) is reported too. Median of --runs.

    python bench/cold_start.py [--runs 5] [--json]

`PYTHONDONTWRITEBYTECODE` is removed from the environment for the compile step and the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("retriever", "indexer", "planner", "formatter")
TARGETS_MS = {"retriever": {"import": 500, "first": 1000}}

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import importlib
mode, name, nonce = sys.argv[1], sys.argv[2], sys.argv[4]
module = importlib.import_module(f"functions.{name}.handler")
t_import = time.perf_counter()
if mode == "first":
    from evidence.config import get_settings
    from evidence.testing import lambda_context, load_event
    get_settings()
    if name == "retriever":
        event = load_event("apigw/retrieve")
        # A query never seen before: the embedding cache must not hide the model load.
        body = json.loads(event["body"])
        body["query"] += f" (run {nonce})"
        event["body"] = json.dumps(body)
    elif name == "planner":
        event = load_event("planner/plan")
    elif name == "formatter":
        event = load_event("formatter/format")
    else:
        import io
        from evidence.api import runtime
        # New content each run: neither the content-hash skip nor the embedding cache applies.
        text = open(sys.argv[3], "rb").read() + f" Run {nonce}.".encode()
        class StubS3:
            def get_object(self, Bucket, Key):
                return {"Body": io.BytesIO(text), "ContentLength": len(text), "ContentType": "text/plain",
                        "ETag": '"9b2cf535f27731c974343645a3985328"', "Metadata": {"round-number": "2"}}
            def head_object(self, Bucket, Key):
                return {}
        runtime.configure(s3_client=StubS3())
        event = load_event("sqs/s3_put")
    import contextlib, io as _io
    with contextlib.redirect_stdout(_io.StringIO()):
        response = module.handler(event, lambda_context(f"evidence-{name}"))
    if name == "retriever":
        assert response["statusCode"] == 200, response
        assert json.loads(response["body"])["hits"], response
    if name == "indexer":
        assert response == {"batchItemFailures": []}, response
t_end = time.perf_counter()
print(json.dumps({"import_ms": (t_import - t0) * 1000, "total_ms": (t_end - t0) * 1000}))
"""


_BREAKDOWN = r"""
import contextlib, io, json, sys, time
T = [("start", time.perf_counter())]
def mark(n):
    T.append((n, time.perf_counter()))
import functions.retriever.handler as h; mark("import handler")
from evidence.config import get_settings; get_settings(); mark("settings (pydantic)")
from evidence.testing import load_event, lambda_context; mark("numpy")
from evidence.api.app import get_app; get_app(); mark("resolver, routes, models")
from evidence.api import runtime
svc = runtime.get_service(); svc.backend.get_index("vendor-acme"); mark("service, backend open")
svc.embedder.embed_query("warm " + sys.argv[1]); mark("onnxruntime import, session, first query")
event = load_event("apigw/retrieve")
with contextlib.redirect_stdout(io.StringIO()):
    response = h.handler(event, lambda_context())
assert response["statusCode"] == 200, response
mark("handler call (Powertools, ranking modules, pipeline)")
print(json.dumps({n: (t - T[i][1]) * 1000 for i, (n, t) in enumerate(T[1:])}))
"""


def breakdown(store: Path, runs: int) -> dict[str, float]:
    """Where the retriever's first request spends its time (median per step)."""
    samples: list[dict[str, float]] = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _BREAKDOWN, str(time.time_ns())],
            cwd=ROOT,
            env=_env(store),
            capture_output=True,
            text=True,
            check=True,
        )
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def _env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVIDENCE_", "POWERTOOLS_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["EVIDENCE_STORE_DIR"] = str(store)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared")])
    # As in Lambda: the handler runs with the function name set (the Tracer then stays enabled
    # but, without the X-Ray daemon, only builds segments in memory).
    env["POWERTOOLS_TRACE_DISABLED"] = "true"
    return env


def compile_all() -> float:
    started = time.perf_counter()
    import site
    import sysconfig

    targets = [str(ROOT / "shared"), str(ROOT / "functions"), sysconfig.get_paths()["purelib"]]
    targets += [p for p in site.getsitepackages() if p not in targets]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *targets],
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def prepare_store(store: Path) -> None:
    """An index built with the default embedder, so the retriever's first request loads the model."""
    code = (
        "from evidence.config import Settings\n"
        "from evidence.service import EvidenceService\n"
        "from evidence.model import IndexDocumentRequest\n"
        "from evidence.testing import load_event\n"
        f"s = EvidenceService(Settings(store_dir={str(store)!r}))\n"
        "for n in ('index_document', 'index_followup'):\n"
        "    body = load_event('apigw/' + n)['body']\n"
        "    s.index_document('vendor-acme', IndexDocumentRequest.model_validate_json(body))\n"
        "s.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(store), check=True)


def measure(name: str, mode: str, store: Path, doc: Path) -> dict[str, float]:
    started = time.perf_counter()
    nonce = f"{time.time_ns()}"
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, name, str(doc), nonce],
        cwd=ROOT,
        env=_env(store),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = (time.perf_counter() - started) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"{name} {mode} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_ms"] = wall
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    args = parser.parse_args(argv)

    compile_s = compile_all()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        doc = Path(tmp) / "followup.txt"
        doc.write_text("Q: Do you encrypt customer data at rest?\nA: Yes, with AES-256 through AWS KMS.\n")
        prepare_store(store)
        for name in HANDLERS:
            imports = [measure(name, "import", store, doc) for _ in range(args.runs)]
            firsts = [measure(name, "first", store, doc) for _ in range(args.runs)]
            rows.append(
                {
                    "handler": name,
                    "import_ms": statistics.median(r["import_ms"] for r in imports),
                    "import_wall_ms": statistics.median(r["wall_ms"] for r in imports),
                    "first_request_ms": statistics.median(r["total_ms"] for r in firsts),
                    "first_request_wall_ms": statistics.median(r["wall_ms"] for r in firsts),
                }
            )
        steps = breakdown(store, args.runs)
    if args.json:
        summary = {"runs": args.runs, "compile_s": round(compile_s, 1), "handlers": rows}
        print(json.dumps({**summary, "retriever_breakdown_ms": steps}))
        return 0
    print(f"cold start, median of {args.runs} fresh processes (bytecode compiled in {compile_s:.1f}s)\n")
    print(
        "| handler | import (ms) | import+settings+first request (ms) | process wall, import / first (ms) |"
    )
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['handler']} | {r['import_ms']:.0f} | {r['first_request_ms']:.0f} | "
            f"{r['import_wall_ms']:.0f} / {r['first_request_wall_ms']:.0f} |"
        )
    print("\nretriever first request, step by step (median ms):")
    for step, ms in steps.items():
        print(f"  {step:<55} {ms:7.0f}")
    target = TARGETS_MS["retriever"]
    retriever = next(r for r in rows if r["handler"] == "retriever")
    ok = retriever["import_ms"] <= target["import"] and retriever["first_request_ms"] <= target["first"]
    print(
        f"\nretriever targets (docs/architecture.md#targets):"
        f" import ≤ {target['import']} ms, first request ≤ "
        f"{target['first']} ms → {'met' if ok else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
