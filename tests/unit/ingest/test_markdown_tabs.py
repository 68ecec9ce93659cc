"""Content tabs in Markdown (`=== "Title"` over an indented block, pymdown-extensions / MkDocs
Material): the title is a line of its own and a fence indented under a tab is code, one span per
line (session 50, bench/data/session50/ingest22.md)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes

DOC = """# Brewing

Pick your kettle.

=== "Stove"
    Put the kettle on the hob and wait for the whistle.
=== "Electric"
    ```sh
    kettle --boil --cups 2
    kettle --keep-warm 10
    ```

Pour when it boils.
"""


def test_a_tab_title_and_its_indented_fence_are_not_run_into_prose() -> None:
    doc = parse_bytes(DOC.encode(), filename="brew.md")
    texts = [s.text for s in extract_spans(doc)]
    assert '=== "Stove"' in texts
    assert "Put the kettle on the hob and wait for the whistle." in texts
    assert '=== "Electric"' in texts
    assert "kettle --boil --cups 2" in texts
    assert "kettle --keep-warm 10" in texts
    assert "Pour when it boils." in texts
    assert not any("whistle" in t and "Electric" in t for t in texts)


def test_equals_signs_elsewhere_change_nothing() -> None:
    """A setext underline and `===` in prose are not tabs."""
    text = "Title\n=====\n\nThe test a === b holds.\nIt goes on here.\n"
    doc = parse_bytes(text.encode(), filename="t.md")
    assert doc.line_ends == ()
    assert [s.name for s in doc.sections] == ["Title"]
