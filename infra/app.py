"""CDK app entry point: `python infra/app.py` (what `make synth` and `cdk.json` run).

Flags are CDK context values (`cdk.json`, or `cdk deploy -c evidence:search=serverless`);
docs/infra.md lists them. cdk-nag's AwsSolutions pack runs on every synth
(acknowledgements with reasons: infra/evidence_infra/nag.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aws_cdk import App, Environment, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.evidence_infra.stack import EvidenceStack  # noqa: E402


def _cdk_json_context() -> dict[str, object]:
    """cdk.json's context when run without the CLI (the CLI passes it itself, in CDK_CONTEXT_JSON)."""
    if "CDK_CONTEXT_JSON" in os.environ or not (ROOT / "cdk.json").exists():
        return {}
    return dict(json.loads((ROOT / "cdk.json").read_text()).get("context", {}))


def build_app(
    context: dict[str, object] | None = None, outdir: str | None = None
) -> tuple[App, EvidenceStack]:
    context = {**_cdk_json_context(), **(context or {})}
    # The CDK CLI passes CDK_OUTDIR; run directly (`make synth`), the assembly goes to ./cdk.out.
    app = App(context=context, outdir=outdir or os.environ.get("CDK_OUTDIR") or str(ROOT / "cdk.out"))
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    env = Environment(account=account, region=region) if account and region else None
    stack = EvidenceStack(app, "Evidence", env=env)
    # cdk-nag v3 is a policy-validation plugin: synth fails on any unacknowledged finding.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


def main() -> None:
    app, _ = build_app()
    app.synth()


if __name__ == "__main__":
    main()
