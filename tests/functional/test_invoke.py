"""`evidence invoke FUNCTION EVENT.json`: stdout is exactly the handler's response."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evidence.cli import main
from evidence.testing import events_dir
from evidence.version import package_version

ROOT = Path(__file__).resolve().parents[2]


def invoke(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    capfd.readouterr()
    code = main(["invoke", *argv])
    return code, capfd.readouterr().out.splitlines()


def test_retriever_events(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    code, out = invoke(capfd, "retriever", str(events_dir() / "apigw/unknown_index.json"), "--store", store)
    assert code == 0 and len(out) == 1
    response = json.loads(out[0])
    assert response["statusCode"] == 404
    assert json.loads(response["body"])["error"]["code"] == "index_not_found"


def test_planner_and_formatter_events(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    code, out = invoke(capfd, "planner", str(events_dir() / "planner/plan.json"), "--store", store)
    assert code == 0 and json.loads(out[0])["profile"] == "vrm"
    code, out = invoke(capfd, "formatter", str(events_dir() / "formatter/format.json"), "--store", store)
    assert code == 0 and json.loads(out[0])["valid_indexes"]
    code, out = invoke(capfd, "planner", str(events_dir() / "planner/bad_plan.json"), "--store", store)
    assert code == 1 and json.loads(out[0])["errorType"] == "RequestValidationError"


def test_unreadable_event_file(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    code, out = invoke(capfd, "retriever", str(bad))
    assert code == 2 and out == []


def test_every_event_file_is_json() -> None:
    files = sorted(events_dir().rglob("*.json"))
    assert len(files) >= 20
    for path in files:
        assert isinstance(json.loads(path.read_text()), dict), path


@pytest.mark.slow
def test_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("evidence")
    result = subprocess.run(
        [str(script), "invoke", "retriever", "events/apigw/health.json", "--store", str(tmp_path / "s")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {"status": "ok", "version": package_version()}
