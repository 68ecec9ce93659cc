"""PDF (pypdf, imported at the first PDF): page texts joined by blank lines, `page_starts`
recording where each page begins, table rows as `| a | b |` lines (`ingest/pdf_tables.py`),
running headers and footers dropped, words hyphenated at line ends joined, and as headings: lines
set larger than the body text or bold (`parsers/pdf_style.py`), short ALL-CAPS lines, numbered
Title Case lines and labelled numbers on a line of their own ("Recommendation 4")."""

from __future__ import annotations

import io
import logging
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from evidence.errors import DocumentParseError
from evidence.ingest.limits import DEFAULT_LIMITS, check_count
from evidence.ingest.offsets import line_starts
from evidence.ingest.parsers.layout import (
    FIGURE_CAPTION,
    Heading,
    flat_sections,
    normalise_newlines,
    running_lines,
)
from evidence.ingest.parsers.pdf_style import (
    DocumentStyles,
    LineStyle,
    StyleCollector,
    dehyphenate,
    heading_levels,
    styled_headings,
    vocabulary,
)
from evidence.records import ParsedDocument

if TYPE_CHECKING:
    from pypdf import PageObject, PdfReader

log = logging.getLogger(__name__)

_CODE_CHARS = frozenset("{}[]<>=_;|*#@$%^~`\\:")
_PDF_HEADING = re.compile(r"^(?:\d+\.)*\d+\.?\s+([A-Z][^.!?;:]{1,60})$")
# "1.3. Language used in this specification": two or more levels and a closing dot, which no
# sentence wrapped after a decimal ("3.5 Patients were...") has, so sentence case is a heading too.
_PDF_DOTTED = re.compile(r"^\d+(?:\.\d+)+\.\s+[A-Z]")
# "Recommendation 4", "Appendix B", "Chapter III: Methods": a structural word and its number on a
# line of their own (a caption's "Table 2" / "Figure 1" is not a section).
_PDF_LABELLED = re.compile(
    r"^(?:Recommendation|Section|Chapter|Part|Article|Appendix|Annex|Step|Module|Unit|Lesson)\s+"
    r"(?:\d+(?:\.\d+)*|[IVXLC]+|[A-Z])\.?(?:\s*[:.\u2013\u2014-]\s*[A-Z][^.!?;]{0,60})?$"
)
_NUMBERING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s")
# A table of contents' entry: a name, dot leaders and a page number ("References ........ 62").
# Stricter than the page reference `verbatim.spans` strips (`_PAGE_REF`: three leaders of any
# kind, any number) on purpose: a match here makes a body line a heading, which drops it from the
# fact spans, so only a whole line of four or more dots and a page number counts.
_TOC_ENTRY = re.compile(r"^\s*(\S.{1,98}?)\s*(?:\.\s*){4,}\s*\d{1,4}\s*$")
# pypdf writes a glyph its font maps to no character (no ToUnicode map, a private glyph name in
# the encoding's Differences) as the glyph's name: "/g18/g152/g135/g3". Such text cannot be read;
# a run of three or more names, three times in the document, marks a font of that kind (a URL's
# "/v1" alone is not one), and then every such name is dropped rather than indexed as words.
_GLYPH_NAME = re.compile(r"/[A-Za-z]{1,4}\d{1,5}(?![\w])")
_GLYPH_RUN = re.compile(r"(?:/[A-Za-z]{1,4}\d{1,5}){3,}")
_GLYPH_RUNS_MIN = 3


def contents_names(lines: list[str]) -> set[str]:
    """The headings a PDF's own table of contents names. A line that is exactly such a name is a
    heading even when neither its typography nor its form says so: "References" set in the body
    font above a guideline's bibliography. A name without a letter is no heading's ("X11" is): an
    index's entries for symbols ("{ . . . . 12", ". . . . . 47": a manual's `{` and `.` commands)
    would make every brace or dot on a line of its own a section."""
    names = {m.group(1).strip() for line in lines if len(line) <= 200 and (m := _TOC_ENTRY.match(line))}
    return {name for name in names if any(c.isalpha() for c in name)}


