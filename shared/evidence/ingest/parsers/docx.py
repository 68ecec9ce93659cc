"""docx (stdlib zipfile + ElementTree): paragraphs a blank line apart, list paragraphs as "- "
items, tables as pipe rows; `Title` and `Heading N` styles become sections."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from xml.etree import ElementTree

from evidence.errors import DocumentParseError
from evidence.ingest.limits import check_count
from evidence.ingest.parsers.detect import ZIP_ERRORS
from evidence.ingest.parsers.layout import flat_sections, table_cell, table_row
from evidence.records import ParsedDocument

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_STYLE = re.compile(r"^(?:heading|berschrift|titre)\s*(\d)$", re.IGNORECASE)
#: Bounds on inflating a docx body (a decompression bomb is a small zip that inflates to
#: gigabytes): an absolute size, and a ratio no Word body reaches (real ones deflate 5-20x).
#: The zip's declared size is a hard bound: zipfile stops there (and fails the CRC if it lied).
_MAX_XML_BYTES = 64 * 1024 * 1024
_MAX_RATIO = 100
#: Parse cost: ElementTree holds every element of the body (~150 bytes each, and the walk visits
#: each), so a body of tiny elements is refused by its element count, taken with two C-speed
#: byte counts before parsing. A 5.7 MB docx whose 66 MB body is 2 M one-word paragraphs (6 M
#: elements) passed the size checks and took 7-30 s and ~900 MB; a long real document has ~20
#: elements per paragraph (300,000 for 500 pages).
MAX_ELEMENTS = 1_000_000
_DOCX_ERRORS: tuple[type[Exception], ...] = (ElementTree.ParseError, *ZIP_ERRORS)


def parse_docx(data: bytes, filename: str) -> ParsedDocument:
    body = _body(data, filename)
    lines, heads, title = _lines(body)
    text, line_starts = _join_lines(lines)
    if not text.strip():
        raise DocumentParseError(filename, "empty document (no text in the docx)")
    sections = flat_sections([(line_starts[i], lvl, name) for i, lvl, name in heads], len(text))
    return ParsedDocument(text=text, title=title, sections=sections, fmt="docx")


def _body(data: bytes, filename: str) -> ElementTree.Element:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            info = zf.getinfo("word/document.xml")
            if info.file_size > _MAX_XML_BYTES:
                raise DocumentParseError(filename, "docx body is too large to parse")
            if info.file_size > _MAX_RATIO * max(info.compress_size, 1024):
                raise DocumentParseError(
                    filename,
                    f"docx body inflates {info.file_size // max(info.compress_size, 1)}x "
                    f"(limit {_MAX_RATIO}x): refused as a decompression bomb",
                )
            xml = zf.read(info)
            # Start tags: every "<" but end tags ("</"); comments and declarations count too (few).
            check_count(
                filename,
                "docx XML elements",
                xml.count(b"<") - xml.count(b"</"),
                MAX_ELEMENTS,
                "split the document",
            )
            root = ElementTree.fromstring(xml)
    except DocumentParseError:
        raise
    except KeyError as exc:
        raise DocumentParseError(filename, "not a Word document (no word/document.xml)") from exc
    except _DOCX_ERRORS as exc:
        raise DocumentParseError(filename, f"corrupt docx: {exc}") from exc
    body = root.find(f"{_W}body")
    if body is None:
        raise DocumentParseError(filename, "corrupt docx: no body")
    return body


def _lines(body: ElementTree.Element) -> tuple[list[str], list[tuple[int, int, str]], str]:
    """The body as lines, the headings as (line index, level, name), and the title."""
    lines: list[str] = []
    heads: list[tuple[int, int, str]] = []
    title = ""
    for el in _docx_blocks(body):
        if el.tag == f"{_W}tbl":
            lines.extend(_table_rows(el))
            continue
        if el.tag != f"{_W}p":
            continue
        text, style, numbered = _docx_paragraph(el)
        if not text.strip():
            continue
        hm = _HEADING_STYLE.match(style)
        if style.lower() == "title":
            title = title or text.strip()
            heads.append((len(lines), 1, text.strip()))
        elif hm:
            heads.append((len(lines), int(hm.group(1)), text.strip()))
        elif numbered or style.lower().startswith("list"):
            text = "- " + text
        lines.append(text)
    return lines, heads, title


def _table_rows(table: ElementTree.Element) -> Iterator[str]:
    for tr in table.iter(f"{_W}tr"):
        cells = [
            table_cell(" ".join(_docx_paragraph(p)[0] for p in tc.iter(f"{_W}p")))
            for tc in tr.findall(f"{_W}tc")
        ]
        if any(cells):
            yield table_row(cells)


def _join_lines(lines: list[str]) -> tuple[str, list[int]]:
    """Paragraphs a blank line apart so prose paragraphs stay apart; rows and bullets one line apart.
    Returns the text and where each line starts in it."""
    out: list[str] = []
    line_starts: list[int] = []
    pos = 0
    for i, line in enumerate(lines):
        if i:
            tight = line.startswith(("| ", "- ")) and lines[i - 1].startswith(("| ", "- "))
            sep = "\n" if tight else "\n\n"
            out.append(sep)
            pos += len(sep)
        line_starts.append(pos)
        out.append(line)
        pos += len(line)
    return "".join(out), line_starts


def _docx_blocks(parent: ElementTree.Element) -> Iterator[ElementTree.Element]:
    """Body-level paragraphs and tables, looking inside content controls (<w:sdt>)."""
    for el in parent:
        if el.tag == f"{_W}sdt":
            content = el.find(f"{_W}sdtContent")
            if content is not None:
                yield from _docx_blocks(content)
        else:
            yield el


def _docx_paragraph(p: ElementTree.Element) -> tuple[str, str, bool]:
    style = ""
    numbered = False
    ppr = p.find(f"{_W}pPr")
    if ppr is not None:
        ps = ppr.find(f"{_W}pStyle")
        if ps is not None:
            style = ps.get(f"{_W}val", "")
        numbered = ppr.find(f"{_W}numPr") is not None
    parts: list[str] = []
    for node in p.iter():
        if node.tag == f"{_W}t" and node.text:
            parts.append(node.text)
        elif node.tag == f"{_W}tab":
            parts.append("\t")
        elif node.tag in (f"{_W}br", f"{_W}cr"):
            parts.append("\n")
    return "".join(parts), style, numbered
