"""`evidence index` into an embedded index written under other indexing settings (`search.written`):
exit 2 naming the setting and the fixes, nothing embedded or written; the fixes work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence.cli import main


def _documents(store: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(["list", "--index", "t", "--store", str(store), "--json"]) == 0
    return sorted(
        Path(d["document_id"]).parent.name for d in json.loads(capsys.readouterr().out)["documents"]
    )


def test_a_second_index_under_another_header_rule_exits_2(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    monkeypatch.setenv("EVIDENCE_SECTION_HEADER", "heading")
    assert main(["index", str(docs / "acme"), "--index", "t", "--store", str(store)]) == 0
    monkeypatch.delenv("EVIDENCE_SECTION_HEADER")
    capsys.readouterr()
    assert main(["index", str(docs / "globex"), "--index", "t", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "section_header='heading'" in err and "section_header='off'" in err
    assert "EVIDENCE_SECTION_HEADER=heading" in err and "evidence delete --index t --all" in err
    assert _documents(store, capsys) == ["acme", "acme"]  # nothing of globex written
    # The fixes: the index's setting, or the index deleted and written again under the new one.
    monkeypatch.setenv("EVIDENCE_SECTION_HEADER", "heading")
    assert main(["index", str(docs / "globex"), "--index", "t", "--store", str(store)]) == 0
    assert _documents(store, capsys) == ["acme", "acme", "globex"]
    monkeypatch.delenv("EVIDENCE_SECTION_HEADER")
    assert main(["delete", "--index", "t", "--all", "--yes", "--store", str(store)]) == 0
    assert main(["index", str(docs), "--index", "t", "--store", str(store)]) == 0
    assert _documents(store, capsys) == ["acme", "acme", "globex"]
