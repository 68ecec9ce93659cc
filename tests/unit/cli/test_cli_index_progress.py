"""`evidence index` on a terminal: per-file progress (files, passages, rate, ETA) and a summary;
elsewhere the summary only. Error lines name files the way sources are named."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from evidence.cli import main
from evidence.progress import FileProgress, Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@dataclass(frozen=True)
class State:
    files: int
    total_files: int | None
    documents: int = 0
    passages: int = 0
    failed: int = 0
    current: str = ""


def test_the_line_shows_files_passages_rate_and_eta() -> None:
    bar = FileProgress("indexing into t", stream=Tty())
    assert bar.line(State(3, 12, 3, 40, 1, "docs/c.pdf"), elapsed=6.0) == (
        "indexing into t [######------------------] 3/12 files, 40 passages written, 1 failed, 0.5 files/s, "
        "ETA 18s  docs/c.pdf"
    )
    done = bar.line(State(12, 12, 12, 160), elapsed=24.0)
    assert "12/12 files" in done and "ETA" not in done
    # One input (a BEIR corpus): its records move, no ETA from one file.
    one = bar.line(State(0, 1, 512, 600, current="corpus.jsonl"), elapsed=2.0)
    assert one == "indexing into t:, 600 passages written, 512 documents (256.0/s)  corpus.jsonl"
    assert "ETA 2m05s" in bar.line(State(1, 126), elapsed=1.0)
    # On a narrow terminal the file keeps its end (its name), or goes when there is no room.
    narrow = bar.line(
        State(3, 12, current="corpus/vendors/acme/policies/security.md"), elapsed=6.0, width=110
    )
    assert len(narrow) == 110 and narrow.endswith("  …/security.md")
    assert bar.line(State(3, 12, current="a/b.md"), elapsed=6.0, width=60).endswith("ETA 18s")


def test_redraws_in_place_on_a_terminal_and_stays_silent_elsewhere() -> None:
    tty = Tty()
    bar = FileProgress("indexing into t", stream=tty)
    bar(State(1, 2, current="a.md"))
    bar(State(2, 2, current="b.md"))  # the last one is always drawn, however soon
    bar.close()
    out = tty.getvalue()
    assert out.count("\r") == 2 and out.endswith("\x1b[K\n")
    assert "2/2 files" in out
    pipe = io.StringIO()
    quiet = FileProgress("indexing into t", stream=pipe)
    quiet(State(1, 1))
    quiet.close()
    assert pipe.getvalue() == ""


def test_the_count_bar_draws_on_a_terminal_ends_its_line_and_stays_silent_elsewhere() -> None:
    tty = Tty()
    bar = Progress("eval qa", stream=tty)
    bar(2, 4, "questions")
    bar(4, 4, "questions")  # the last one is always drawn, however soon
    bar.close()
    out = tty.getvalue()
    assert out.count("\r") == 2 and out.endswith("/s)\n")
    assert out.split("\r")[-1].startswith("eval qa [########################] 4/4 questions (")
    unused = Tty()
    Progress("eval qa", stream=unused).close()  # nothing drawn: no newline either
    assert unused.getvalue() == ""
    pipe = io.StringIO()
    quiet = Progress("eval qa", stream=pipe)
    quiet(1, 1, "questions")
    quiet.close()
    assert pipe.getvalue() == ""


def test_index_shows_progress_on_a_terminal(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["index", str(docs), "--index", "t", "--store", str(tmp_path / "s")]) == 0
    frames = [f for f in tty.getvalue().split("\r") if f]
    assert frames[-1].startswith("indexing into t [########################] 3/3 files, 3 passages written")
    assert re.search(r"\d+/3 files", frames[0])
    summary = capsys.readouterr().out.strip().splitlines()
    assert len(summary) == 1
    assert re.fullmatch(
        r"indexed 3 documents into 't' \(3 new, 0 updated, 0 unchanged; 3 passages, 3 spans\) in \d+\.\ds",
        summary[0],
    )


def test_index_without_a_terminal_prints_the_summary_only(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(docs), "--index", "t", "--store", str(tmp_path / "s")]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.startswith("indexed 3 documents into 't' (3 new")


def test_error_lines_name_files_as_sources_are_named(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """However the folder was typed (relative, `..`, absolute), a failing file is named relative
    to the working directory when below it, else absolute, and a parse error names the path, not
    the bare file name."""
    (docs / "acme" / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (docs / "acme" / "photo.png").write_bytes(b"\x89PNG")
    (docs / "acme" / "records.jsonl").write_text('{"text": "fine"}\n{oops\n')
    store = str(tmp_path / "s")
    expected = {
        "acme/broken.pdf: corrupt PDF",
        "acme/photo.png: unsupported file type",
        "acme/records.jsonl:2: invalid JSON",
    }
    for typed in ("acme", "./acme/../acme", str(docs / "acme")):
        monkeypatch.chdir(docs)
        assert main(["index", typed, "--index", "t", "--store", store]) == 1
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == len(expected), lines
        assert all(any(line.startswith(f"error: {e}") for line in lines) for e in expected), lines
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the file is not below: its absolute path
    assert main(["index", str(docs / "acme" / "broken.pdf"), "--index", "t", "--store", store]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {(docs / 'acme' / 'broken.pdf').resolve()}: corrupt PDF")
