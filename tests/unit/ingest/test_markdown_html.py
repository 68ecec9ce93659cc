"""HTML inside Markdown: a block holding a table or a list reads as the HTML parser reads a page
(each row one `| a | b |` span, each item one `- ` line), and `<br>` tags ending the lines of an
address are dropped, each line its own span; code and other HTML stay as written."""

from __future__ import annotations

from evidence.ingest import chunk_document, parse_bytes
from evidence.records import ChunkKind, SpanType

SOURCE = (
    "# Kettlex data notice\n\n"
    "Write to our office at:\n\n"
    "Kettlex Holdings Ltd<br>\n"
    "12 Harbour Road<br/>\n"
    "Port Avel<br>\n\n"
    "## What we collect\n\n"
    "<table>\n"
    "  <tr>\n"
    "    <th>Purpose</th>\n"
    "    <th>Data</th>\n"
    "  </tr>\n"
    "  <tr>\n"
    "    <td>Running your kettle account</td>\n"
    "    <td>\n"
    "      <ul>\n"
    "        <li>Login names</li>\n"
    "        <li>Boil schedules</li>\n"
    "      </ul>\n"
    "    </td>\n"
    "  </tr>\n"
    "  <tr>\n"
    "    <td>Fixing faults</td>\n"
    "    <td>Crash reports &amp; logs</td>\n"
    "  </tr>\n"
    "</table>\n\n"
    "<ul>\n  <li>We keep boil logs for 30 days.</li>\n  <li>We never sell them.</li>\n</ul>\n\n"
    '<div align="center">\n  <img src="logo.png">\n</div>\n\n'
    '<table>\n  <tr>\n    <td><img src="kettle.png"/></td>\n'
    "    <td>A travel kettle boils half a litre. It folds flat for packing</td>\n  </tr>\n"
    '  <tr>\n    <td><img src="jug.png"/></td>\n'
    "    <td>A jug kettle boils two litres.</td>\n  </tr>\n</table>\n\n"
    "```html\n<table><tr><td>code</td></tr></table>\n```\n\n"
    "## Contact\n\nAsk us anything.\n"
)


def _parse(data: str) -> tuple[str, list[tuple[str, SpanType | None, str]]]:
    doc = parse_bytes(data.encode(), filename="notice.md")
    chunks = chunk_document(doc, document_id="d", source="notice.md", metadata={})
    base = doc.source_text if doc.source_text is not None else doc.text
    for c in chunks.chunks:
        assert base[c.char_start : c.char_end] == c.text
    spans = [(c.text, c.span_type, c.section) for c in chunks.chunks if c.kind is ChunkKind.SPAN]
    return doc.text, spans


def test_an_html_table_in_markdown_is_one_row_span_per_row() -> None:
    text, spans = _parse(SOURCE)
    rows = [(t, s) for t, k, s in spans if k is SpanType.TABLE_ROW]
    assert [t for t, _ in rows] == [
        "| Purpose | Data |",
        "| Running your kettle account | Login names Boil schedules |",
        "| Fixing faults | Crash reports & logs |",
    ]
    assert {s for _, s in rows} == {"What we collect"}
    bullets = [t for t, k, _ in spans if k is SpanType.BULLET]
    assert bullets == ["- We keep boil logs for 30 days.", "- We never sell them."]
    assert "<td>" not in text.split("```")[0]


def test_line_end_br_tags_are_dropped_and_each_address_line_is_a_span() -> None:
    _, spans = _parse(SOURCE)
    texts = [t for t, _, _ in spans]
    address = [t for t in texts if t[:1] in "K1P"][:3]
    assert address == ["Kettlex Holdings Ltd", "12 Harbour Road", "Port Avel"]


def test_code_and_other_html_stay_as_written_and_crlf_maps_back() -> None:
    text, spans = _parse(SOURCE)
    assert "```html\n<table><tr><td>code</td></tr></table>\n```" in text
    assert '<div align="center">\n  <img src="logo.png">\n</div>' in text
    crlf_text, crlf_spans = _parse(SOURCE.replace("\n", "\r\n"))
    assert crlf_text == text and [t.replace("\r", "") for t, _, _ in crlf_spans] == [t for t, _, _ in spans]


def test_a_layout_table_of_one_text_cell_per_row_reads_as_paragraphs() -> None:
    """A table that only sets a paragraph beside an image is no data: each row is its text,
    sentence-split, one row ending where the next starts, not one table-row span of it all."""
    _, spans = _parse(SOURCE)
    assert ("A travel kettle boils half a litre.", SpanType.SENTENCE, "What we collect") in spans
    assert ("It folds flat for packing", SpanType.SENTENCE, "What we collect") in spans
    assert ("A jug kettle boils two litres.", SpanType.SENTENCE, "What we collect") in spans


def test_a_cells_closing_tags_ending_a_markdown_paragraph_are_dropped() -> None:
    """A blank line inside a cell ends the HTML block (CommonMark): the cell's paragraph is
    Markdown, and the `</td>` closing it is markup, not a word of its last sentence. Tags inside
    a line, and code, stay as written."""
    source = (
        "# Kettles\n\n"
        '<table>\n  <tr>\n    <td><img src="k.png"/></td>\n    <td>\n\n'
        "A steel kettle lasts ten years. Descale it monthly.</td> </tr>\n"
        "  </table>\n\n"
        "Keep `</td>` in code and </td> mid-line here.\n\n"
        "```\nraw </td>\n```\n"
    )
    text, spans = _parse(source)
    texts = [t for t, _, _ in spans]
    assert "Descale it monthly." in texts
    assert "Keep `</td>` in code and </td> mid-line here." in texts
    assert "raw </td>" in text
    crlf_text, _ = _parse(source.replace("\n", "\r\n"))
    assert crlf_text == text