def is_pdf_heading(line: str) -> bool:
    """Conservative: a heading line is dropped from fact spans, so a false positive loses a fact."""
    s = line.strip()
    if not (3 <= len(s) <= 60) or s[-1] in ".!?;:," or FIGURE_CAPTION.match(s):
        return False  # "TABLE 2. ADVERSE REACTIONS" is a caption (`layout.FIGURE_CAPTION`), not a section
    if _PDF_LABELLED.match(s):
        return True
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
    if not m or any(c.isdigit() for c in m.group(1)):
        return False
    if _PDF_DOTTED.match(s):
        return True
    return len(words) <= 6 and all(w[0].isupper() for w in m.group(1).split() if len(w) > 3)


def _strip_running_lines(pages: list[str]) -> list[str]:
    """Drop running headers and footers (`layout.running_lines`), which would otherwise glue onto
    the sentences next to them and, when they look like headings, name every page's section."""
    if len(pages) < 2:
        return pages
    split = [p.split("\n") for p in pages]
    out: list[str] = []
    for lines, drop in zip(split, running_lines(split), strict=True):
        kept = [line for i, line in enumerate(lines) if i not in drop]
        out.append("\n".join(kept).strip("\n").rstrip())
    return out


_WORD_TITLE = re.compile(r"^Microsoft (?:Word|PowerPoint) - ", re.IGNORECASE)


def _clean_pdf_title(title: str) -> str:
    """Producer boilerplate ("Microsoft Word - x.docx", "untitled") is not a title."""
    t = _WORD_TITLE.sub("", title.strip())
    return "" if t.lower() in ("untitled", "untitled document", "") else t


def parse_pdf(data: bytes, filename: str) -> ParsedDocument:
    page_texts, title, styles = _read_pdf(data, filename)
    if not page_texts:
        raise DocumentParseError(filename, "corrupt PDF: no pages")
    page_texts, dropped = drop_glyph_names(page_texts)
    if not any(t.strip() for t in page_texts):
        if dropped:
            raise DocumentParseError(
                filename, "PDF has no extractable text (its fonts map glyphs to no characters)"
            )
        raise DocumentParseError(filename, "PDF has no extractable text (scanned? no text layer)")
    if dropped:
        log.warning(
            "%s: %d glyph names dropped: text in fonts that map glyphs to no characters cannot be read",
            filename,
            dropped,
        )
    pages = _strip_running_lines(page_texts)
    words = vocabulary(pages)
    text, starts = _join_pages([dehyphenate(p, words) for p in pages])
    text, heads = _headings(text, styles)
    return ParsedDocument(
        text=text,
        title=title,
        sections=flat_sections(heads, len(text)),
        page_starts=tuple(starts),
        fmt="pdf",
        line_ends=tuple(
            sorted(
                set(code_line_ends(text, styles))
                | set(index_line_ends(text))
                | set(description_line_ends(text, styles))
            )
        ),
    )


def code_line_ends(text: str, styles: DocumentStyles) -> tuple[int, ...]:
    """The line breaks around each line set in a typewriter face (a code listing's): the prose
    line before the listing ends its span there, and each listing line is a span of its own, as a
    fenced block's lines are in Markdown, rather than one run-on "sentence" of prose and code."""
    ends: set[int] = set()
    pos = 0
    prev_end = -1  # end of the previous non-blank line
    for line in text.split("\n"):
        end = pos + len(line)
        if line.strip():
            if styles.monospaced(line):
                if prev_end >= 0:
                    ends.add(prev_end)
                ends.add(end)
            prev_end = end
        pos = end + 1
    return tuple(sorted(ends))


#: A back-of-book index entry: a term and the pages it is on ("clip, 24, 81-83"), or the page
#: numbers an entry wrapped onto ("166, 201"); a wrapped entry's first line ends on a comma.
_PAGES = r"\d{1,4}(?:\s*[\u2013-]\s*\d{1,4})?"
_INDEX_ENTRY = re.compile(rf"^(?:[^,\n]{{1,80}}?,\s*)?{_PAGES}(?:,\s*{_PAGES})*,?$")
#: This many index entries in a row are an index (a line of prose rarely ends on ", 12").
INDEX_RUN = 5


