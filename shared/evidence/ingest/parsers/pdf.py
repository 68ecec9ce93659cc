"""PDF (pypdf, imported at the first PDF): page texts joined by blank lines, `page_starts`
recording where each page begins, table rows as `| a | b |` lines (`ingest/pdf_tables.py`),
running headers and footers dropped, and short ALL-CAPS or numbered Title Case lines taken as
headings."""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

from evidence.errors import DocumentParseError
from evidence.ingest.parsers.layout import Heading, flat_sections, normalise_newlines
from evidence.records import ParsedDocument

if TYPE_CHECKING:
    from pypdf import PageObject, PdfReader

_CODE_CHARS = frozenset("{}[]<>=_;|*#@$%^~`\\:")
_PDF_HEADING = re.compile(r"^(?:\d+\.)*\d+\.?\s+([A-Z][^.!?;:]{1,60})$")


def is_pdf_heading(line: str) -> bool:
    """Conservative: a heading line is dropped from fact spans, so a false positive loses a fact."""
    s = line.strip()
    if not (3 <= len(s) <= 60) or s[-1] in ".!?;:,":
        return False
    words = s.split()
    if len(words) > 8:
        return False
    if not s[0].isalnum() or any(c in _CODE_CHARS for c in s):
        return False  # code, tables and markup, not headings
    letters = [c for c in s if c.isalpha()]
    if len(letters) >= 4 and all(c.isupper() for c in letters) and not any(c.isdigit() for c in s):
        return True
    # "2.1 Study Design" / "3 Results": numbered, and Title Case so "2 Tablets were taken" stays a fact.
    m = _PDF_HEADING.match(s)
    if not m or len(words) > 6 or any(c.isdigit() for c in m.group(1)):
        return False
    return all(w[0].isupper() for w in m.group(1).split() if len(w) > 3)


_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?[#ivxlc]+(?:\s*(?:/|of)\s*#)?$", re.IGNORECASE)


def _strip_running_lines(pages: list[str]) -> list[str]:
    """Drop running headers and footers, which would otherwise glue onto the sentences next to them.

    The first or last line of a page (of three lines or more) is running when, with digits
    masked, it recurs at that end of at least half the pages (min. 3); a bare page number
    ("12", "Page 3 of 9") there is dropped too.
    """
    if len(pages) < 2:
        return pages
    split = [p.split("\n") for p in pages]

    def ends(lines: list[str]) -> list[tuple[str, int]]:
        idx = [i for i, line in enumerate(lines) if line.strip()]
        if len(idx) < 3:
            return []
        return [("top", idx[0]), ("bottom", idx[-1])]

    counts: dict[tuple[str, str], int] = {}
    for lines in split:
        for seen in {(where, _DIGITS.sub("#", lines[i].strip())) for where, i in ends(lines)}:
            counts[seen] = counts.get(seen, 0) + 1
    need = max(3, (len(pages) + 1) // 2)
    out: list[str] = []
    for lines in split:
        drop = set()
        for where, i in ends(lines):
            key = _DIGITS.sub("#", lines[i].strip())
            if counts.get((where, key), 0) >= need or _PAGE_NUMBER.match(key):
                drop.add(i)
        kept = [line for i, line in enumerate(lines) if i not in drop]
        out.append("\n".join(kept).strip("\n").rstrip())
    return out


_WORD_TITLE = re.compile(r"^Microsoft (?:Word|PowerPoint) - ", re.IGNORECASE)


def _clean_pdf_title(title: str) -> str:
    """Producer boilerplate ("Microsoft Word - x.docx", "untitled") is not a title."""
    t = _WORD_TITLE.sub("", title.strip())
    return "" if t.lower() in ("untitled", "untitled document", "") else t


def parse_pdf(data: bytes, filename: str) -> ParsedDocument:
    page_texts, title = _read_pdf(data, filename)
    if not page_texts:
        raise DocumentParseError(filename, "corrupt PDF: no pages")
    if not any(t.strip() for t in page_texts):
        raise DocumentParseError(filename, "PDF has no extractable text (scanned? no text layer)")
    text, starts = _join_pages(_strip_running_lines(page_texts))
    return ParsedDocument(
        text=text,
        title=title,
        sections=flat_sections(_headings(text), len(text)),
        page_starts=tuple(starts),
        fmt="pdf",
    )


def _read_pdf(data: bytes, filename: str) -> tuple[list[str], str]:
    """Each page's text and the document's title; a PDF pypdf cannot read is a DocumentParseError."""
    try:
        from pypdf import PdfReader
    except ImportError as exc:  # pragma: no cover - pypdf is a runtime dependency
        raise DocumentParseError(filename, "PDF support needs pypdf") from exc
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            _decrypt(reader, filename)
        return [_page_text(page) for page in reader.pages], _title(reader)
    except DocumentParseError:
        raise
    except Exception as exc:
        raise DocumentParseError(filename, f"corrupt PDF: {exc}") from exc


def _decrypt(reader: PdfReader, filename: str) -> None:
    # An owner password alone still lets anyone read: try the empty user password.
    try:
        ok = reader.decrypt("")
    except Exception as exc:
        raise DocumentParseError(filename, f"encrypted PDF that cannot be opened: {exc}") from exc
    if not ok:
        raise DocumentParseError(filename, "encrypted PDF (a password is required)")


def _page_text(page: PageObject) -> str:
    from evidence.ingest.pdf_tables import page_text

    try:
        raw = page_text(page)  # tables as `| a | b |` rows
    except Exception:
        raw = ""  # one unreadable page must not lose the rest of the document
    return normalise_newlines(raw).strip("\n").rstrip()


def _title(reader: PdfReader) -> str:
    try:
        meta = reader.metadata
        if meta is not None and isinstance(meta.title, str):
            return _clean_pdf_title(meta.title)
    except Exception:
        pass  # a broken info dictionary costs the title, not the document
    return ""


def _join_pages(page_texts: list[str]) -> tuple[str, list[int]]:
    """The document text (pages a blank line apart) and where each page starts in it."""
    starts: list[int] = []
    pos = 0
    for i, t in enumerate(page_texts):
        pos += 2 if i else 0
        starts.append(pos)
        pos += len(t)
    return "\n\n".join(page_texts), starts


def _headings(text: str) -> list[Heading]:
    heads: list[Heading] = []
    pos = 0
    for line in text.split("\n"):
        if is_pdf_heading(line):
            heads.append((pos, 1, line.strip()))
        pos += len(line) + 1
    return heads
