"""The CLI contract of docs/contracts.md#cli: outputs, one-line errors and exit codes 0/1/2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evidence.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "policy.md").write_text("# Encryption\n\nData at rest is encrypted with AES-256.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    records = tmp_path / "followups.jsonl"
    records.write_text(
        json.dumps(
            {
                "id": "fu1",
                "text": "Question: Encrypted at rest?\nAnswer: Yes, AES-256.",
                "metadata": {
                    "type": "followup_response:1",
                    "round_number": 1,
                    "criterion_question": "Is data encrypted at rest?",
                    "question": "Encrypted at rest?",
                    "answer": "Yes, AES-256.",
                    "FILENAME": "Round 1",
                },
            }
        )
        + "\n"
    )
    s = tmp_path / "store"
    assert (
        main(["index", str(docs), "--index", "t", "--store", str(s), "--type", "tc_files"]) == 1
    )  # broken.pdf
    assert main(["index", str(records), "--index", "t", "--store", str(s)]) == 0
    return s


def _vrm_xml(store: Path) -> list[str]:
    """The vrm query whose stdout must be bare evidence XML, follow-ups last."""
    return [
        "query",
        "Is data encrypted at rest?",
        "--index",
        "t",
        "--store",
        str(store),
        "--profile",
        "vrm",
        "--format",
        "xml",
    ]


def test_query_formats(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert (
        main(["query", "encryption at rest", "--index", "t", "--store", str(store), "--format", "json"]) == 0
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and json.loads(out[0])["hits"]
    assert main(_vrm_xml(store)) == 0
    xml = capsys.readouterr().out
    assert xml.startswith("<index_1>") and xml.rstrip().endswith(">")
    root = ET.fromstring(f"<r>{xml}</r>")
    assert "Round 1" in root[-1].find("source").text  # type: ignore[union-attr, operator]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["index", "/no/such/path", "--index", "t"], 2, "no such file"),
        (["query", "  ", "--index", "t"], 2, "empty"),
        (["query", "x", "--index", "missing"], 1, "does not exist"),
        (["query", "x", "--index", "t", "--top-k", "0"], 2, "top_k"),
        (["query", "x", "--index", "BAD NAME"], 2, "index names"),
    ],
)
def test_errors_are_one_line_with_exit_codes(
    store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    capsys.readouterr()
    assert main([*argv, "--store", str(store)]) == code
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_bad_option_value_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["query", "x", "--index", "t", "--format", "yaml"])
    assert exit_.value.code == 2


def test_xml_stdout_stays_bare_when_logging_writes_to_stdout(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In Lambda, Powertools logs go to stdout. If such a handler is set up in the process (an
    earlier handler call, a test), the vrm pipeline's INFO logs ("Extracted follow-up responses")
    must still not reach the CLI's stdout: `--format xml` prints bare XML only."""
    import logging
    import sys

    class StdoutAtEmit(logging.StreamHandler):  # type: ignore[type-arg]
        @property
        def stream(self) -> object:
            return sys.stdout

        @stream.setter
        def stream(self, _: object) -> None:
            pass

    logger = logging.getLogger("evidence")
    handler = StdoutAtEmit()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        capsys.readouterr()
        assert main(_vrm_xml(store)) == 0
        captured = capsys.readouterr()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert "Extracted follow-up responses" in captured.err  # the log happened, on stderr
    assert captured.out.startswith("<index_1>")
    ET.fromstring(f"<r>{captured.out}</r>")


# --- verbatim: plan, eval --qa ----------------------------------------------------------------


@pytest.mark.slow
def test_plan_and_eval_qa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evidence.demo import DATA

    label, qa = DATA / "label" / "lipravex.md", DATA / "label" / "lipravex-qa.jsonl"
    s = str(tmp_path / "s")
    assert main(["index", str(label), "--index", "label", "--store", s]) == 0
    capsys.readouterr()
    assert main(["plan", "What is the t½ of ferlostatin?", "--index", "label", "--store", s, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (
        plan["profile"] == "verbatim" and plan["attribute"] == "half_life" and plan["entity"] == "ferlostatin"
    )
    assert main(["eval", "--qa", str(qa), "--index", "label", "--store", s, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["answer_recall"] >= 0.95
    # The refusal is fitted on bench/qa, never on this label: what it may cost here is the issue's
    # budget, at most 3 % of the answerable questions refused (1 of 75 with the agreement refit).
    refused_right = round(result["no_result_recall"] * result["unanswerable"])
    assert refused_right >= 1
    refused = round(refused_right / result["no_result_precision"])
    assert (refused - refused_right) / result["answerable"] <= 0.03
    assert main(["eval", "--qa", str(qa), "--store", s]) == 2
    assert "--qa needs --index" in capsys.readouterr().err
    assert main(["eval", "--store", s]) == 2
    assert main(["eval", "--qa", str(tmp_path / "missing.jsonl"), "--index", "label", "--store", s]) == 2


def test_index_names_every_skipped_file_and_refuses_links_leaving_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26: a link to a file outside the folder is an error line naming the link, not indexed."""
    import os

    (tmp_path / "outside.txt").write_text("root:x:0:0")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nInside.\n")
    (docs / "passwd.txt").symlink_to(tmp_path / "outside.txt")
    (docs / "gone.txt").symlink_to(tmp_path / "nowhere")
    os.mkfifo(docs / "pipe.txt")
    monkeypatch.chdir(tmp_path)
    assert main(["index", "docs", "--index", "t", "--store", "store"]) == 1
    err = capsys.readouterr().err
    assert "error: docs/passwd.txt: skipped: symlink to " in err and "--follow-symlinks" in err
    assert "error: docs/gone.txt: skipped: dangling symlink" in err
    assert "error: docs/pipe.txt: skipped: a FIFO, not a regular file" in err
    assert main(["index", "docs", "--index", "t", "--store", "store", "--follow-symlinks"]) == 1
    assert "docs/passwd.txt" not in capsys.readouterr().err
