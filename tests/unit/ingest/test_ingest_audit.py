"""bench/ingest_audit.py reads a document's defects off its parse (docs/ingest.md, "Ingestion audit")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.benchkit import load_bench

audit: Any = load_bench("ingest_audit.py", "ingest_audit")


def test_audit_reports_sections_spans_lost_words_and_odd_characters(tmp_path: Path) -> None:
    doc = tmp_path / "policy.md"
    doc.write_text(
        "# Policy\n\n## Scope\n\nThe policy applies to all staff.\n\n## Keys\n\n"
        "Keys are rotated every 90 days. Encryp\u00adtion is required.\n",
        encoding="utf-8",
    )
    row = audit.audit(doc, 3)
    assert row["sections"] == 3 and row["depth"] == 2
    assert row["spans"] == 3 and row["long_spans"] == 0
    assert row["lost_words"] == 0  # the soft hyphen is gone from the parsed text, not a word
    assert row["odd"] == {}
    assert "== policy.md (md" in audit.show(row)


def test_audit_names_a_document_it_cannot_parse(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\u200b\n", encoding="utf-8")
    row = audit.audit(empty, 3)
    assert "error" in row and "empty document" in row["error"]


def test_a_changelog_version_or_date_heading_is_no_junk() -> None:
    """A heading without a letter is junk ("{", ".", a page number "12"), but for a release's
    version or date, as a changelog has them ("[20260107]", "[3.11.3] - 2026-11-05")."""
    for name in (
        "[20260107]",
        "[3.11.3] - 2026-11-05",
        "3.5.1",
        "v2.0",
        "2024-01-31",
        "[1.0] \u2013 2019-12-02",
    ):
        assert audit.junk_heading(name) is None, name
    for name in ("{", ".", "12", "--", "(1)", "| 3 | 4 |"):
        assert audit.junk_heading(name) == "no letter", name
