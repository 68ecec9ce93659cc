"""PDF headings from typography and numbering, and words hyphenated at line ends (issue 22 item 4)."""

from __future__ import annotations

from collections import Counter

import pytest

from evidence.ingest import extract_spans, parse_bytes
from evidence.ingest.parsers.pdf import is_pdf_heading
from evidence.ingest.parsers.pdf_style import dehyphenate, vocabulary
from evidence.records import ParsedDocument, SpanType
from tests.unit.ingest.ingestkit import StyledLine, make_pdf

_BODY = [
    "Clinicians should weigh the benefits and risks with each patient",
    "before a first prescription, and review them at every visit after.",
]


def _sections(doc: ParsedDocument) -> list[tuple[int, str]]:
    return [(s.level, s.name) for s in doc.sections]


def _spans_are_verbatim(doc: ParsedDocument) -> None:
    for span in extract_spans(doc):
        assert doc.text[span.char_start : span.char_end] == span.text


def test_larger_and_bold_lines_are_headings_levelled_by_size() -> None:
    chapter: StyledLine = ("Treatment of Acute Pain", 18, True)
    page: list[str | StyledLine] = [
        chapter,
        ("Nonopioid Therapies", 14, True),
        *_BODY,
        ("Opioid Therapy", 14, True),
        *_BODY,
        ("Treatment of Chronic Pain", 18, True),
        ("Tapering", 14, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="guide.pdf")
    assert _sections(doc) == [
        (1, "Treatment of Acute Pain"),
        (2, "Nonopioid Therapies"),
        (2, "Opioid Therapy"),
        (1, "Treatment of Chronic Pain"),
        (2, "Tapering"),
    ]
    section_of = {s.text: s.section for s in extract_spans(doc)}
    assert "Tapering" in section_of.values()
    _spans_are_verbatim(doc)


def test_bold_at_body_size_is_a_heading_but_a_bold_paragraph_is_not() -> None:
    warning = [
        (line, 12, True)
        for line in (
            "Do not exceed the dose you were",
            "prescribed, and do not share this",
            "medicine with anyone else at all",
        )
    ]
    page: list[str | StyledLine] = [
        ("Storage and Handling", 12, True),
        *_BODY,
        *warning,
        *_BODY,
        ("Before starting treatment and during continuation of", 12, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="leaflet.pdf")
    # A run of three bold lines is emphasised prose; a bold line ending on "of" is a sentence's start.
    assert [name for _, name in _sections(doc)] == ["Storage and Handling"]
    assert any("Do not exceed the dose" in s.text for s in extract_spans(doc))


def test_heading_wrapped_over_two_lines_is_one_heading() -> None:
    page: list[str | StyledLine] = [
        ("Determining Whether or Not to Initiate", 16, True),
        ("Opioids for Pain", 16, True),
        *_BODY,
        ("Selecting Opioids and Dosages", 16, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="guide.pdf")
    assert [name for _, name in _sections(doc)] == [
        "Determining Whether or Not to Initiate Opioids for Pain",
        "Selecting Opioids and Dosages",
    ]
    first = doc.sections[0]
    assert doc.text[first.char_start : first.char_start + len(first.name)] == first.name
    # The heading's second line is not glued onto the prose after it.
    assert not any(s.text.startswith("Opioids for Pain") for s in extract_spans(doc))
    _spans_are_verbatim(doc)


def test_body_text_set_larger_in_one_place_only_is_not_a_run_of_headings() -> None:
    """A document whose body is one size: no typographic headings, only the rule-based ones."""
    doc = parse_bytes(make_pdf([[*_BODY, "2.1 Study Design", *_BODY]]), filename="plain.pdf")
    assert _sections(doc) == [(2, "2.1 Study Design")]


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("Recommendation 4", True),
        ("Appendix B", True),
        ("Chapter III: Methods", True),
        ("Recommendation 4 is based on low-quality evidence", False),
        ("Table 2", False),
        ("see Recommendation 9.", False),
    ],
)
def test_labelled_numbers_on_their_own_line(line: str, heading: bool) -> None:
    assert is_pdf_heading(line) is heading


def test_labelled_recommendation_is_a_section_in_a_pdf() -> None:
    doc = parse_bytes(make_pdf([["Recommendation 1", *_BODY, "Recommendation 2", *_BODY]]), filename="r.pdf")
    assert [name for _, name in _sections(doc)] == ["Recommendation 1", "Recommendation 2"]


def _dehyphenated(text: str, elsewhere: str = "") -> str:
    return dehyphenate(text, vocabulary([text, elsewhere]))


def test_a_split_word_is_joined_when_the_document_uses_it_whole() -> None:
    assert _dehyphenated("the recom-\nmendation of the panel", "a recommendation") == (
        "the recommendation\nof the panel"
    )


def test_a_split_fragment_that_is_no_word_is_joined() -> None:
    assert _dehyphenated("an unprece-\ndented rise") == "an unprecedented\nrise"


def test_a_compound_split_at_its_hyphen_keeps_the_hyphen() -> None:
    # "long-term" occurs elsewhere; "long" is a word of its own.
    assert _dehyphenated("for long-\nterm use", "long-term outcomes") == "for long-term\nuse"
    assert _dehyphenated("a self-\nreport form", "the self and others") == "a self-report\nform"
    # Neither form occurs elsewhere, but "based" is a word of its own.
    assert _dehyphenated("a web-\nbased tool", "it is based on") == "a web-based\ntool"


@pytest.mark.parametrize(
    "text",
    [
        "infected with COVID-\n19 in 2020",  # a number continues
        "Part A-\nB of the form",  # an upper-case continuation
        "see the following-\n",  # nothing follows
        "| a- |\n| b |",  # table rows
    ],
)
def test_other_line_end_hyphens_are_left_alone(text: str) -> None:
    assert _dehyphenated(text) == text


def test_joined_word_ending_its_line_adds_no_blank_line() -> None:
    assert (
        _dehyphenated("the recom-\nmendation\nnext line", "recommendation") == "the recommendation\nnext line"
    )


def test_dehyphenated_pdf_keeps_spans_verbatim_and_page_offsets() -> None:
    pages = [
        ["The panel made a recommendation on dosing.", "Its recom-", "mendation on tapering is new."],
        ["A second page with long-", "term outcomes and long-term risks."],
    ]
    doc = parse_bytes(make_pdf(pages), filename="h.pdf")
    assert "Its recommendation\non tapering is new." in doc.text
    assert "long-term\noutcomes" in doc.text
    assert doc.text[doc.page_starts[1] :].startswith("A second page")
    spans = {s.text: s.page for s in extract_spans(doc)}
    assert spans["Its recommendation\non tapering is new."] == 1
    assert spans["A second page with long-term\noutcomes and long-term risks."] == 2
    _spans_are_verbatim(doc)


def test_vocabulary_counts_compounds_and_their_parts() -> None:
    words = vocabulary(["Long-term use; long use."])
    assert words == Counter({"long-term": 1, "long": 2, "term": 1, "use": 2})


def test_a_url_line_is_not_code_so_the_heading_after_it_stands() -> None:
    from evidence.ingest.parsers.pdf import is_code_line

    assert not is_code_line("Resources can be found at https://example.org.")
    assert is_code_line("x = 1  // the default")
    lines = [*_BODY, "Resources are listed at https://example.org.", "Recommendation 9", *_BODY]
    doc = parse_bytes(make_pdf([lines]), filename="r.pdf")
    assert [name for _, name in _sections(doc)] == ["Recommendation 9"]


def test_a_bold_or_large_caption_is_a_caption_span_not_a_heading() -> None:
    """A figure or table caption set in the headings' type (`layout.CAPTION`) opens no section:
    the text under it stays in the section before, and the caption is one `caption` span."""
    page: list[str | StyledLine] = [
        ("Clinical Pharmacology", 14, True),
        *_BODY,
        ("Figure 3. Mean Plasma Concentrations of Remdesivir", 14, True),
        *_BODY,
        ("Table 2: Adverse Reactions in Adults", 12, True),
        *_BODY,
        ("Dosage and Administration", 14, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="label.pdf")
    assert [name for _, name in _sections(doc)] == ["Clinical Pharmacology", "Dosage and Administration"]
    captions = [s for s in extract_spans(doc) if s.span_type == SpanType.CAPTION]
    assert [(s.text, s.section) for s in captions] == [
        ("Figure 3. Mean Plasma Concentrations of Remdesivir", "Clinical Pharmacology"),
        ("Table 2: Adverse Reactions in Adults", "Clinical Pharmacology"),
    ]
    _spans_are_verbatim(doc)


def test_an_exhibit_heads_an_attachment_in_a_pdf() -> None:
    """ "Exhibit" labels a chart in a report but heads an attachment in a contract or a filing: the
    PDF parser keeps such a line a heading (`layout.FIGURE_CAPTION` leaves the label out), as the
    plain-text parser does, while a figure's caption in the same type opens no section."""
    page: list[str | StyledLine] = [
        ("Indemnification Agreement", 14, True),
        *_BODY,
        ("Exhibit 10.1 Form of Release", 14, True),
        *_BODY,
        ("Figure 2 Organisation Chart", 14, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="agreement.pdf")
    assert [name for _, name in _sections(doc)] == [
        "Indemnification Agreement",
        "Exhibit 10.1 Form of Release",
    ]


def test_a_wrapped_bold_caption_gives_no_heading_and_ends_the_heading_before_it() -> None:
    page: list[str | StyledLine] = [
        ("Results", 12, True),
        ("Figure 1: Time to First Event", 12, True),
        ("Intent-to-Treat Population", 12, True),
        *_BODY,
    ]
    doc = parse_bytes(make_pdf([page]), filename="paper.pdf")
    # Not "Results Figure 1: Time to First Event" (a wrapped heading), nor the caption's second line.
    assert [name for _, name in _sections(doc)] == ["Results"]


@pytest.mark.parametrize(
    "line", ["TABLE 2. ADVERSE REACTIONS", "Figure 4 - Kaplan Meier Curve", "FIG. 2A: DOSE RESPONSE"]
)
def test_a_caption_is_no_heading_by_form(line: str) -> None:
    assert is_pdf_heading(line) is False


def test_a_list_of_tables_does_not_make_its_captions_headings() -> None:
    """A contents page's entries name headings (`contents_names`), but a list of tables' entry names
    a caption: the caption line in the body stays a caption span."""
    pages: list[list[str | StyledLine]] = [
        ["Methods ........ 2", "Table 1: Baseline Characteristics ........ 2"],
        ["Methods", *_BODY, "Table 1: Baseline Characteristics", *_BODY],
    ]
    doc = parse_bytes(make_pdf(pages), filename="report.pdf")
    assert [name for _, name in _sections(doc)] == ["Methods"]
    captions = [s.text for s in extract_spans(doc) if s.span_type == SpanType.CAPTION]
    assert "Table 1: Baseline Characteristics" in captions
