"""Bytes → `ParsedDocument`: txt, Markdown, HTML, PDF (pypdf) and docx.

The parser decides the document text every offset refers to. Markdown keeps its
source verbatim (so a span is an exact substring of the uploaded file); HTML,
PDF and docx become plain text whose layout (line breaks, "- " bullets,
"| a | b |" table rows) is what the span extractor recognises.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
import zlib
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import PurePath
from xml.etree import ElementTree

from evidence.errors import DocumentParseError
from evidence.records import ParsedDocument, Section

SUPPORTED_FORMATS: tuple[str, ...] = ("txt", "md", "html", "pdf", "docx", "spl")

_EXTENSIONS: dict[str, str] = {
    ".txt": "txt",
    ".text": "txt",
    ".log": "txt",
    ".md": "md",
    ".markdown": "md",
    ".mdown": "md",
    ".mkd": "md",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".xml": "spl",
    ".pdf": "pdf",
    ".docx": "docx",
}

_CONTENT_TYPES: dict[str, str] = {
    "text/plain": "txt",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/xml": "spl",
    "text/xml": "spl",
    "application/pdf": "pdf",
    "application/x-pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}

# Content types that say nothing about the format (S3's and browsers' defaults).
_GENERIC_CONTENT_TYPES = frozenset(
    {"application/octet-stream", "binary/octet-stream", "application/unknown", ""}
)

# Formats people upload that we deliberately do not parse: refuse them by name
# instead of sniffing their bytes.
_KNOWN_UNSUPPORTED = frozenset(
    {
        ".doc", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".rtf", ".epub",
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".svg", ".ico", ".heic",
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar",
        ".mp3", ".wav", ".mp4", ".mov", ".avi", ".mkv", ".exe", ".dll", ".so", ".bin", ".pyc",
    }
)  # fmt: skip

#: Bounds on inflating a docx body (a decompression bomb is a small zip that inflates to
#: gigabytes): an absolute size, and a ratio no Word body reaches (real ones deflate 5-20x).
#: The zip's declared size is a hard bound: zipfile stops there (and fails the CRC if it lied).
_MAX_DOCX_XML_BYTES = 64 * 1024 * 1024
#: What a damaged zip can raise from zipfile (found by mutation fuzzing: a corrupted header
#: offset is a ValueError "negative seek value", a bad method NotImplementedError, …).
_ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    ValueError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
)
_MAX_DOCX_RATIO = 100


def supported_description() -> str:
    return "supported: " + ", ".join(SUPPORTED_FORMATS)


def unsupported_reason(filename: str) -> str | None:
    """Why a file is refused by its name alone (known unsupported extension), else None."""
    suffix = PurePath(filename).suffix.lower()
    if suffix in _KNOWN_UNSUPPORTED:
        return f"unsupported file type {suffix!r} ({supported_description()})"
    return None


def _content_type_format(content_type: str | None) -> tuple[str | None, str | None]:
    """(format, charset) from a Content-Type header; format None when it is generic."""
    if not content_type:
        return None, None
    main, _, params = content_type.partition(";")
    main = main.strip().lower()
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"').lower()
    if main in _GENERIC_CONTENT_TYPES:
        return None, charset
    return _CONTENT_TYPES.get(main, f"!{main}"), charset


def detect_format(data: bytes, *, filename: str, content_type: str | None = None) -> str:
    """Content type first, then extension, then sniffing the bytes.

    `text/plain` defers to a Markdown extension: browsers and S3 label `.md`
    uploads `text/plain`, and we would lose the headings.
    """
    by_type, _ = _content_type_format(content_type)
    suffix = PurePath(filename).suffix.lower()
    by_ext = _EXTENSIONS.get(suffix)
    if by_type is not None and by_type.startswith("!"):
        raise DocumentParseError(
            filename, f"unsupported content type {by_type[1:]!r} ({supported_description()})"
        )
    if by_type == "txt" and by_ext == "md":
        return "md"
    if by_type is not None:
        return by_type
    if by_ext is not None:
        return by_ext
    reason = unsupported_reason(filename)
    if reason is not None:
        raise DocumentParseError(filename, reason)
    return _sniff(data, filename)


def _sniff(data: bytes, filename: str) -> str:
    head = data[:1024].lstrip()
    # Some producers put junk before the header; then the trailer must be there too.
    if head.startswith(b"%PDF-") or (b"%PDF-" in data[:1024] and b"%%EOF" in data[-2048:]):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        if _is_docx(data):
            return "docx"
        raise DocumentParseError(filename, f"unsupported type: a zip archive ({supported_description()})")
    for magic, name in _MAGIC:
        if head.startswith(magic):
            raise DocumentParseError(filename, f"unsupported type: {name} ({supported_description()})")
    from evidence.ingest.spl import is_spl

    if is_spl(data):
        return "spl"
    lowered = head[:512].lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
        return "html"
    return "txt"


_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\xd0\xcf\x11\xe0", "legacy Office document (.doc/.xls)"),
    (b"{\\rtf", "RTF document"),
    (b"\x7fELF", "executable"),
)


def _is_docx(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return "word/document.xml" in zf.namelist()
    except _ZIP_ERRORS:
        return False


# --- text decoding ---------------------------------------------------------------------------

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def decode_text(data: bytes, *, filename: str, charset: str | None = None) -> str:
    """UTF-8 (BOM aware; UTF-16/32 only with a BOM), else the declared charset, else cp1252."""
    text: str | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise DocumentParseError(filename, f"invalid {encoding} after its byte-order mark") from exc
            break
    if text is None:
        if b"\x00" in data[:8192]:
            raise DocumentParseError(filename, "binary content, not text (NUL bytes)")
        candidates = ["utf-8"]
        if charset and _known(charset) and codecs.lookup(charset).name != "utf-8":
            candidates.append(charset)
        candidates.append("cp1252")
        for encoding in candidates:
            try:
                text = data.decode(encoding)
                break
            except UnicodeDecodeError:
                continue
        if text is None:
            raise DocumentParseError(filename, "binary content, not text (neither UTF-8 nor cp1252)")
    sample = text[:20000]
    if sample and len(_CONTROL.findall(sample)) > max(8, len(sample) // 20):
        raise DocumentParseError(filename, "binary content, not text (control characters)")
    return text


def _known(charset: str) -> bool:
    try:
        codecs.lookup(charset)
    except LookupError:
        return False
    return True


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# --- entry points ----------------------------------------------------------------------------


def parse_bytes(data: bytes, *, filename: str, content_type: str | None = None) -> ParsedDocument:
    """Parse one uploaded file; raises `DocumentParseError` naming `filename` and the reason."""
    if not data or not data.strip():
        raise DocumentParseError(filename, "empty document")
    fmt = detect_format(data, filename=filename, content_type=content_type)
    if fmt == "spl":
        from evidence.ingest.spl import is_spl, parse_spl

        if not is_spl(data):
            raise DocumentParseError(
                filename, "XML that is not FDA Structured Product Labeling is not supported"
            )
        doc = parse_spl(data, filename)
    elif fmt == "pdf":
        doc = _parse_pdf(data, filename)
    elif fmt == "docx":
        doc = _parse_docx(data, filename)
    else:
        _, charset = _content_type_format(content_type)
        text = decode_text(data, filename=filename, charset=charset)
        doc = parse_text(text, filename=filename, fmt=fmt)
    if not doc.text.strip():
        raise DocumentParseError(filename, "empty document (no text after parsing)")
    return doc


def parse_text(text: str, *, filename: str, fmt: str = "txt", title: str = "") -> ParsedDocument:
    """Parse already-decoded text (API `text` uploads, JSONL records) of a text format."""
    if fmt == "html":
        return _parse_html(text, filename)
    text = _normalise_newlines(text)
    if not text.strip():
        raise DocumentParseError(filename, "empty document")
    if fmt == "md":
        sections, h1 = _markdown_sections(text)
        return ParsedDocument(text=text, title=title or h1, sections=sections, fmt="md")
    if fmt == "txt":
        return ParsedDocument(text=text, title=title, fmt="txt")
    raise DocumentParseError(filename, f"unsupported format {fmt!r} for text ({supported_description()})")


# --- Markdown --------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s|>|\||#)")


def _markdown_sections(text: str) -> tuple[tuple[Section, ...], str]:
    """ATX and setext headings outside fenced code; flat sections, each to the next heading."""
    heads: list[tuple[int, int, str]] = []  # (char_start, level, name)
    fence: str | None = None
    pos = 0
    # The previous line, if it is a one-line paragraph: only those become setext headings
    # (cheap, and a "---" under a longer paragraph stays a rule rather than eating it).
    prev: tuple[int, str] | None = None
    para_lines = 0
    for line in text.split("\n"):
        start = pos
        pos += len(line) + 1
        fm = _FENCE.match(line)
        if fence is not None:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
            prev, para_lines = None, 0
            continue
        if fm:
            fence = fm.group(1)
            prev, para_lines = None, 0
            continue
        am = _ATX.match(line)
        if am:
            heads.append((start, len(am.group(1)), (am.group(2) or "").strip()))
            prev, para_lines = None, 0
            continue
        sm = _SETEXT.match(line)
        if sm and prev is not None and para_lines == 1:
            heads.append((prev[0], 1 if sm.group(1)[0] == "=" else 2, prev[1].strip()))
            prev, para_lines = None, 0
            continue
        if line.strip() and not _NOT_PARAGRAPH.match(line):
            prev = (start, line)
            para_lines += 1
        else:
            prev, para_lines = None, 0
    sections = _flat_sections(heads, len(text))
    h1 = next((name for _, level, name in heads if level == 1 and name), "")
    return sections, _strip_inline_markdown(h1)


def _strip_inline_markdown(s: str) -> str:
    return re.sub(r"[*_`]+", "", s).strip()


def _flat_sections(heads: list[tuple[int, int, str]], end: int) -> tuple[Section, ...]:
    out: list[Section] = []
    for i, (start, level, name) in enumerate(heads):
        stop = heads[i + 1][0] if i + 1 < len(heads) else end
        if stop > start:
            out.append(Section(name=name, char_start=start, char_end=stop, level=level))
    return tuple(out)


# --- HTML ------------------------------------------------------------------------------------

_SKIP_TAGS = frozenset(
    {
        "script",
        "style",
        "nav",
        "noscript",
        "template",
        "svg",
        "iframe",
        "object",
        "select",
        "button",
        "dialog",
    }
)
# Landmarks that hold site chrome rather than content.
_SKIP_ROLES = frozenset({"navigation", "search", "menu", "menubar", "toolbar", "banner", "dialog"})
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_PARA_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "main", "aside", "blockquote", "address",
        "figure", "figcaption", "form", "fieldset", "details", "summary", "table", "ul", "ol", "dl",
        "caption", "pre", "body", "html", "center", "hgroup", "legend",
    }
)  # fmt: skip
_LINE_BLOCKS = frozenset({"li", "tr", "dt", "dd", "option"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_WS = re.compile(r"\s+")


def _hidden(attrs: list[tuple[str, str | None]]) -> bool:
    for key, value in attrs:
        if key == "hidden" or (key == "aria-hidden" and value == "true"):
            return True
        if key == "role" and value and value.strip().lower() in _SKIP_ROLES:
            return True
        if key == "style" and value and "display:none" in value.replace(" ", "").lower():
            return True
    return False


class _HtmlText(HTMLParser):
    """Streams visible text into lines; tracks headings as sections and tables as pipe rows."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.length = 0
        self.pending_break = 0  # newlines owed before the next text (1 line, 2 paragraph)
        self.trailing_newlines = 0  # newlines already at the end of the output
        self.after_prefix = False  # just wrote a list marker: breaks wait for the item's text
        self.space_pending = False
        # Skipped subtree: its tag and nesting depth of that same tag. Counting only that tag keeps
        # unclosed <p>/<li> inside a <nav> from swallowing the rest of the page.
        self.skip_tag = ""
        self.skip_depth = 0
        self.pre_depth = 0
        self.lists: list[list[int]] = []  # per open list: [ordered, counter]
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.heading: tuple[int, int, list[str]] | None = None  # (level, start, parts)
        self.heads: list[tuple[int, int, str]] = []
        self.title_parts: list[str] | None = None
        self.title = ""
        self.first_h1 = ""

    # output helpers
    def _emit(self, s: str) -> None:
        self.out.append(s)
        self.length += len(s)
        body = s.rstrip("\n")
        self.trailing_newlines = (self.trailing_newlines + len(s)) if not body else len(s) - len(body)

    @property
    def _mid_line(self) -> bool:
        return self.length > 0 and self.trailing_newlines == 0 and not self.after_prefix

    def _break(self, n: int) -> None:
        if self.lists:
            n = 1  # a <p> or <div> inside a list item must not put a blank line inside the list
        if self.length and not self.after_prefix:
            self.pending_break = max(self.pending_break, n)
        self.space_pending = False

    def _line_break(self) -> None:
        """<br>: each one adds a line, so two make a blank line."""
        if self.length and not self.after_prefix:
            self.pending_break = min(self.pending_break + 1, 2)
        self.space_pending = False

    def _start_text(self) -> None:
        need = self.pending_break - self.trailing_newlines
        if self.pending_break and self.length and need > 0:
            self._emit("\n" * need)
        self.pending_break = 0

    def _write(self, text: str) -> None:
        if not text:
            return
        self._start_text()
        if self.space_pending and self._mid_line:
            self._emit(" ")
        self.space_pending = False
        self._emit(text)
        self.after_prefix = False

    def _write_prefix(self, prefix: str) -> None:
        self._start_text()
        self._emit(prefix)
        self.after_prefix = True
        self.pending_break = 0
        self.space_pending = False

    # parser callbacks
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        if tag == "title" and self.title_parts is None and not self.title:
            self.title_parts = []
            return
        if tag in _SKIP_TAGS or _hidden(attrs):
            if tag not in _VOID:
                self.skip_tag, self.skip_depth = tag, 1
            return
        if self.cell is not None or self.row is not None:
            self._start_in_table(tag)
            return
        if tag == "br":
            if self.pre_depth:
                self._write_raw_pre("\n")
            else:
                self._line_break()
        elif tag == "hr":
            self._break(2)
        elif tag in _HEADINGS:
            self._break(2)
            self.heading = (_HEADINGS[tag], -1, [])
        elif tag in ("ul", "ol", "menu"):
            self._break(2 if not self.lists else 1)
            self.lists.append([1 if tag == "ol" else 0, 0])
        elif tag == "li":
            self._break(1)
            depth = max(len(self.lists) - 1, 0)
            marker = "- "
            if self.lists and self.lists[-1][0]:
                self.lists[-1][1] += 1
                marker = f"{self.lists[-1][1]}. "
            self._write_prefix("  " * depth + marker)
        elif tag == "tr":
            self._break(1)
            self.row = []
        elif tag == "pre":
            self._break(2)
            self.pre_depth += 1
        elif tag in _PARA_BLOCKS:
            self._break(2)
        elif tag in _LINE_BLOCKS:
            self._break(1)

    def _start_in_table(self, tag: str) -> None:
        if tag in ("td", "th"):
            if self.row is None:
                self.row = []
            self._flush_cell()
            self.cell = []
        elif tag == "tr":
            self._flush_row()
            self.row = []
        elif tag == "br" and self.cell is not None:
            self.cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title_parts is not None:
            self.title = _WS.sub(" ", "".join(self.title_parts)).strip()
            self.title_parts = None
            return
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth -= 1
            return
        if self.row is not None:
            if tag in ("td", "th"):
                self._flush_cell()
                return
            if tag == "tr":
                self._flush_row()
                return
            if tag == "table":
                self._flush_row()
                self._break(2)
                return
            if tag not in ("table", "tbody", "thead", "tfoot"):
                return
        if tag in _HEADINGS and self.heading is not None:
            level, start, parts = self.heading
            name = _WS.sub(" ", "".join(parts)).strip()
            if start >= 0 and name:
                self.heads.append((start, level, name))
                if level == 1 and not self.first_h1:
                    self.first_h1 = name
            self.heading = None
            self._break(2)
        elif tag in ("ul", "ol", "menu"):
            if self.lists:
                self.lists.pop()
            self._break(2 if not self.lists else 1)
        elif tag == "pre":
            self.pre_depth = max(self.pre_depth - 1, 0)
            self._break(2)
        elif tag in _PARA_BLOCKS:
            self._break(2)
        elif tag in _LINE_BLOCKS:
            self._break(1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        if self.title_parts is not None:
            self.title_parts.append(data)
            return
        if self.skip_depth:
            return
        if self.cell is not None:
            self.cell.append(data)
            return
        if self.row is not None:
            return  # stray text between cells
        if self.pre_depth:
            self._write_raw_pre(data)
            return
        if self.heading is not None and self.heading[1] < 0 and data.strip():
            self._start_text()
            start = self.length + (1 if self.space_pending and self._mid_line else 0)
            self.heading = (self.heading[0], start, self.heading[2])
        if self.heading is not None:
            self.heading[2].append(data)
        # str.split() also breaks on no-break and thin spaces: they render as one space.
        words = data.split()
        if data[:1].isspace():
            self.space_pending = True
        for n, word in enumerate(words):
            if n:
                self.space_pending = True
            self._write(word)
        if data[-1:].isspace():
            self.space_pending = True

    def _write_raw_pre(self, data: str) -> None:
        lines = data.replace("\r\n", "\n").split("\n")
        for i, line in enumerate(lines):
            if i:
                self._start_text()
                self._emit("\n")
            if line:
                self._start_text()
                self._emit(line)
                self.after_prefix = False

    def _flush_cell(self) -> None:
        if self.cell is not None and self.row is not None:
            text = _WS.sub(" ", "".join(self.cell)).strip().replace("|", "\\|")
            self.row.append(text)
        self.cell = None

    def _flush_row(self) -> None:
        self._flush_cell()
        if self.row is not None and any(c for c in self.row):
            self._break(1)
            self._write("| " + " | ".join(self.row) + " |")
            self._break(1)
        self.row = None


def _parse_html(html: str, filename: str) -> ParsedDocument:
    parser = _HtmlText()
    try:
        parser.feed(html)
        parser.close()
    except Exception as exc:  # html.parser is lenient; anything raised is a real defect of the input
        raise DocumentParseError(filename, f"malformed HTML: {exc}") from exc
    if parser.row is not None:
        parser._flush_row()
    text = "".join(parser.out)
    if not text.strip():
        raise DocumentParseError(filename, "empty document (no visible text in the HTML)")
    sections = _flat_sections(sorted(parser.heads), len(text))
    return ParsedDocument(text=text, title=parser.title or parser.first_h1, sections=sections, fmt="html")


# --- PDF -------------------------------------------------------------------------------------

_CODE_CHARS = frozenset("{}[]<>=_;|*#@$%^~`\\:")
_PDF_HEADING = re.compile(r"^(?:\d+\.)*\d+\.?\s+([A-Z][^.!?;:]{1,60})$")


def _is_pdf_heading(line: str) -> bool:
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


def _parse_pdf(data: bytes, filename: str) -> ParsedDocument:
    try:
        from pypdf import PdfReader
    except ImportError as exc:  # pragma: no cover - pypdf is a runtime dependency
        raise DocumentParseError(filename, "PDF support needs pypdf") from exc
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            # An owner password alone still lets anyone read: try the empty user password.
            try:
                ok = reader.decrypt("")
            except Exception as exc:
                raise DocumentParseError(filename, f"encrypted PDF that cannot be opened: {exc}") from exc
            if not ok:
                raise DocumentParseError(filename, "encrypted PDF (a password is required)")
        pages = reader.pages
        page_texts: list[str] = []
        for page in pages:
            try:
                from evidence.ingest.pdf_tables import page_text

                raw = page_text(page)  # tables as `| a | b |` rows
            except Exception:
                raw = ""  # one unreadable page must not lose the rest of the document
            page_texts.append(_normalise_newlines(raw).strip("\n").rstrip())
        title = ""
        try:
            meta = reader.metadata
            if meta is not None and isinstance(meta.title, str):
                title = _clean_pdf_title(meta.title)
        except Exception:
            title = ""
    except DocumentParseError:
        raise
    except Exception as exc:
        raise DocumentParseError(filename, f"corrupt PDF: {exc}") from exc
    if not page_texts:
        raise DocumentParseError(filename, "corrupt PDF: no pages")
    if not any(t.strip() for t in page_texts):
        raise DocumentParseError(filename, "PDF has no extractable text (scanned? no text layer)")
    page_texts = _strip_running_lines(page_texts)
    starts: list[int] = []
    parts: list[str] = []
    pos = 0
    for i, t in enumerate(page_texts):
        if i:
            parts.append("\n\n")
            pos += 2
        starts.append(pos)
        parts.append(t)
        pos += len(t)
    text = "".join(parts)
    heads: list[tuple[int, int, str]] = []
    pos = 0
    for line in text.split("\n"):
        if _is_pdf_heading(line):
            heads.append((pos, 1, line.strip()))
        pos += len(line) + 1
    return ParsedDocument(
        text=text,
        title=title,
        sections=_flat_sections(heads, len(text)),
        page_starts=tuple(starts),
        fmt="pdf",
    )


# --- docx ------------------------------------------------------------------------------------

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_STYLE = re.compile(r"^(?:heading|berschrift|titre)\s*(\d)$", re.IGNORECASE)


_DOCX_ERRORS: tuple[type[Exception], ...] = (ElementTree.ParseError, *_ZIP_ERRORS)


def _parse_docx(data: bytes, filename: str) -> ParsedDocument:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            info = zf.getinfo("word/document.xml")
            if info.file_size > _MAX_DOCX_XML_BYTES:
                raise DocumentParseError(filename, "docx body is too large to parse")
            if info.file_size > _MAX_DOCX_RATIO * max(info.compress_size, 1024):
                raise DocumentParseError(
                    filename,
                    f"docx body inflates {info.file_size // max(info.compress_size, 1)}x "
                    f"(limit {_MAX_DOCX_RATIO}x): refused as a decompression bomb",
                )
            root = ElementTree.fromstring(zf.read(info))
    except DocumentParseError:
        raise
    except KeyError as exc:
        raise DocumentParseError(filename, "not a Word document (no word/document.xml)") from exc
    except _DOCX_ERRORS as exc:
        raise DocumentParseError(filename, f"corrupt docx: {exc}") from exc
    body = root.find(f"{_W}body")
    if body is None:
        raise DocumentParseError(filename, "corrupt docx: no body")
    lines: list[str] = []
    heads: list[tuple[int, int, str]] = []  # (line index, level, name)
    title = ""
    for el in _docx_blocks(body):
        if el.tag == f"{_W}p":
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
        elif el.tag == f"{_W}tbl":
            for tr in el.iter(f"{_W}tr"):
                cells = []
                for tc in tr.findall(f"{_W}tc"):
                    parts = [_docx_paragraph(p)[0] for p in tc.iter(f"{_W}p")]
                    cells.append(_WS.sub(" ", " ".join(parts)).strip().replace("|", "\\|"))
                if any(cells):
                    lines.append("| " + " | ".join(cells) + " |")
    # Paragraphs are separated by blank lines so prose paragraphs stay apart; rows and bullets by one.
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
    text = "".join(out)
    if not text.strip():
        raise DocumentParseError(filename, "empty document (no text in the docx)")
    sections = _flat_sections([(line_starts[i], lvl, name) for i, lvl, name in heads], len(text))
    return ParsedDocument(text=text, title=title, sections=sections, fmt="docx")


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
