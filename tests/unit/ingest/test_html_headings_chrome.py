"""HTML headings and page chrome (session 54, bench/data/session54/ingest35.md): permalinks that
wrap their heading's text, tooltip marks, a script's help pop-up, and bold paragraphs as headings
(siblings in a row, numbered clause titles ending on a full stop, an unclosed `<p>`)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes
from evidence.ingest.sections import label_sections
from evidence.records import ParsedDocument


def _parse(html: str) -> ParsedDocument:
    return parse_bytes(html.encode(), filename="page.html")


def _heads(html: str) -> list[tuple[int, str]]:
    return [(s.level, s.name) for s in _parse(html).sections]


def test_a_permalink_that_wraps_its_heading_text_keeps_the_text() -> None:
    """mandoc writes each section title and each option term inside `<a class="permalink">`: the
    page had no section and no option names; a lone pilcrow permalink, or an icon font's glyph
    (MkDocs' U+F0C1), is still dropped."""
    html = (
        "<html><body>"
        '<section><h1 class="Sh" id="NAME"><a class="permalink" href="#NAME">NAME</a></h1>'
        "<p>kettle - boils water</p></section>"
        '<section><h1 class="Sh" id="OPTIONS"><a class="permalink" href="#OPTIONS">OPTIONS</a></h1>'
        '<dl class="Bl-tag"><dt id="s"><a class="permalink" href="#s"><b>-s</b></a></dt>'
        "<dd>Whistle when done.</dd></dl></section>"
        '<h2>Usage<a class="headerlink" href="#usage">¶</a></h2><p>Fill it first.</p>'
        '<h2>Care<a class="headerlink" href="#care" title="Permanent link">\uf0c1</a></h2>'
        "<p>Descale it.</p></body></html>"
    )
    doc = _parse(html)
    assert [s.name for s in doc.sections] == ["NAME", "OPTIONS", "Usage", "Care"]
    assert "-s\nWhistle when done." in [s.text for s in extract_spans(doc)]
    assert "¶" not in doc.text and "\uf0c1" not in doc.text


def test_a_tooltip_mark_after_a_signature_is_no_part_of_its_name() -> None:
    """rustdoc follows a signature returning an iterator with `<a href="#" class="tooltip">ⓘ</a>`."""
    html = (
        "<html><body><h2>Methods</h2>"
        '<h4 class="code-header">pub fn cups(&amp;self) -&gt; Cups '
        '<a href="#" class="tooltip" data-notable-ty="Cups">ⓘ</a></h4>'
        "<p>Counts the cups.</p></body></html>"
    )
    assert _heads(html)[-1][1] == "pub fn cups(&self) -> Cups"


RUSTDOC = (
    '<html><head><meta name="generator" content="rustdoc"></head><body>'
    '<a class="skip-main-content" href="#main-content">Skip to main content</a>'
    '<main id="main-content"><h1>Struct Kettle</h1><pre>pub struct Kettle { /* private fields */ }</pre>'
    '<details class="toggle top-doc" open><summary class="hideme"><span>Expand description</span>'
    "</summary><p>A pot for water.</p></details><h2>Implementations</h2>"
    '<section class="method"><span class="rightside"><span class="since">1.0.0</span> · '
    '<a class="src" href="../src/kettle.rs.html#5">Source</a></span>'
    '<h4 class="code-header">pub fn boil(&amp;mut self)</h4></section><p>Boils the water.</p>'
    '<section class="method"><span class="rightside"><span class="since">1.2.0</span> · '
    '<a class="src" href="../src/kettle.rs.html#9">Source</a></span>'
    '<h4 class="code-header">pub fn pour(&amp;mut self)</h4></section><p>Pours the water.</p>'
    "</main></body></html>"
)


def test_rustdoc_controls_are_no_text() -> None:
    """rustdoc's "1.0.0 · Source" column before each signature fell into the section of the item
    before it; its toggles and skip link are controls. In another generator's page those class
    names are text."""
    doc = _parse(RUSTDOC)
    for word in ("Source", "Expand", "Skip", "1.2.0"):
        assert word not in doc.text
    assert [s.text for s in extract_spans(doc)][-2:] == ["Boils the water.", "Pours the water."]
    other = _parse(RUSTDOC.replace('content="rustdoc"', 'content="another"'))
    assert "Expand description" in other.text and "1.2.0 · Source" in other.text


def test_a_help_popup_is_no_heading_of_the_page() -> None:
    """mdBook puts its keyboard-shortcuts pop-up before every page's text; its `<h2>` was the
    page's first section."""
    html = (
        '<html><body><div id="mdbook-help-container"><div id="mdbook-help-popup">'
        '<h2 class="mdbook-help-title">Keyboard shortcuts</h2><p>Press ? to show this help</p>'
        "</div></div><main><h1>Kettle Policy</h1><p>Kettles are boiled on request.</p></main>"
        "</body></html>"
    )
    doc = _parse(html)
    assert [s.name for s in doc.sections] == ["Kettle Policy"]
    assert "Press" not in doc.text


def test_bold_paragraph_headings_in_a_row_are_siblings() -> None:
    """Each bold-paragraph heading went one level under the one before it (3, 4, 5, 6, 6 …), so
    every limit's parent was the limit before it; they are siblings under the last heading."""
    html = (
        "<html><body><h2>Limits</h2>"
        "<p><b>Maximum cups</b></p><p>Six cups at most.</p>"
        "<p><b>Maximum spoons</b></p><p>Two spoons at most.</p>"
        "<p><b>Maximum lids</b></p><p>One lid at most.</p>"
        "<h2>Care</h2><p><b>Descaling</b></p><p>Monthly.</p></body></html>"
    )
    doc = _parse(html)
    assert [(s.level, s.name) for s in doc.sections] == [
        (2, "Limits"), (3, "Maximum cups"), (3, "Maximum spoons"), (3, "Maximum lids"),
        (2, "Care"), (3, "Descaling"),
    ]  # fmt: skip
    assert [lab.parent for lab in label_sections(doc.sections)][1:4] == ["Limits"] * 3


def test_a_bold_numbered_clause_title_ending_on_a_full_stop_is_a_heading() -> None:
    """Licences title clauses "1. Definitions." in bold: the full stop read as a sentence's end.
    A bold sentence without a number, or a numbered one holding two sentences, is still text."""
    html = (
        "<html><body><h1>Tea Licence</h1>"
        "<p><b>1. Definitions.</b></p><p>A kettle is a pot.</p>"
        "<p><b>2. Grant of Tea Rights.</b></p><p>You may brew.</p>"
        "<p><b>Do not boil it dry.</b></p><p><b>3. Pour. Then stir.</b></p></body></html>"
    )
    assert _heads(html) == [(1, "Tea Licence"), (2, "1. Definitions."), (2, "2. Grant of Tea Rights.")]


def test_a_paragraph_whose_end_tag_is_left_out_can_still_be_a_heading() -> None:
    """`<p><b>3. Grant of Patent Tea.</b><p>`: the next `<p>` ends the paragraph, as HTML implies."""
    html = (
        "<html><body><h1>Tea Licence</h1>"
        "<p><b>2. Grant of Tea Rights.</b></p><p>You may brew.</p>"
        "<p><b>3. Grant of Patent Tea.</b><p>"
        "<p>You may patent nothing.</p></body></html>"
    )
    assert _heads(html)[-1] == (2, "3. Grant of Patent Tea.")


def test_an_end_tag_br_breaks_the_line() -> None:
    """`</br>` (a stray end tag, as Word pages write it) breaks the line as `<br>` does."""
    doc = _parse("<html><body><p>Tea Licence</br>Version 2.0, January 2004</p></body></html>")
    assert "Tea Licence\nVersion 2.0" in doc.text


def test_a_bold_first_line_of_a_paragraph_of_lines_is_a_heading() -> None:
    """A title block: the bold first line, a `<br>` ending it, lines that are not bold under it.
    A bold label ending on a colon, or a bold first line that text follows without a break, is no
    heading."""
    html = (
        "<html><body><p><b>Coffee Licence</b></p><p><b>1. Beans.</b></p><p>Roast them.</p>"
        "<p><b>Tea Licence</b><br>Version 2.0, January 2004<br>http://example.org/tea</p>"
        "<p><b>1. Leaves.</b></p><p>Steep them.</p>"
        "<p><b>Note:</b><br>Hot water.</p><p><b>Milk first</b> is a choice.<br>Or not.</p>"
        "</body></html>"
    )
    assert [name for _, name in _heads(html)] == [
        "Coffee Licence", "1. Beans.", "Tea Licence", "1. Leaves.",
    ]  # fmt: skip