def index_line_ends(text: str) -> tuple[int, ...]:
    """The line breaks after each entry of a back-of-book index: a column of entries would
    otherwise read as one run-on span of terms and page numbers, though each entry stands alone."""
    lines = text.split("\n")
    ends: list[int] = []
    run: list[int] = []  # ends of the current run of entries
    pos = 0
    before = -1  # end of the line before the run

    def close() -> None:
        if len(run) >= INDEX_RUN:
            ends.extend(([before] if before >= 0 else []) + run)

    for line in lines:
        end = pos + len(line)
        if _INDEX_ENTRY.match(line.strip()) and not line.strip().isdigit():
            run.append(end)
        elif line.strip():
            close()
            run, before = [], end
        pos = end + 1
    close()
    return tuple(ends)


#: This many entries opening on a bold term in a row are a description list (two could be two
#: paragraphs with run-in headings that happen to be short).
DESCRIPTION_RUN = 3
#: An entry of a description list wraps over at most this many more lines.
DESCRIPTION_WRAP = 2
#: An entry's line shorter than this share of the longest line around it ends there: it did not
#: wrap (a wrapped line runs to the margin).
SHORT_LINE = 0.8


def description_line_ends(text: str, styles: DocumentStyles) -> tuple[int, ...]:
    """The line breaks around the entries of a description list (a LaTeX `description`: each
    entry's line opens on its term in bold), so that an entry is a span of its own instead of
    one run-on "sentence" of terms and definitions, which carry no full stop. A list is
    `DESCRIPTION_RUN` or more lines opening on a bold term, at most `DESCRIPTION_WRAP` other
    lines (an entry wrapped) between two of them. Each entry starts a span; an entry's line
    that stops short of the margin (`SHORT_LINE`) did not wrap and ends its span too, so the
    paragraph after the list is not glued to its last entry."""
    lines = text.split("\n")
    starts = line_starts(lines)
    ends: list[int] = []
    run: list[int] = []  # line numbers of the entries
    others = 0  # lines since the last entry that open on no term

    def close() -> None:
        if len(run) < DESCRIPTION_RUN:
            return
        lo, hi = run[0], min(len(lines), run[-1] + DESCRIPTION_WRAP + 1)
        width = max(len(lines[k].rstrip()) for k in range(lo, hi))
        for k in run:
            before = next((j for j in range(k - 1, -1, -1) if lines[j].strip()), -1)
            if before >= 0:
                ends.append(starts[before] + len(lines[before]))
            if len(lines[k].rstrip()) < SHORT_LINE * width:
                ends.append(starts[k] + len(lines[k]))

    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if styles.opens_on_term(line):
            if run and others > DESCRIPTION_WRAP:
                close()
                run = []
            run.append(i)
            others = 0
        elif run:
            others += 1
    close()
    return tuple(sorted(set(ends)))


def drop_glyph_names(pages: list[str]) -> tuple[list[str], int]:
    """Pages without the glyph names pypdf writes for unreadable glyphs (`_GLYPH_NAME`), and how
    many were dropped; pages of a document with fewer than `_GLYPH_RUNS_MIN` runs of them are
    returned as they are. A line left blank by the drop becomes empty."""
    runs = 0
    for page in pages:
        runs += len(_GLYPH_RUN.findall(page))
        if runs >= _GLYPH_RUNS_MIN:
            break
    else:
        return pages, 0
    dropped = 0
    out = []
    for page in pages:
        cleaned, n = _GLYPH_NAME.subn("", page)
        dropped += n
        out.append("\n".join(line if line.strip() else "" for line in cleaned.split("\n")) if n else page)
    return out, dropped


