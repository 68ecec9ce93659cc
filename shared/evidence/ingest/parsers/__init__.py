"""Bytes → `ParsedDocument`: txt, Markdown, HTML, PDF (pypdf), docx and FDA SPL XML, one module
per format (SPL's parser is `ingest/spl.py`; its detection is in `detect.py`).

The parser decides the document text every offset refers to. Markdown keeps its
source verbatim (so a span is an exact substring of the uploaded file); HTML,
PDF and docx become plain text whose layout (line breaks, "- " bullets,
"| a | b |" table rows: `layout.py`) is what the span extractor recognises.
"""

from __future__ import annotations

import re
from dataclasses import replace

from evidence.errors import DocumentParseError
from evidence.ingest.parsers.detect import (
    SUPPORTED_FORMATS,
    content_type_format,
    detect_format,
    supported_description,
    unsupported_reason,
)
from evidence.ingest.parsers.docx import parse_docx
from evidence.ingest.parsers.html import parse_html
from evidence.ingest.parsers.invisible import clean_document
from evidence.ingest.parsers.layout import normalise_newlines
from evidence.ingest.parsers.markdown import decode_entities, parse_markdown, question_headings
from evidence.ingest.parsers.markdown_html import read_html_blocks
from evidence.ingest.parsers.pdf import parse_pdf
from evidence.ingest.parsers.plaintext import blank_field_dots, blank_source, parse_plaintext
from evidence.ingest.parsers.text import decode_text
from evidence.ingest.spl import is_spl, parse_spl
from evidence.records import ParsedDocument

__all__ = [
    "SUPPORTED_FORMATS",
    "decode_text",
    "detect_format",
    "parse_bytes",
    "parse_text",
    "supported_description",
    "unsupported_reason",
]


def parse_bytes(data: bytes, *, filename: str, content_type: str | None = None) -> ParsedDocument:
    """Parse one uploaded file; raises `DocumentParseError` naming `filename` and the reason."""
    if not data or not data.strip():
        raise DocumentParseError(filename, "empty document")
    fmt = detect_format(data, filename=filename, content_type=content_type)
    # Format characters and ligatures go where the text is made (parsers/invisible.py): text
    # formats in `parse_text`, the binary ones here.
    if fmt == "spl":
        doc = clean_document(_parse_spl(data, filename))
    elif fmt == "pdf":
        doc = clean_document(parse_pdf(data, filename))
    elif fmt == "docx":
        doc = clean_document(parse_docx(data, filename))
    else:
        _, charset = content_type_format(content_type)
        text = decode_text(data, filename=filename, charset=charset)
        doc = parse_text(text, filename=filename, fmt=fmt)
    if not doc.text.strip():
        raise DocumentParseError(filename, "empty document (no text after parsing)")
    return doc


def _parse_spl(data: bytes, filename: str) -> ParsedDocument:
    """XML is read only as FDA Structured Product Labeling; other XML is refused by name."""
    if not is_spl(data):
        raise DocumentParseError(filename, "XML that is not FDA Structured Product Labeling is not supported")
    return parse_spl(data, filename)


def parse_text(text: str, *, filename: str, fmt: str = "txt", title: str = "") -> ParsedDocument:
    """Parse already-decoded text (API `text` uploads; not JSONL records, which are stored as
    given) of a text format."""
    if fmt == "txt":
        text = blank_field_dots(read_overstrikes(read_sgr_escapes(text)))
    doc = _parse_text(text, filename=filename, fmt=fmt, title=title)
    if fmt == "html":
        # A heading that is a question ("What is Frobnix?", an FAQ's) stays a fact span over its
        # answer, as in Markdown and plain text: it is what a reader asks.
        doc = replace(
            doc, fact_headings=tuple(sorted({*doc.fact_headings, *question_headings(doc.sections)}))
        )
    if fmt != "html" and "\r" in text:
        # Offsets must slice the original: the chunker maps them back (ingest/offsets.py); page
        # furniture blanked in plain text is blanked there too.
        source = blank_source(text, doc.text) if fmt == "txt" and doc.page_starts else text
        doc = replace(doc, source_text=source)
    if fmt == "md":
        # HTML blocks of tables and lists read as HTML, line-end <br> tags dropped (they read as a
        # page's do: parsers/markdown_html.py); the HTML parser decodes their references itself.
        doc = read_html_blocks(doc)
        # Character references outside code read as their characters ("&shy;" is a soft hyphen,
        # removed next), in the source text too (parsers/markdown.py).
        doc = decode_entities(doc)
    # Format characters removed, ligatures spelled out (parsers/invisible.py), in the source
    # text too: it differs from the parsed text by its CRs only, which stay where they were.
    doc = clean_document(doc)
    if not doc.text.strip():
        raise DocumentParseError(filename, "empty document (only invisible format characters)")
    return doc


#: A character struck over by the next one: nroff prints bold as "B\bBo\bol\bld" and underline as
#: "_\bw_\bo_\br_\bd" (a manual printed to text without `col -b`).
_OVERSTRUCK = re.compile(r"[^\n\x08]?\x08")


def read_overstrikes(text: str) -> str:
    """`text` with each overstrike read as the character printed last ("B\bB" → "B", "_\bw" → "w"),
    so an emboldened heading or an underlined word is its words."""
    return _OVERSTRUCK.sub("", text) if "\x08" in text else text


#: A terminal's select-graphic-rendition sequence: grotty prints bold as "\x1b[1mword\x1b[22m" and
#: underline as "\x1b[4mword\x1b[24m" (a manual printed to text with colour escapes, not
#: overstrikes: groff's default since its SGR output).
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def read_sgr_escapes(text: str) -> str:
    """`text` without its graphic-rendition escapes ("\x1b[1m1.  Introduction\x1b[0m" →
    "1.  Introduction"), so an emboldened heading or an underlined word is its words, as
    `read_overstrikes` makes nroff's overstruck ones."""
    return _SGR.sub("", text) if "\x1b" in text else text


def _parse_text(text: str, *, filename: str, fmt: str = "txt", title: str = "") -> ParsedDocument:
    if fmt == "html":
        return parse_html(text, filename)
    text = normalise_newlines(text)
    if not text.strip():
        raise DocumentParseError(filename, "empty document")
    if fmt == "md":
        return parse_markdown(text, title=title)
    if fmt == "txt":
        return parse_plaintext(text, title=title)
    raise DocumentParseError(filename, f"unsupported format {fmt!r} for text ({supported_description()})")
