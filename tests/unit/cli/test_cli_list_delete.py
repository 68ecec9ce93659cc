"""`evidence list`, `evidence delete` and `evidence query --filter`: outputs and exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from evidence.cli import main
from evidence.cli.common import CliError
from evidence.cli.query import filters_from_args


def _index(docs: Path, store: Path, *extra: str) -> None:
    assert main(["index", str(docs), "--index", "t", "--store", str(store), *extra]) == 0


def test_list_indexes_then_documents(docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert main(["list", "--store", str(store)]) == 0
    assert capsys.readouterr().out.strip() == f"no indexes in {store}"
    _index(docs, store)
    capsys.readouterr()
    assert main(["list", "--store", str(store)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["INDEX", "DOCUMENTS", "CHUNKS", "EMBEDDER"]
    assert lines[1].split()[:2] == ["t", "3"]
    assert main(["list", "--store", str(store), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["indexes"]
    assert (row["index"], row["documents"], row["embedder"]) == ("t", 3, "test/hashing-v1")

    assert main(["list", "--index", "t", "--store", str(store), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    ids = [d["document_id"] for d in listed["documents"]]
    assert ids == sorted(str(p.resolve()) for p in docs.rglob("*.*"))
    assert all(d["passages"] == 1 for d in listed["documents"])
    assert main(["list", "--index", "t", "--store", str(store)]) == 0
    text = capsys.readouterr().out
    assert "globex/policy.md" in text and text.strip().endswith("3 documents, 3 passages in 't'")


def test_list_an_unknown_index_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--index", "nope", "--store", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == (
        "evidence list: error: index 'nope' does not exist; index a document into it first"
    )


def test_delete_a_document_by_id_or_by_path(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    _index(docs, store)
    capsys.readouterr()
    target = docs / "acme" / "policy.md"
    assert main(["delete", "--index", "t", "--document", str(target.resolve()), "--store", str(store)]) == 0
    assert capsys.readouterr().out.strip() == f"deleted document {str(target.resolve())!r} from 't': 2 chunks"
    # The same document again: gone (exit 1, one line).
    assert main(["delete", "--index", "t", "--document", str(target.resolve()), "--store", str(store)]) == 1
    assert "is not in index 't'" in capsys.readouterr().err
    # A path as typed, relative to the working directory, names the document it was indexed as.
    monkeypatch.chdir(docs)
    assert main(["delete", "--index", "t", "--document", "globex/policy.md", "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["list", "--index", "t", "--store", str(store), "--json"]) == 0
    left = [d["document_id"] for d in json.loads(capsys.readouterr().out)["documents"]]
    assert left == [str((docs / "acme" / "retention.txt").resolve())]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_delete_all_asks_on_a_terminal_and_needs_yes_elsewhere(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    _index(docs, store)
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal
    assert main(["delete", "--index", "t", "--all", "--store", str(store)]) == 2
    assert capsys.readouterr().err.strip() == (
        "evidence delete: error: --all deletes index 't' (3 documents, 6 chunks); add --yes to confirm"
    )
    monkeypatch.setattr("sys.stdin", _Tty("n\n"))
    assert main(["delete", "--index", "t", "--all", "--store", str(store)]) == 1
    err = capsys.readouterr().err
    assert "delete index 't' (3 documents, 6 chunks)? [y/N]" in err and "nothing deleted" in err
    monkeypatch.setattr("sys.stdin", _Tty("y\n"))
    assert main(["delete", "--index", "t", "--all", "--store", str(store)]) == 0
    assert capsys.readouterr().out.strip() == "deleted index 't' (3 documents, 6 chunks)"
    assert main(["list", "--store", str(store)]) == 0
    assert capsys.readouterr().out.startswith("no indexes")
    _index(docs, store)
    assert main(["delete", "--index", "t", "--all", "--yes", "--store", str(store)]) == 0


def test_delete_needs_exactly_one_target(tmp_path: Path) -> None:
    for argv in (["delete", "--index", "t"], ["delete", "--index", "t", "--all", "--document", "x"]):
        with pytest.raises(SystemExit) as exit_:
            main([*argv, "--store", str(tmp_path)])
        assert exit_.value.code == 2


def test_filters_from_args() -> None:
    assert filters_from_args(["type=tc_files", "vendor=acme", "vendor=globex", "q=a=b"]) == {
        "type": "tc_files",
        "vendor": ["acme", "globex"],
        "q": "a=b",
    }
    with pytest.raises(CliError, match="--filter takes KEY=VALUE, got 'vendor'"):
        filters_from_args(["vendor"])


def test_query_filter_restricts_the_hits(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert (
        main(["index", str(docs / "acme"), "--index", "t", "--meta", "vendor=acme", "--store", str(store)])
        == 0
    )
    assert (
        main(
            ["index", str(docs / "globex"), "--index", "t", "--meta", "vendor=globex", "--store", str(store)]
        )
        == 0
    )
    capsys.readouterr()

    def sources(*filters: str) -> set[str]:
        argv = ["query", "policy data access encryption", "--index", "t", "--store", str(store)]
        argv += [arg for f in filters for arg in ("--filter", f)] + ["--format", "json"]
        assert main(argv) == 0
        return {h["metadata"]["vendor"] for h in json.loads(capsys.readouterr().out)["hits"]}

    assert sources() == {"acme", "globex"}
    assert sources("vendor=globex") == {"globex"}
    assert sources("vendor=acme", "vendor=globex") == {"acme", "globex"}
    assert sources("vendor=initech") == set()
    assert main(["query", "x", "--index", "t", "--filter", "novalue", "--store", str(store)]) == 2
    assert capsys.readouterr().err.strip() == "evidence query: error: --filter takes KEY=VALUE, got 'novalue'"
