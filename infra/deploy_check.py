"""`make deploy-check`: everything that can be proved about a deploy without an AWS account.

1. build (or reuse) the Lambda bundle and report its sizes against Lambda's 250 MB;
2. run every handler from the built bundle on its events/ samples in the Lambda runtime's Python
   (infra/bundle_check.py), refusing CDK, moto, pytest and developer-module imports;
3. synthesize the app with the real assets (cdk-nag's AwsSolutions pack fails the synth on any
   unacknowledged finding) and list CDK's warnings;
4. cfn-lint every synthesized template (W3005 is how CDK writes its own L2s: allowed);
5. report the staged assets' sizes.

Offline: no AWS account, no Docker, no CDK CLI. Exit status 0 only if every step passed.
Set CDK_DEFAULT_ACCOUNT / CDK_DEFAULT_REGION to check a region-bound synth (the Bedrock reranker's
region is checked then).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infra import bundle, bundle_check  # noqa: E402

ALLOWED_LINT = {"W3005"}
MB = 1024 * 1024


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.monotonic()


def _lint(template: Path) -> list[str]:
    from cfnlint.api import ManualArgs, lint

    region = os.environ.get("CDK_DEFAULT_REGION") or "us-east-1"
    matches = lint(template.read_text(), config=ManualArgs(regions=[region]))
    found = [m for m in matches if m.rule.id not in ALLOWED_LINT]
    return [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in found]


def main() -> int:
    failures: list[str] = []

    started = _step("bundle")
    report = bundle.build()
    for line in report.lines():
        print(f"  {line}")
    print(f"  ({'built' if report.built else 'up to date'} in {time.monotonic() - started:.1f} s)")

    started = _step("bundle import/invoke check")
    python = bundle_check.interpreter(report.python_version)
    if python is None:
        failures.append(f"no python{report.python_version} here: the bundle import check could not run")
        print(f"  FAIL {failures[-1]}")
    else:
        smoke = bundle_check.run(report, python)
        for line in smoke.lines():
            print(f"  {line}")
        if not smoke.ok:
            failures.append("the bundle import/invoke check failed")
    print(f"  ({time.monotonic() - started:.1f} s)")

    started = _step("synth + cdk-nag (AwsSolutions)")
    from infra.app import build_app

    with tempfile.TemporaryDirectory(prefix="evidence-deploy-check-") as outdir:
        app, _ = build_app(outdir=outdir)
        try:
            assembly = app.synth()
        except Exception as exc:  # cdk-nag's validation plugin fails the synth with its report
            failures.append(f"synth failed: {exc}")
            print(f"  FAIL {failures[-1]}")
            return _finish(failures)
        warnings = [
            f"{m.id}: {m.entry.data}"
            for artifact in assembly.stacks
            for m in artifact.messages
            if "warn" in str(m.level).lower()
        ]
        print(f"  ok   {len(assembly.stacks)} stack(s), no unacknowledged cdk-nag finding")
        for warning in warnings:
            print(f"  warn {warning}")

        _step("cfn-lint")
        for artifact in assembly.stacks:
            template = Path(outdir) / artifact.template_file
            found = _lint(template)
            print(f"  {'ok  ' if not found else 'FAIL'} {template.name}: {len(found)} finding(s)")
            for finding in found:
                print(f"       {finding}")
            if found:
                failures.append(f"cfn-lint: {template.name}")

        _step("staged assets (unzipped)")
        for artifact in assembly.stacks:
            manifest = json.loads((Path(outdir) / f"{artifact.stack_name}.assets.json").read_text())
            for asset in manifest["files"].values():
                source = Path(outdir) / asset["source"]["path"]
                size = bundle.tree_bytes(source) if source.is_dir() else source.stat().st_size
                kind = asset["source"].get("packaging", "file")
                print(f"  {size / MB:8.1f} MB  {kind:4}  {asset['source']['path']}")
    return _finish(failures)


def _finish(failures: list[str]) -> int:
    print()
    if failures:
        print("deploy-check: FAILED\n" + "\n".join(f"  - {f}" for f in failures))
        return 1
    print("deploy-check: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
