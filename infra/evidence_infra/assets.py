"""Lambda code assets: the real bundle from infra/bundle.py, or placeholders for synth-only tests."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from aws_cdk import AssetHashType
from aws_cdk import aws_lambda as lambda_

from infra import bundle

from .settings import AssetMode, InfraSettings

PLACEHOLDER_HANDLER = '''"""Placeholder (infra/evidence_infra/assets.py) for synth tests: never deploy it."""


def handler(event, context):
    raise RuntimeError("placeholder asset: build the real bundle with `python infra/bundle.py`")


on_event = handler
'''


@dataclass(frozen=True)
class Assets:
    layer: lambda_.Code
    functions: dict[str, lambda_.Code]
    version: str  # changes when any bundled input changes; drives the setup custom resource


@lru_cache(maxsize=1)
def _placeholder_dir() -> Path:
    root = Path(tempfile.mkdtemp(prefix="evidence-placeholder-"))
    (root / "layer" / "python").mkdir(parents=True)
    (root / "layer" / "python" / "PLACEHOLDER").write_text("synth-only placeholder layer\n")
    for name in bundle.FUNCTIONS:
        folder = root / "functions" / name
        folder.mkdir(parents=True)
        module = "search_setup.py" if name == "search_setup" else "handler.py"
        (folder / module).write_text(PLACEHOLDER_HANDLER)
    return root


def load_assets(settings: InfraSettings) -> Assets:
    if settings.assets is AssetMode.PLACEHOLDER:
        root = _placeholder_dir()
        return Assets(
            layer=lambda_.Code.from_asset(str(root / "layer")),
            functions={
                name: lambda_.Code.from_asset(str(root / "functions" / name)) for name in bundle.FUNCTIONS
            },
            version="placeholder",
        )
    report = bundle.build(python_version=settings.lambda_python)
    if report.built:
        for line in report.lines():
            print(f"bundle: {line}", file=sys.stderr)

    def code(path: Path, salt: str) -> lambda_.Code:
        # The bundle's own input hash: CDK need not fingerprint 200 MB of files on every synth.
        return lambda_.Code.from_asset(
            str(path),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=f"{report.input_hash}-{salt}",
        )

    return Assets(
        layer=code(report.layer_dir, "layer"),
        functions={name: code(report.function_dir(name), name) for name in bundle.FUNCTIONS},
        version=report.input_hash,
    )
