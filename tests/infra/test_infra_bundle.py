"""The real Lambda bundle (infra/bundle.py): runtime-only, under Lambda's size limit, wheels for the
runtime's platform, and every handler importable from it in a clean interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from infra import bundle

pytestmark = [pytest.mark.infra, pytest.mark.slow]

FORBIDDEN_MODULES = (
    "aws_cdk",
    "constructs",
    "cdk_nag",
    "jsii",
    "moto",
    "pytest",
    "_pytest",
    "hypothesis",
    "cfnlint",
    "torch",
    "sympy",
)


@pytest.fixture(scope="module")
def report() -> bundle.BundleReport:
    return bundle.build()


def test_layer_holds_runtime_dependencies_only(report: bundle.BundleReport) -> None:
    site = report.layer_dir / "python"
    present = {p.name for p in site.iterdir()}
    assert {"evidence", "pydantic", "onnxruntime", "opensearchpy", "aws_lambda_powertools"} <= present
    assert not present.intersection(FORBIDDEN_MODULES)
    assert not list(site.rglob("tests")), "test folders are pruned"
    assert not list(site.rglob("*.pyi"))
    assert (site / "evidence" / "embed" / "data" / "tokenizer.json").is_file()


def test_sizes_fit_lambda_limit(report: bundle.BundleReport) -> None:
    assert set(report.function_bytes) == set(bundle.FUNCTIONS)
    for name, size in report.function_bytes.items():
        assert size < 1024 * 1024, f"{name}: handler code only"
        assert size + report.layer_bytes < bundle.LAMBDA_LIMIT_BYTES
    print("\n" + "\n".join(report.lines()))


def _tag_ok(tag: str, python_version: str) -> bool:
    py, abi, plat = tag.split("-")
    minor = int(python_version.split(".")[1])
    py_ok = any(
        p in {"py3", "py2", f"cp3{minor}"}
        or (abi == "abi3" and re.fullmatch(r"cp3\d+", p) is not None and int(p[3:]) <= minor)
        for p in py.split(".")
    )
    plat_ok = plat == "any" or any(
        p in {"manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"}
        or ((m := re.fullmatch(r"manylinux_2_(\d+)_x86_64", p)) is not None and int(m.group(1)) <= 34)
        for p in plat.split(".")
    )
    return py_ok and plat_ok


def test_every_wheel_matches_the_lambda_platform(report: bundle.BundleReport) -> None:
    """Amazon Linux 2023 (glibc 2.34), x86_64, the runtime's CPython: each wheel has a tag for it."""
    wheels = list((report.layer_dir / "python").glob("*.dist-info/WHEEL"))
    assert len(wheels) > 20
    for wheel in wheels:
        tags = [
            line.split(":", 1)[1].strip()
            for line in wheel.read_text().splitlines()
            if line.startswith("Tag:")
        ]
        assert any(_tag_ok(t, report.python_version) for t in tags), (wheel.parent.name, tags)


def test_unchanged_inputs_are_not_rebuilt(report: bundle.BundleReport) -> None:
    first = bundle.build()  # rebuilds only if a source changed since the fixture ran
    started = time.monotonic()
    again = bundle.build()
    assert again.built is False and again.input_hash == first.input_hash
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("name", sorted(bundle.FUNCTIONS))
def test_handler_imports_from_its_bundle_in_a_clean_interpreter(
    report: bundle.BundleReport, name: str
) -> None:
    python = bundle.target_python(report.python_version)
    if python is None:
        pytest.skip(f"no python{report.python_version} here: the wheel-tag test covers the platform")
    src, handler = bundle.FUNCTIONS[name]
    if not src.is_dir():
        pytest.fail(f"{src} is missing")
    module, function = handler.split(".")
    code = (
        "import sys; "
        f"sys.path[:0] = [{str(report.function_dir(name))!r}, {str(report.layer_dir / 'python')!r}]; "
        f"import {module}; assert callable({module}.{function}); "
        f"assert {module}.__file__.startswith({str(report.function_dir(name))!r}); "
        "import evidence; assert evidence.__file__.startswith(sys.path[1]); "
        "heavy = [m for m in ('onnxruntime', 'opensearchpy', 'cohere', 'boto3') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    # -I: no PYTHONPATH, no user site, no cwd; -B: do not write .pyc into the bundle. The env is what
    # the function gets (minus AWS credentials), so settings parse as they will on Lambda.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_REGION": "eu-west-1",
        "LANG": "C.UTF-8",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_SERVICE_NAME": f"evidence-{name}",
        "LOG_LEVEL": "INFO",
        "EVIDENCE_BACKEND": "opensearch",
        "EVIDENCE_OPENSEARCH_ENDPOINT": "https://vpc-x.eu-west-1.es.amazonaws.com",
        "EVIDENCE_OPENSEARCH_SERVICE": "es",
        "EVIDENCE_AWS_REGION": "eu-west-1",
        "EVIDENCE_RERANKER": "bedrock",
        "EVIDENCE_RESULTS_BUCKET": "results",
    }
    done = subprocess.run(
        [str(python), "-I", "-B", "-c", code],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(Path(report.function_dir(name)).rglob("*.cpython-311.pyc"))
