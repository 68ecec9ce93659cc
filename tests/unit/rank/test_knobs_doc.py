"""docs/ranking.md's knob table is the code's: regenerate it with
`python -m evidence.rank.knobs --write docs/ranking.md` when a default changes."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from evidence.rank import knobs
from evidence.rank.context import ProfileParams

DOC = Path(__file__).resolve().parents[3] / "docs" / "ranking.md"


def test_the_doc_table_is_the_code_table() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert knobs.with_table(doc) == doc, "run: python -m evidence.rank.knobs --write docs/ranking.md"


def test_every_knob_has_a_row_and_every_profile_a_column() -> None:
    table = knobs.render_table()
    for f in fields(ProfileParams):
        assert f"| `{f.name}` |" in table
    assert table.splitlines()[0].startswith("| knob | `default` | `vrm` | `verbatim` | `coach` |")


def test_a_changed_default_changes_the_table() -> None:
    defaults = knobs.profile_defaults()
    defaults["coach"] = replace(defaults["coach"], max_chars=700)
    table = knobs.render_table(defaults)
    row = next(r for r in table.splitlines() if r.startswith("| `max_chars` |"))
    assert row.split(" | ")[1:5] == ["off", "off", "1500", "700"]
    doc = DOC.read_text(encoding="utf-8")
    assert knobs.with_table(doc, table) != doc


def test_a_doc_without_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        knobs.with_table("no table here")