class _PypdfLog(logging.Handler):
    """pypdf's log records, routed to the parse running in the same thread.

    pypdf logs each repair it makes to a non-compliant file ("Ignoring wrong pointing object",
    "incorrect startxref pointer") under its own logger, with no word of which file; several
    files are parsed per run, so a bare line tells the user nothing. While a thread parses a
    PDF its records are collected and reported once, naming the file; outside a parse they go
    on to the root logger as if they had propagated.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._local = threading.local()

    @contextmanager
    def collect(self) -> Iterator[list[str]]:
        previous = getattr(self._local, "messages", None)
        messages: list[str] = []
        self._local.messages = messages
        try:
            yield messages
        finally:
            self._local.messages = previous

    def emit(self, record: logging.LogRecord) -> None:
        messages = getattr(self._local, "messages", None)
        if messages is None:
            logging.getLogger().handle(record)
        elif record.levelno >= logging.WARNING:
            messages.append(record.getMessage().strip())


_PYPDF_LOG = _PypdfLog()
_INSTALL_LOCK = threading.Lock()


def _pypdf_log() -> _PypdfLog:
    """Installed on pypdf's logger at the first PDF, never at import."""
    with _INSTALL_LOCK:
        logger = logging.getLogger("pypdf")
        if _PYPDF_LOG not in logger.handlers:
            logger.addHandler(_PYPDF_LOG)
            logger.propagate = False
    return _PYPDF_LOG


def _report_repairs(filename: str, messages: list[str]) -> None:
    """One warning line naming the file, for every repair pypdf made while reading it."""
    distinct = list(dict.fromkeys(m for m in messages if m))
    if not distinct:
        return
    more = f" (and {len(distinct) - 3} more)" if len(distinct) > 3 else ""
    log.warning("%s: pypdf repaired the PDF while reading it: %s%s", filename, "; ".join(distinct[:3]), more)


def _read_pdf(data: bytes, filename: str) -> tuple[list[str], str, DocumentStyles]:
    """Each page's text, the document's title and its lines' styles; a PDF pypdf cannot read is a
    DocumentParseError."""
    try:
        import pypdf  # noqa: F401 - checked here so a missing pypdf is a parse error, not a crash
    except ImportError as exc:  # pragma: no cover - pypdf is a runtime dependency
        raise DocumentParseError(filename, "PDF support needs pypdf") from exc
    with _pypdf_log().collect() as messages:
        try:
            return _read_pages(data, filename)
        finally:
            _report_repairs(filename, messages)


def _read_pages(data: bytes, filename: str) -> tuple[list[str], str, DocumentStyles]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            _decrypt(reader, filename)
        texts, styles = _page_texts(reader, filename)
        return texts, _title(reader), styles
    except DocumentParseError:
        raise
    except Exception as exc:
        raise DocumentParseError(filename, f"corrupt PDF: {exc}") from exc


#: Parse cost of one PDF: pages, the bytes their content streams decode to (what text extraction
#: walks; pypdf caps each stream at 75 MB, not their sum) and the characters extracted. Real
#: documents stay far below: a 1,000-page manual is ~50 MB of content and ~3 M characters.
MAX_PAGES = 5_000
MAX_CONTENT_BYTES = 256 * 1024 * 1024


def _page_texts(reader: PdfReader, filename: str) -> tuple[list[str], DocumentStyles]:
    pages = reader.pages
    styles = DocumentStyles()
    check_count(filename, "PDF pages", len(pages), MAX_PAGES, "split the document")
    texts: list[str] = []
    content = chars = 0
    for page in pages:
        content += _content_bytes(page)
        check_count(filename, "bytes of PDF page content", content, MAX_CONTENT_BYTES, "split the document")
        texts.append(_page_text(page, styles))
        chars += len(texts[-1])
        check_count(filename, "characters of text", chars, DEFAULT_LIMITS.max_chars, "split the document")
    return texts, styles


def _content_bytes(page: PageObject) -> int:
    try:
        contents = page.get_contents()
        return 0 if contents is None else len(contents.get_data())
    except Exception:
        return 0  # an unreadable page is skipped by `_page_text` too


def _decrypt(reader: PdfReader, filename: str) -> None:
    # An owner password alone still lets anyone read: try the empty user password.
    try:
        ok = reader.decrypt("")
    except Exception as exc:
        raise DocumentParseError(filename, f"encrypted PDF that cannot be opened: {exc}") from exc
    if not ok:
        raise DocumentParseError(filename, "encrypted PDF (a password is required)")


