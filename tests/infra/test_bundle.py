"""The real Lambda bundle (infra/bundle.py): runtime-only, under Lambda's size limit, wheels for the
runtime's platform, and every handler importable from it in a clean interpreter."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest

from infra import bundle, bundle_check

pytestmark = [pytest.mark.infra, pytest.mark.slow]

FORBIDDEN_MODULES = (*bundle_check.TOOLING_MODULES, "torch", "sympy")


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
    assert (site / f"evidence-{bundle.project_version()}.dist-info" / "METADATA").is_file()


def test_the_layer_dist_info_gives_health_the_package_version(tmp_path: Path) -> None:
    from importlib.metadata import Distribution

    info = bundle.write_dist_info(tmp_path, "9.8.7")
    dist = Distribution.at(info)
    assert (dist.metadata["Name"], dist.version) == ("evidence", "9.8.7")


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


@pytest.fixture(scope="module")
def python(report: bundle.BundleReport) -> Path:
    found = bundle_check.interpreter(report.python_version)  # raises under CI=true when missing
    if found is None:
        pytest.skip(f"no python{report.python_version} here (CI fails instead of skipping)")
    return found


def test_layer_leaves_developer_tools_out(report: bundle.BundleReport) -> None:
    package = report.layer_dir / "python" / "evidence"
    left = sorted(p.name for p in package.iterdir() if p.name.removesuffix(".py") in bundle.DEV_MODULES)
    assert left == []
    assert (package / "service.py").is_file() and (package / "api" / "indexer.py").is_file()
    assert not (package / "demo").exists(), "the demo's sample documents stay out"
    assert bundle.check_layer_imports(package) == []


def test_an_import_of_a_developer_tool_fails_the_build_check(tmp_path: Path) -> None:
    package = tmp_path / "evidence"
    (package / "api").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "api" / "__init__.py").write_text("")
    (package / "api" / "x.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from evidence.cli import main\n"  # typing only: allowed
        "def f():\n    from ..testing import lambda_context\n    import evidence.demo.data\n"
    )
    problems = bundle.check_layer_imports(package)
    assert [p.split(" imports ")[1].split(",")[0] for p in problems] == [
        "evidence.testing",
        "evidence.testing.lambda_context",
        "evidence.demo.data",
    ]


def test_pyc_carry_lambda_paths_not_the_build_machine(report: bundle.BundleReport) -> None:
    if not report.precompiled:
        pytest.skip("no .pyc: no local interpreter of the runtime's version")
    pycs = list(report.layer_dir.rglob("*.pyc")) + list(
        (report.layer_dir.parent / "functions").rglob("*.pyc")
    )
    assert len(pycs) > 1000
    needle = str(bundle.ROOT).encode()
    assert not [p for p in pycs if needle in p.read_bytes()], "a .pyc embeds the build machine's path"
    config = next((report.layer_dir / "python" / "evidence" / "__pycache__").glob("config.*.pyc"))
    assert b"/opt/python/evidence/config.py" in config.read_bytes()
    handler = next((report.function_dir("indexer") / "__pycache__").glob("handler.*.pyc"))
    assert b"/var/task/handler.py" in handler.read_bytes()


def test_every_handler_runs_from_its_bundle_on_its_events(report: bundle.BundleReport, python: Path) -> None:
    """Each function folder + the layer, nothing else, in a clean interpreter of the runtime's
    Python: the handlers answer their events/ samples against moto (S3) and the embedded backend,
    and none imports CDK, moto, pytest or a developer module."""
    smoke = bundle_check.run(report, python)
    print("\n" + "\n".join(smoke.lines()))
    assert smoke.ok, "\n".join(smoke.lines())
    assert {o.function for o in smoke.outcomes} == set(bundle.FUNCTIONS)


def test_an_import_of_moto_in_a_handler_is_caught(
    report: bundle.BundleReport, python: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "functions" / "indexer"
    fake.mkdir(parents=True)
    (fake / "handler.py").write_text(
        "def handler(event, context):\n    import moto  # noqa\n    return {'batchItemFailures': []}\n"
    )
    fake_report = dataclasses.replace(report)
    fake_report.function_dir = lambda name: fake  # type: ignore[method-assign]
    smoke = bundle_check.run(
        fake_report, python, plan={"indexer": [("test", "sqs/s3_test_event.json", "no_batch_failures")]}
    )
    assert not smoke.ok
    assert any("moto" in p for p in smoke.problems), smoke.lines()
