"""PDF tables come out as rows: a real PDF with positioned text, read through pypdf."""

from __future__ import annotations

import io

from pypdf import PdfReader

from evidence.ingest.pdf_tables import page_text, table_rows


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def positioned_pdf(items: list[tuple[int, int, str]], typewriter: frozenset[int] = frozenset()) -> bytes:
    """A one-page PDF (Helvetica 10) with each text drawn at (x, y) points; the items whose
    index is in `typewriter` are set in Courier."""
    objs: list[bytes] = []

    def add(body: bytes) -> int:
        objs.append(body)
        return len(objs)

    catalog, pages = add(b""), add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    fonts = b"/F1 %d 0 R" % font
    if typewriter:
        fonts += b" /F2 %d 0 R" % add(
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>"
        )
    ops = "".join(
        f"BT /F{2 if k in typewriter else 1} 10 Tf {x} {y} Td ({_esc(t)}) Tj ET\n"
        for k, (x, y, t) in enumerate(items)
    ).encode("cp1252")
    content = add(b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"endstream")
    page = add(
        b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << %s >> >>"
        b" /Contents %d 0 R >>" % (pages, fonts, content)
    )
    objs[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages
    objs[pages - 1] = b"<< /Type /Pages /Kids [%d 0 R] /Count 1 >>" % page
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for o in offsets:
        out += b"%010d 00000 n \n" % o
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


PAGE = [
    (72, 720, "2 DOSAGE AND ADMINISTRATION"),
    (72, 700, "The recommended starting dosage is 10 mg once daily."),
    (72, 660, "Table 1: Recommended Dosage"),
    (72, 640, "Patient population"), (250, 640, "Starting dosage"), (400, 640, "Maximum dosage"),
    (72, 626, "Adults"), (250, 626, "10 mg once daily"), (400, 626, "40 mg once daily"),
    (72, 612, "Adults of Asian ancestry"), (250, 612, "5 mg once daily"), (400, 612, "20 mg once daily"),
    (72, 590, "Swallow tablets whole."),
    (72, 560, "Cmax (ng/mL)"), (300, 560, "21.4"),
    (72, 546, "Terminal half-life (h)"), (300, 546, "19.2"),
    # two columns of prose: aligned, but not a table, and kept in reading order
    (72, 520, "Left column prose goes on for a while here"),
    (72, 508, "and continues on the next line of it"),
    (320, 520, "Right column prose is also a long text"),
    (320, 508, "that continues over several lines too"),
]  # fmt: skip


def test_table_rows_keep_their_cells_and_prose_stays_prose() -> None:
    page = PdfReader(io.BytesIO(positioned_pdf(PAGE))).pages[0]
    lines = page_text(page).split("\n")
    assert "| Patient population | Starting dosage | Maximum dosage |" in lines
    assert "| Adults of Asian ancestry | 5 mg once daily | 20 mg once daily |" in lines
    assert "| Terminal half-life (h) | 19.2 |" in lines
    assert "Table 1: Recommended Dosage" in lines and "Swallow tablets whole." in lines
    left = lines.index("Left column prose goes on for a while here")
    assert lines[left + 1] == "and continues on the next line of it"
    assert not any(line.startswith("| Left column") for line in lines)


def test_plain_text_without_tables_is_unchanged() -> None:
    page = PdfReader(io.BytesIO(positioned_pdf([(72, 700, "One line."), (72, 680, "Another line.")]))).pages[
        0
    ]
    assert page_text(page) == page.extract_text()
    assert table_rows("just   one   line") == {}


def test_the_pdf_parser_gives_table_row_spans() -> None:
    from evidence.ingest import extract_spans, parse_bytes
    from evidence.records import SpanType

    doc = parse_bytes(positioned_pdf(PAGE), filename="label.pdf")
    rows = [s.text for s in extract_spans(doc) if s.span_type is SpanType.TABLE_ROW]
    assert "| Adults | 10 mg once daily | 40 mg once daily |" in rows
    assert "| Cmax (ng/mL) | 21.4 |" in rows


def test_a_bulleted_list_set_with_a_gap_after_its_marks_is_no_table() -> None:
    """Bullets set apart from their items (a LaTeX itemize: the mark, then the text at a fixed
    indent) align like a two-column table; each item stays a line of text, not `| • | … |`."""
    layout = (
        "   •      Teapots are warmed before brewing\n"
        "   •      Cups are rinsed with hot water\n"
        "   •      Leaves steep for four minutes\n"
    )
    assert table_rows(layout) == {}
    # a real two-column table with short labels still is one
    assert table_rows("   Cups      2\n   Spoons    3\n") == {
        "Cups 2": "| Cups | 2 |",
        "Spoons 3": "| Spoons | 3 |",
    }


def test_a_listing_printed_with_line_numbers_keeps_its_lines() -> None:
    """A listing with its line numbers in the text face and indented code in a typewriter face
    aligns like a two-column table ("| 18 | \\begingroup |"): each line stays a code line, a span
    of its own. A table of numbers and words in the text face stays a table."""
    from evidence.ingest import extract_spans, parse_bytes
    from evidence.records import SpanType

    items = [
        (72, 720, "The macro reads its argument twice."),
        (72, 700, "17"), (90, 700, "\\newcommand\\Kettle[1]{%"),
        (72, 688, "18"), (120, 688, "\\begingroup"),
        (72, 676, "19"), (120, 676, "\\edef\\kettle{#1}%"),
        (72, 664, "20"), (120, 664, "\\endgroup"),
        (72, 640, "Step"), (200, 640, "What to do"),
        (72, 628, "1"), (200, 628, "Warm the teapot"),
        (72, 616, "2"), (200, 616, "Add the leaves"),
    ]  # fmt: skip
    doc = parse_bytes(positioned_pdf(items, typewriter=frozenset({2, 4, 6, 8})), filename="macros.pdf")
    lines = doc.text.split("\n")
    assert "18 \\begingroup" in lines and "19 \\edef\\kettle{#1}%" in lines
    assert not any(line.startswith("| 1") and "\\" in line for line in lines)
    spans = extract_spans(doc)
    assert "| 1 | Warm the teapot |" in [s.text for s in spans if s.span_type is SpanType.TABLE_ROW]
    assert "18 \\begingroup" in [s.text for s in spans]