_SPACE_GLYPH = re.compile(r"/space(?![\w.])")


def no_space_glyph_widths(page: PageObject) -> int:
    """Zero, in the reader's copy, the width the page's fonts give code 32 when the font has no
    space glyph, and return how many fonts that was. pypdf takes a gap in a `TJ` array for a
    word space from half the width of code 32; a TeX font subset draws no space (TeX spaces words
    by moving the pen), and in its T1 encoding code 32 is the 500-unit visible-space glyph, so the
    word gaps of a tightly set line (-182/1000 em) came out as no space: "Ifyouwanttoprintthis
    reference". A Type 1 font whose descriptor lists its glyphs (`/CharSet`) without `/space` has
    no space to measure; with the width zeroed pypdf uses its own default for such a font."""
    from pypdf.generic import ArrayObject, NumberObject

    changed = 0
    try:
        fonts: Any = page["/Resources"].get_object()["/Font"].get_object()  # type: ignore[index]
        for key in fonts:
            font = fonts[key].get_object()
            if font.get("/Subtype") != "/Type1":
                continue
            descriptor = font.get("/FontDescriptor")
            charset = descriptor.get_object().get("/CharSet") if descriptor is not None else None
            widths = font.get("/Widths")
            if charset is None or widths is None or _SPACE_GLYPH.search(str(charset)):
                continue
            widths = widths.get_object()
            at = 32 - int(font.get("/FirstChar", 0))
            if isinstance(widths, ArrayObject) and 0 <= at < len(widths) and float(widths[at]) != 0:
                widths[at] = NumberObject(0)
                changed += 1
    except Exception:
        return changed  # a damaged resource dictionary: pypdf reads the page as it is
    return changed


#: A code no font subset uses, mapped to the space (`no_space_glyph_cmaps`).
_UNUSED_CODE = "FFFF"
_BFCHAR = re.compile(rb"beginbfchar(.*?)endbfchar", re.DOTALL)
_BFRANGE = re.compile(rb"beginbfrange(.*?)endbfrange", re.DOTALL)
_HEX_PAIR = re.compile(rb"<\s*([0-9A-Fa-f\s]+)>\s*<\s*([0-9A-Fa-f\s]+)>")
_HEX_RANGE = re.compile(
    rb"<\s*([0-9A-Fa-f]+)\s*>\s*<\s*([0-9A-Fa-f]+)\s*>\s*(?:<\s*([0-9A-Fa-f]+)\s*>|\[([^\]]*)\])"
)


def _maps_space(cmap: bytes) -> bool:
    """Whether a ToUnicode CMap maps any code to the space (U+0020), singly or in a range."""
    for block in _BFCHAR.findall(cmap):
        if any(int(dst.replace(b" ", b"") or b"0", 16) == 0x20 for _src, dst in _HEX_PAIR.findall(block)):
            return True
    for block in _BFRANGE.findall(cmap):
        for lo, hi, dst, listed in _HEX_RANGE.findall(block):
            if listed:
                if re.search(rb"<\s*0*20\s*>", listed):
                    return True
            elif len(dst) <= 4 and int(dst, 16) <= 0x20 <= int(dst, 16) + int(hi, 16) - int(lo, 16):
                return True
    return False


def no_space_glyph_cmaps(page: PageObject) -> int:
    """Map, in the reader's copy, an unused code to the space in the ToUnicode map of each of the
    page's composite (Type0, Identity) fonts that maps no code to one, and return how many fonts
    that was. Such a font (XeTeX and dvipdfmx subsets: dblatex's PDFs) draws no space, so pypdf
    takes the width of code 32 for the space's, and there code 32 is whatever glyph the subset put
    at it (an `=` of 1,000 units): half of it is more than the `TJ` word gaps (-293/1000 em), so
    "Like most Linux distributions" came out as "LikemostLinuxdistributions". With a space that
    has no width pypdf uses its own default, as for the Type 1 fonts of `no_space_glyph_widths`;
    no glyph's width changes."""
    changed = 0
    try:
        fonts: Any = page["/Resources"].get_object()["/Font"].get_object()  # type: ignore[index]
    except Exception:
        return changed  # a damaged resource dictionary: pypdf reads the page as it is
    for key in fonts:
        try:
            font = fonts[key].get_object()
            if font.get("/Subtype") != "/Type0" or "/ToUnicode" not in font:
                continue
            if not str(font.get("/Encoding", "")).startswith("/Identity"):
                continue
            cmap = font["/ToUnicode"].get_object()
            data = cmap.get_data()
            if b"endcmap" not in data or _maps_space(data):
                continue
            extra = f"1 beginbfchar\n<{_UNUSED_CODE}> <0020>\nendbfchar\n".encode()
            cmap.set_data(data.replace(b"endcmap", extra + b"endcmap", 1))
            changed += 1
        except Exception:
            continue  # a stream pypdf cannot re-encode (a filter other than Flate): left as it is
    return changed


