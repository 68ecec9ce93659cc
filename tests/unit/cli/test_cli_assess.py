"""`evidence assess`: a bad criterion fails alone, exit 1 when any failed, 0 only if all succeeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence.cli import main


@pytest.fixture
def store(docs: Path, tmp_path: Path) -> str:
    s = str(tmp_path / "store")
    assert main(["index", str(docs), "--index", "t", "--store", s]) == 0
    return s


def _assess(criteria: Path, store: str, out: Path, *extra: str) -> int:
    return main(
        ["assess", "--index", "t", "--criteria", str(criteria), "--out", str(out), "--store", store, *extra]
    )


def test_all_ok_is_exit_0(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    criteria = tmp_path / "c.jsonl"
    criteria.write_text('{"id": "ENC", "question": "Is data encrypted at rest?"}\n{"question": "MFA?"}\n')
    out = tmp_path / "r.jsonl"
    capsys.readouterr()
    assert _assess(criteria, store, out) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in lines] == [("ENC", "ok"), ("2", "ok")]
    assert "assessed 2 criteria: 2 ok, 0 failed" in capsys.readouterr().err


def test_an_invalid_criterion_fails_alone_and_the_exit_is_1(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    criteria = tmp_path / "c.jsonl"
    criteria.write_text(
        '{"id": "ENC", "question": "Is data encrypted at rest?"}\n'
        '{"id": "EMPTY", "question": ""}\n'
        "not json\n"
        '{"id": "MFA", "question": "Is production access protected by MFA?"}\n'
        '{"id": "BLANK", "question": " \\t "}\n'
    )
    out = tmp_path / "r.jsonl"
    capsys.readouterr()
    assert _assess(criteria, store, out) == 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in lines] == [
        ("ENC", "ok"),
        ("EMPTY", "failed"),
        ("3", "failed"),
        ("MFA", "ok"),
        ("BLANK", "failed"),
    ]
    assert lines[4]["error"]["code"] == "validation_error"
    assert lines[0]["evidence_xml"].startswith("<index_1>")
    assert lines[1]["error"]["code"] == "validation_error"
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"assessed 5 criteria: 2 ok, 3 failed → {out}"
    assert err[1].startswith("evidence assess: EMPTY: ") and "c.jsonl:2:" in err[1]
    assert err[2].startswith("evidence assess: 3: ") and "c.jsonl:3: not JSON" in err[2]


def test_every_criterion_failing_is_exit_1(store: str, tmp_path: Path) -> None:
    criteria = tmp_path / "c.jsonl"
    criteria.write_text('{"id": "A", "question": "Encrypted?"}\n')
    out = tmp_path / "r.jsonl"
    # An unknown profile fails each criterion in the chain (not the batch): all failed, exit 1.
    assert _assess(criteria, store, out, "--profile", "nope") == 1
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["status"] == "failed" and "nope" in line["error"]["message"]


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        (None, [], "c.jsonl: cannot read"),
        ("\n\n", [], "c.jsonl: no criteria"),
        ('{"question": "x"}\n', ["--index", "BAD NAME"], "index"),
    ],
)
def test_a_refused_batch_is_exit_2(
    store: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    content: str | None,
    argv: list[str],
    message: str,
) -> None:
    criteria = tmp_path / "c.jsonl"
    if content is not None:
        criteria.write_text(content)
    capsys.readouterr()
    assert main(["assess", "--index", "t", "--criteria", str(criteria), "--store", store, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("evidence assess: error: ") and message in err
