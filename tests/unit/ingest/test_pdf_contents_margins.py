"""PDF lines that look like headings and are not: contents entries set in the headings' style,
running heads that alternate between left and right pages, and footnotes (session 54's audit)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes
from tests.unit.ingest.ingestkit import make_pdf

Line = str | tuple[str, float, bool]


def test_contents_entries_with_leaders_set_bold_are_no_headings() -> None:
    """A contents page whose entries are set bold, each with a dot (or ellipsis) leader and a page
    number: the entries are text, the chapters they point to are the headings."""
    contents: list[Line] = [
        ("Contents", 16, True),
        ("1.1. Why kettles need descaling? ........................... 2", 12, True),
        ("1.2. Choosing the water............................ 2", 12, True),
        ("2.1. Timing the brew\u2026\u2026\u2026\u2026 ........ 3", 12, True),
    ]
    one: list[Line] = [
        ("1.1. Why kettles need descaling?", 12, True),
        "Scale builds up where the water is hard.",
        "Descale the kettle once a month.",
        ("1.2. Choosing the water", 12, True),
        "Use fresh cold water for every pot.",
    ]
    two: list[Line] = [("2.1. Timing the brew", 12, True), "Brew black tea for four minutes."]
    doc = parse_bytes(make_pdf([contents, one, two]), filename="plan.pdf")
    names = [s.name for s in doc.sections]
    assert names == [
        "Contents",
        "1.1. Why kettles need descaling?",
        "1.2. Choosing the water",
        "2.1. Timing the brew",
    ]
    entries = [s.text for s in extract_spans(doc) if s.section == "Contents"]
    assert any(e.startswith("1.2. Choosing the water") for e in entries)


def test_a_row_of_contents_entries_set_bold_is_no_heading() -> None:
    """A contents page set in columns and read a row at a time ("Kettles 2 Teapots 3"), bold: each
    of the row's titles names a heading further on, so the row is text."""
    contents: list[Line] = [
        ("Contents", 16, True),
        ("Kettles 2 Teapots 3", 12, True),
        "Cups 3 Saucers 3",
    ]
    body: list[Line] = [
        ("Kettles", 12, True),
        "A kettle boils water for tea.",
        ("Teapots", 12, True),
        "A teapot keeps the brew warm.",
    ]
    doc = parse_bytes(make_pdf([contents, body]), filename="guide.pdf")
    assert [s.name for s in doc.sections] == ["Contents", "Kettles", "Teapots"]


def test_running_heads_alternating_between_left_and_right_pages_are_dropped() -> None:
    """A journal's running heads: the article's short title on the right-hand pages, the journal's
    name on the left-hand ones, each stacked over the page number in the bottom margin. Neither
    recurs on half of all pages, and each is two lines besides the number: both still go."""
    facts = ["Kettles", "Teapots", "Cups", "Saucers", "Strainers", "Caddies", "Cosies", "Trays", "Spoons"]
    pages: list[list[Line]] = []
    for n, thing in enumerate(facts, start=1):
        head: list[Line] = (
            [("Brewing Review", 12, True), ("12,3", 12, True)]
            if n % 2
            else [("Kettle care", 12, True), ("for beginners", 12, True)]
        )
        body = [f"{thing} are sold by weight.", f"{thing} come in sets.", f"Wash {thing.lower()} by hand."]
        pages.append([*body, *head, str(160 + n)])
    doc = parse_bytes(make_pdf(pages), filename="article.pdf")
    assert not doc.sections
    for word in ("Brewing Review", "12,3", "Kettle care", "for beginners"):
        assert word not in doc.text
    assert [doc.text[start:].split("\n")[0] for start in doc.page_starts] == [
        f"{thing} are sold by weight." for thing in facts
    ]


def test_a_footnote_that_reads_like_a_numbered_heading_is_no_heading() -> None:
    """A footnote set small whose first line is a number and a title-case phrase ("7 Accident
    Investigation Report") is text; a numbered heading set at the body size is a heading."""
    page: list[Line] = [
        "2 Background",
        "The review covered every flight of the fleet since the first report was filed.",
        "The procedures were revised after the review and trained to every crew member.",
        "Crews now follow the revised procedure on every flight of the fleet.",
        ("7 Accident Investigation Report", 8, False),
        ("dated March 2019, and the interim report, are in the docket.", 8, False),
    ]
    doc = parse_bytes(make_pdf([page]), filename="rule.pdf")
    assert [s.name for s in doc.sections] == ["2 Background"]


def test_a_makefile_line_set_bold_is_no_heading_and_the_heading_over_it_stays() -> None:
    """A listing's Makefile lines set bold ("EXTRA_DIST += $(FONTS)") are no sections; the bold
    heading right over the listing still is one."""
    page: list[Line] = [
        ("Installing the fonts", 14, True),
        ("EXTRA_DIST += $(FONTS)", 12, True),
        "Each font is installed with the package and listed in the manifest.",
        ("CLEANFILES += $(GENERATED)", 12, True),
        "Generated files are removed by the clean target of the build.",
    ]
    doc = parse_bytes(make_pdf([page]), filename="build.pdf")
    assert [s.name for s in doc.sections] == ["Installing the fonts"]


def test_contents_lines_ending_on_roman_page_numbers_are_spans_of_their_own() -> None:
    """A book's part-level contents lines point to front-matter pages in roman numerals: each is a
    span of its own, as an arabic-numbered entry is, instead of one run of leaders and titles."""
    entries = [
        "Quick Start Guide .............................. iii",
        "User Manual .................................... iv",
        "Technical Documentation ........................ viii",
    ]
    page: list[Line] = [*entries, "The manuals are released together with each version."]
    doc = parse_bytes(make_pdf([page]), filename="book.pdf")
    texts = [s.text for s in extract_spans(doc)]
    for entry in entries:
        assert entry in texts