#: TeX's T1 (Cork) font encoding puts the ligatures and the double quotes at control codes, and a
#: TeX font without a ToUnicode map comes out of pypdf with them ("di\x1berent", "\x10wins\x11"):
#: 0x1B-0x1F are ff, fi, fl, ffi, ffl in T1 and OT1 alike, 0x10/0x11 are T1's quotes. No text means
#: a control code there; read as the ligature characters (spelt out with the others,
#: `parsers.invisible`) and quotes, one character for one.
_TEX_CONTROLS = str.maketrans(
    {"\x1b": "\ufb00", "\x1c": "\ufb01", "\x1d": "\ufb02", "\x1e": "\ufb03", "\x1f": "\ufb04",
     "\x10": "\u201c", "\x11": "\u201d"}
)  # fmt: skip


def _page_text(page: PageObject, styles: DocumentStyles) -> str:
    from evidence.ingest.pdf_tables import page_text

    collector = StyleCollector()

    def visit(text: str, cm: Any, tm: Any, font: Any, font_size: float) -> None:
        # the style runs read as the page text does, so a heading with a ligature still matches
        collector.visit(text.translate(_TEX_CONTROLS), cm, tm, font, font_size)

    try:
        no_space_glyph_widths(page)
        no_space_glyph_cmaps(page)
        # tables as `| a | b |` rows, a numbered listing's lines set in a typewriter face aside
        raw = page_text(page, visitor_text=visit, code=collector.monospaced)
    except Exception:
        raw = ""  # one unreadable page must not lose the rest of the document
    else:
        styles.add_page(collector)
    return normalise_newlines(raw).translate(_TEX_CONTROLS).strip("\n").rstrip()


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


_CODE_LINE = re.compile(
    r"::=|:=|->|==|(?<!:)//|/\*|\*/|^\s*[{}]|[{};]\s*$|<[A-Za-z_][^<>]*>|^\s*#\s*(?:include|define)\b"
)
# An assignment that appends or a substitution (`+=`, `$(`): a Makefile's or a shell script's line
# ("EXTRA_DIST += $(FONTS)") set bold in a listing, which would otherwise be a heading. It only
# keeps the line itself from heading a section: unlike `_CODE_LINE` it makes no line next to it
# code (the bold section heading over such a listing stays a heading).
_MAKE_LINE = re.compile(r"\+=|\$\(")


def is_code_line(line: str) -> bool:
    """A line of a code sample or grammar (`X ::= Y`, `<placeholder>`, `{`, `foo();`); a URL's
    `://` is not a comment marker."""
    return bool(_CODE_LINE.search(line))


