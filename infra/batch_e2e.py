"""`make batch-e2e`: the batch state machine that ships, executed end to end on this machine.

1. The stack is synthesized in-process (infra/batch_asl.py) and the state machine's definition
   taken from the template, its function ARNs and results bucket resolved.
2. asl-validator checks it; aws-local-stepfunctions executes it (infra/asl/run.mjs). Every Lambda
   task calls the real handler (functions/<name>/handler.py) with the event the interpreter built.
3. The vendor sample of `evidence demo` is indexed in a temporary store with the default embedder;
   results go to S3 on moto, as in production.
4. Each criterion's result object is compared with `evidence assess` on the same input and store.

One line on stdout: criteria, results, failed criteria, seconds; exit 0 only when every criterion
has a result, none failed, each equals `evidence assess`, and every state payload is under 256 KB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INPUT = ROOT / "events" / "stepfunctions" / "vendor_assessment.json"
BUCKET = "evidence-results-e2e"
REGION = "us-east-1"
#: What a result holds that is evidence (the telemetry's timings differ run to run).
EVIDENCE_FIELDS = (
    "id",
    "question",
    "index",
    "profile",
    "status",
    "evidence_xml",
    "valid_indexes",
    "hits",
    "followups",
    "plan",
    "can_answer",
    "confidence",
    "needs_clarification",
)


def differences(results: dict[str, dict[str, Any]], reference: dict[str, dict[str, Any]]) -> list[str]:
    """Where the state machine's result objects differ from `evidence assess`'s lines (by id)."""
    found = [f"{i}: missing from the state machine's results" for i in sorted(set(reference) - set(results))]
    found += [f"{i}: not in evidence assess's results" for i in sorted(set(results) - set(reference))]
    for i in sorted(set(results) & set(reference)):
        for key in EVIDENCE_FIELDS:
            if results[i].get(key) != reference[i].get(key):
                found.append(f"{i}: {key} differs")
    return found


def index_vendor_sample(service: Any, index: str) -> None:
    from evidence.demo import VENDOR_STEPS

    for paths, doc_type in VENDOR_STEPS:
        report = service.index_paths(index, list(paths), doc_type=doc_type)
        if report.failed:
            raise SystemExit(f"batch-e2e: indexing failed: {report.failed}")


def assess_reference(store_dir: Path, batch: dict[str, Any], workdir: Path) -> dict[str, dict[str, Any]]:
    """`evidence assess` on the same input and store, as a user would run it."""
    from evidence.cli import main as cli

    criteria, out = workdir / "criteria.jsonl", workdir / "assess.jsonl"
    criteria.write_text("".join(json.dumps(c) + "\n" for c in batch["criteria"]), encoding="utf-8")
    argv = ["assess", "--store", str(store_dir), "--index", batch["index"], "--criteria", str(criteria)]
    code = cli([*argv, "--profile", batch.get("profile", "default"), "--out", str(out)])
    if code not in (0, 1):
        raise SystemExit(f"batch-e2e: evidence assess exited {code}")
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {line["id"]: line for line in lines}


def run(batch: dict[str, Any], workdir: Path) -> tuple[str, bool]:
    import boto3
    from moto import mock_aws

    from evidence.api import runtime
    from evidence.assess.store import S3Store
    from evidence.config import Settings
    from evidence.local_sfn import PAYLOAD_LIMIT_BYTES, execute
    from evidence.service import EvidenceService
    from infra.batch_asl import bundle

    started = time.monotonic()
    machine = bundle().resolve(results_bucket=BUCKET, region=REGION)
    settings = Settings(store_dir=workdir / "store", aws_region=REGION)
    service = EvidenceService(settings)
    try:
        index_vendor_sample(service, batch["index"])
        with mock_aws():
            s3 = boto3.client("s3", region_name=REGION)
            s3.create_bucket(Bucket=BUCKET)
            runtime.configure(service=service, settings=settings, s3_client=s3)
            execution = execute(machine, batch, name=uuid.uuid4().hex)
            summary = execution.output if isinstance(execution.output, dict) else {}
            lines = summary.get("results") or []
            failed = [r for r in lines if r.get("status") != "ok"]
            store = S3Store(s3)
            results = {r["id"]: store.get_json(r["result_uri"]) for r in lines if r.get("result_uri")}
    finally:
        runtime.close()
    reference = assess_reference(settings.store_dir, batch, workdir)
    differ = differences(results, reference)
    criteria = len(batch["criteria"])
    ok = (
        execution.status == "SUCCEEDED"
        and len(results) == criteria
        and not failed
        and not differ
        and execution.largest_bytes < PAYLOAD_LIMIT_BYTES
    )
    line = (
        f"batch-e2e: {criteria} criteria, {len(results)} results, {len(failed)} failed criteria, "
        f"{execution.seconds:.1f} s (execution {execution.status}; {criteria - len(differ)}/{criteria} "
        f"equal to evidence assess; largest state payload {execution.largest_bytes:,} B at "
        f"{execution.largest_at}, limit {PAYLOAD_LIMIT_BYTES:,}; {time.monotonic() - started:.0f} s in all)"
    )
    for problem in differ + [f"{r['id']}: failed {r.get('error')}" for r in failed]:
        print(f"batch-e2e: {problem}", file=sys.stderr)
    if execution.status != "SUCCEEDED":
        print(f"batch-e2e: execution failed: {execution.error}: {execution.cause}", file=sys.stderr)
    return line, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=INPUT, help="the state machine's input (JSON)")
    args = parser.parse_args(argv)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(key, value)
    batch = json.loads(args.input.read_text(encoding="utf-8"))
    stdout = sys.stdout
    # The handlers log and emit metrics on stdout, as in Lambda: stdout keeps the one line.
    with (
        tempfile.TemporaryDirectory(prefix="evidence-batch-e2e-") as tmp,
        contextlib.redirect_stdout(sys.stderr),
    ):
        line, ok = run(batch, Path(tmp))
    print(line, file=stdout)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
