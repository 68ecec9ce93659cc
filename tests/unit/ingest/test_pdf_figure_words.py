"""Words inside a PDF figure or a table's header cells are no headings (session 45, pdf17).

A figure's box labels and a table's header row come out of pypdf as short heading-styled lines one
after the other with no text between them (`pdf.figure_words`)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes
from evidence.records import ParsedDocument
from tests.unit.ingest.ingestkit import StyledLine, make_pdf

_BODY = [
    "The interpreter records a trace when a loop becomes hot, and the",
    "compiled trace then runs until a guard fails and control returns.",
]


def _names(doc: ParsedDocument) -> list[str]:
    return [s.name for s in doc.sections]


def test_the_labels_of_a_figure_are_no_headings() -> None:
    page: list[str | StyledLine] = [
        ("Overview", 16, True),
        *_BODY,
        # A state machine's boxes: large, bold and regular in turn, nothing between them.
        ("Interpret", 14, True),
        ("Bytecodes", 14, False),
        ("Execute", 14, True),
        ("Compiled Trace", 14, False),
        ("Leave", 14, True),
        "Figure 2. State machine of the tracing monitor.",
        *_BODY,
        ("Trace Trees", 16, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="paper.pdf")
    assert _names(doc) == ["Overview", "Trace Trees"]
    text = " ".join(s.text for s in extract_spans(doc))
    for word in ("Interpret", "Bytecodes", "Compiled Trace"):
        assert word in text  # the figure's words stay text


def test_a_table_header_row_between_glyph_lines_gives_no_headings() -> None:
    # Header cells set bold at body size, a flag glyph (no letter or digit) between them.
    page: list[str | StyledLine] = [
        ("Countries", 16, True),
        *_BODY,
        ("Indonesia", 12, True),
        "*",
        ("Germany", 12, True),
        "*",
        ("Austria", 12, True),
        "Jakarta",
        "Berlin",
        "Vienna",
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="table.pdf")
    assert _names(doc) == ["Countries"]


def test_real_headings_one_after_another_in_different_styles_stay() -> None:
    page: list[str | StyledLine] = [
        ("Treatment", 20, True),
        ("Acute Pain", 16, True),
        ("Nonopioid Therapies", 14, True),
        *_BODY,
        ("Opioid Therapy", 14, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="guide.pdf")
    assert _names(doc) == ["Treatment", "Acute Pain", "Nonopioid Therapies", "Opioid Therapy"]


def test_numbered_and_all_caps_headings_in_a_run_stay() -> None:
    # A contents list set bold: numbered headings are never figure words; neither are ALL-CAPS ones.
    page: list[str | StyledLine] = [
        ("1 Scope", 14, True),
        ("2 Terms", 14, False),
        ("3 Methods", 14, True),
        ("WARNINGS", 12, False),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="contents.pdf")
    assert _names(doc) == ["1 Scope", "2 Terms", "3 Methods", "WARNINGS"]