def _headings(text: str, styles: DocumentStyles | None = None) -> tuple[str, list[Heading]]:
    """The text and its heading lines, except those next to a line of code: "BEGIN" between two
    lines of an ASN.1 grammar is code, not a section. A typographic heading wrapped over two lines
    is one heading, its line break made a space (same length: no offset moves) so that the span
    extractor skips the whole heading rather than gluing its second line onto the prose after it.
    Numbered headings nest by their numbering ("2.3" under "2"), typographic ones by size."""
    lines = text.split("\n")

    def excluded(i: int) -> bool:
        s = lines[i].lstrip()
        return (
            s.startswith("|")
            or FIGURE_CAPTION.match(s) is not None
            or is_code_line(s)
            or _MAKE_LINE.search(s) is not None
            or _next_to_code(lines, i, styles)
        )

    def caption(i: int) -> bool:
        return FIGURE_CAPTION.match(lines[i]) is not None

    # A caption set bold or large ("Figure 3. Mean plasma concentrations …") is a caption span, not
    # a heading: it neither opens a heading nor is read as a wrapped heading's second line.
    styled = styled_headings(lines, styles, excluded, ends_group=caption) if styles is not None else {}
    listed = contents_names(lines)
    # A numbered line set small is a footnote ("7 Ethiopian Aircraft Accident Investigation" over
    # "Preliminary Report …, dated March 2019"), not a section. Only numbered ones: an ALL-CAPS
    # title set small (a label's "HIGHLIGHTS OF PRESCRIBING INFORMATION" over 8 pt highlights)
    # still heads its part.
    formal = {
        i
        for i, line in enumerate(lines)
        if (is_pdf_heading(line) or (line.strip() in listed and not caption(i)))
        and not _next_to_code(lines, i, styles)
        and not (styles is not None and _numbered_level(line.strip()) and styles.set_small(line))
    }
    for i in figure_words(lines, styled, formal) | plot_titles(lines, styled):
        del styled[i]
    levels = heading_levels(style for _, _, style in styled.values())
    heads: list[Heading] = []
    breaks: list[int] = []  # line breaks inside a wrapped heading
    pos = 0
    skip = 0
    numbered = 0  # level of the last numbered heading, under which unnumbered typographic ones nest
    for i, line in enumerate(lines):
        if skip:
            skip -= 1
            breaks.append(pos - 1)
        elif i in styled:
            count, name, style = styled[i]
            level = _numbered_level(name)
            numbered = level or numbered
            heads.append((pos, level or max(levels[style], numbered + 1 if numbered else 0), name))
            skip = count - 1
        elif i in formal:
            level = _numbered_level(line.strip())
            numbered = level or numbered
            heads.append((pos, level or 1, line.strip()))
        pos += len(line) + 1
    if breaks:
        chars = list(text)
        for b in breaks:
            chars[b] = " "
        text = "".join(chars)
    return text, _without_paged_entries(heads)


#: A contents entry set without leaders: an optional number, a title, a page number ("1 Definitions
#: and overview 1", "Index 65").
_PAGED_ENTRY = re.compile(r"^(?:(?:\d{1,3}(?:\.\d{1,3})*|[A-Z])\.?\s+)?(?P<title>\D.*?)\s+\d{1,4}$")


def _heading_key(name: str) -> str:
    return " ".join(name.split()).casefold()


#: Two or more unnumbered contents entries side by side, each a title and its page ("Environment 35
#: Expressions 36": a contents page set in columns, read a row at a time).
_PAGED_ROW = re.compile(r"^(?:[^\W\d][^\d]*?\s+\d{1,4}\s+)+[^\W\d][^\d]*?\s+\d{1,4}$")
_PAGED_CELL = re.compile(r"([^\W\d][^\d]*?)\s+\d{1,4}(?:\s+|$)")


def _without_paged_entries(heads: list[Heading]) -> list[Heading]:
    """`heads` without a contents list's entries set bold or large without dot leaders ("1
    Definitions and overview 1"): a heading ending on a page number whose title, with or without
    its number, names a heading further on; or a row of such entries whose every title names a
    heading further on (`_PAGED_ROW`)."""
    out: list[Heading] = []
    later: Counter[str] = Counter(_heading_key(head[2]) for head in heads)
    for head in heads:
        later[_heading_key(head[2])] -= 1
        name = head[2].strip()
        m = _PAGED_ENTRY.match(name)
        if m is not None:
            entry = name[: m.end("title")]
            keys = {_heading_key(m.group("title")), _heading_key(entry)}
            if any(later[key] > 0 for key in keys):
                continue
        if _PAGED_ROW.match(name) and all(
            later[_heading_key(title)] > 0 for title in _PAGED_CELL.findall(name)
        ):
            continue
        out.append(head)
    return out


