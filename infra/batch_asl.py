"""The batch state machine's ASL, taken from the synthesized stack (`make batch-asl`).

`python -m infra.batch_asl [--out build/asl/batch.json]` synthesizes the stack in-process (no
CDK CLI, no Docker; placeholder Lambda assets: the definition does not depend on the code) with
cdk.json's context, and writes the state machine's `DefinitionString` as in the template, with
the logical ids of the functions its tasks invoke and of the results bucket
(`evidence.local_sfn.AslBundle`). `evidence serve` runs API-started batches on it when
`EVIDENCE_BATCH_LOCAL_ASL` names that file; `make batch-e2e` and the functional tests run it too.

A synth takes 10-50 s: `bundle(cache=...)` keeps the result keyed by a hash of every file the
definition can depend on (infra/, shared/evidence/, cdk.json, uv.lock), so an edit to the CDK
construct is always a new synth.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
ROOT = Path(__file__).resolve().parent.parent

from evidence.local_sfn import AslBundle  # noqa: E402

DEFAULT_OUT = ROOT / "build" / "asl" / "batch.json"
CACHE_DIR = ROOT / "build" / "asl" / "cache"


def from_stack(stack: Any, template: dict[str, Any]) -> AslBundle:
    """The batch state machine of a synthesized `EvidenceStack` and its template."""
    machine = stack.get_logical_id(stack.batch.state_machine.node.default_child)
    properties = template["Resources"][machine]["Properties"]
    functions = {
        stack.get_logical_id(fn.node.default_child): name for name, fn in stack.functions.functions.items()
    }
    return AslBundle(
        definition=properties["DefinitionString"],
        functions=functions,
        results_bucket=stack.get_logical_id(stack.storage.results.node.default_child),
        name=str(properties.get("StateMachineName", "evidence-batch")),
    )


def synth_bundle(context: dict[str, object] | None = None) -> AslBundle:
    """Synthesize the app as `make synth` does (cdk.json's context, cdk-nag), placeholder assets."""
    from aws_cdk.assertions import Template

    from infra.app import build_app

    with tempfile.TemporaryDirectory(prefix="evidence-asl-") as outdir:
        _, stack = build_app({"evidence:assets": "placeholder", **(context or {})}, outdir=outdir)
        template = dict(Template.from_stack(stack).to_json())
        return from_stack(stack, template)


def source_hash() -> str:
    digest = hashlib.sha256()
    files = [ROOT / "cdk.json", ROOT / "uv.lock"]
    for folder in (ROOT / "infra", ROOT / "shared" / "evidence"):
        files.extend(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    for path in sorted(files):
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def bundle(cache: Path | None = CACHE_DIR) -> AslBundle:
    """The current ASL: from the cache when nothing it depends on changed, else a new synth."""
    path = cache / f"{source_hash()}.json" if cache is not None else None
    if path is not None and path.is_file():
        return AslBundle.load(path)
    found = synth_bundle()
    if path is not None:
        write(found, path)
    return found


def write(found: AslBundle, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(found.to_json(), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT.relative_to(ROOT)}"
    )
    parser.add_argument("--no-cache", action="store_true", help="synthesize even if nothing changed")
    args = parser.parse_args(argv)
    found = bundle(cache=None if args.no_cache else CACHE_DIR)
    write(found, args.out)
    print(
        f"{args.out}: state machine {found.name}, tasks invoke {', '.join(sorted(found.functions.values()))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