#: A run of this many heading candidates with no text between them, one typographic style used
#: twice in it, is a figure's labels or a table's header cells (`figure_words`).
FIGURE_RUN = 3


def figure_words(
    lines: list[str], styled: dict[int, tuple[int, str, LineStyle]], formal: set[int]
) -> set[int]:
    """The typographic headings that are words of a figure or a table's cells: a figure's boxes
    ("Interpret", "Bytecodes", "Execute" …) and a table's header row come out of pypdf as short
    heading-styled lines one after the other, nothing between them. A run of `FIGURE_RUN` or more
    heading candidates (typographic `styled` and form `formal` ones) with only blank lines or lines
    without a letter or digit (a flag glyph, "®") between them, in which one typographic style is
    used twice, is such a grid: its unnumbered typographic headings are text. Real headings that
    follow each other (a chapter and its first section) differ in style; numbered, labelled
    (`Appendix B`) and form headings (ALL-CAPS, listed in the contents) are never dropped here."""
    out: set[int] = set()
    run: list[int] = []

    def close() -> None:
        kinds = Counter(styled[i][2] for i in run if i in styled)
        if len(run) >= FIGURE_RUN and kinds and kinds.most_common(1)[0][1] >= 2:
            out.update(
                i
                for i in run
                if i in styled
                and i not in formal
                and not _numbered_level(styled[i][1])
                and not _PDF_LABELLED.match(styled[i][1])
            )
        run.clear()

    i = 0
    while i < len(lines):
        if i in styled or i in formal:
            run.append(i)
            i += styled[i][0] if i in styled else 1
            continue
        if any(c.isalnum() for c in lines[i]):
            close()
        i += 1
    close()
    return out


#: A plot's axis text: tick labels (numbers only) or a short axis title ("Row", "Dose (mg)").
_TICKS = re.compile(r"^[\d\s.,%+\-\u2212]+$")
MAX_AXIS_WORDS = 2
MAX_AXIS_CHARS = 24


def _axis_text(line: str) -> bool:
    s = line.strip()
    return bool(_TICKS.match(s)) or (len(s) <= MAX_AXIS_CHARS and len(s.split()) <= MAX_AXIS_WORDS)


def plot_titles(lines: list[str], styled: dict[int, tuple[int, str, LineStyle]]) -> set[int]:
    """The typographic headings that are a plot's title ("Dimensions: 24 x 100" in bold over an
    image): the `FIGURE_RUN` lines after it are a plot's axis text, short words and tick labels,
    at least one a line of numbers only. A section's first lines are prose, a list or a table's
    rows; numbered and labelled headings (`Appendix B`) are never dropped here."""
    out: set[int] = set()
    for i, (count, name, _) in styled.items():
        if _numbered_level(name) or _PDF_LABELLED.match(name):
            continue
        window = range(i + count, min(len(lines), i + count + 12))
        after = [lines[k] for k in window if lines[k].strip()][:FIGURE_RUN]
        if (
            len(after) == FIGURE_RUN
            and all(_axis_text(s) for s in after)
            and any(_TICKS.match(s.strip()) for s in after)
        ):
            out.add(i)
    return out


def _numbered_level(name: str) -> int:
    """ "2.3 Dosing" is level 2; an unnumbered heading 0 (its level comes from elsewhere)."""
    m = _NUMBERING.match(name)
    return min(m.group(1).count(".") + 1, 4) if m else 0


def _next_to_code(lines: list[str], i: int, styles: DocumentStyles | None = None) -> bool:
    """Whether a line next to line `i` is code, so that line `i` belongs to the listing too; a
    line the typography sets apart as a heading (larger, or bold) where the code line is set as
    text is no part of it ("4.6 Input/Output" between two numbered listings in a small face)."""
    # Indexed, not sliced: a slice per heading candidate made a PDF of many headings quadratic.
    before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
    after = next((lines[k] for k in range(i + 1, len(lines)) if lines[k].strip()), "")
    apart = styles is not None and styles.heading_style(lines[i]) is not None
    return any(
        is_code_line(line) and not (apart and styles is not None and styles.heading_style(line) is None)
        for line in (before, after)
    )
