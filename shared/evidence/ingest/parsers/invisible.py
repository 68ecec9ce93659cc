"""Invisible format characters and typographic ligatures, removed from a parsed document.

Format characters (Unicode category Cf: the soft hyphen U+00AD, zero-width space U+200B,
ZWNJ/ZWJ U+200C/D, word joiner U+2060, BOM U+FEFF inside a text, bidi marks U+200E/F and
U+202A-E, U+2066-9 ...) render as nothing, yet sit inside words: "encryp\u00adtion" is the word
"encryption" on screen. Neither backend can match it as such: Lucene's StandardTokenizer (UAX #29,
rule WB4) ignores Format characters when it looks for word boundaries, so OpenSearch indexes the
one token "encryp\u00adtion", soft hyphen included, while the embedded analyser splits it into
"encryp" and "tion"; a question saying "encryption" finds neither. PDF text extractors also
return the typographic ligatures U+FB00-FB06 ("\ufb01rst" for "first", LaTeX and InDesign set
them), which no analyser folds either. Both are fixed where the document text is made: every
offset (sections, pages, spans, passages) refers to the cleaned text, so `span.text ==
doc.text[char_start:char_end]` holds and the two backends see the same words.

C1 control characters (U+0080-U+009F) and DEL (U+007F) mean nothing in a text either; a PDF
whose font maps its bullet glyph to a control code (a Type 3 or symbol font without a ToUnicode
map) returns one where each bullet was ("\x88 All evaluation …"). Such a control that opens a
line or a table cell (after its indent) and is followed by a space reads as a bullet, U+2022
(same length); any other is removed.

`clean_document` removes the format characters and stray C1 controls, reads a C1 list marker as a
bullet, spells the ligatures out, and moves every section and page offset with the text. A
document without any is returned as it is (same object), so its content hash, and its index, do
not change.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import replace
from itertools import accumulate

from evidence.records import ParsedDocument, Section

#: Typographic ligatures (Alphabetic Presentation Forms) and the letters they stand for.
LIGATURES = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
}


#: The code point ranges of category Cf in the Unicode database `FORMAT_RANGES_VERSION`
#: (Python 3.11's `unicodedata`). Deriving them from `unicodedata` means testing all 1.1 M code
#: points, ~0.13 s at the first parse of every process; a unit test checks this table against
#: `unicodedata`, and a Python with another Unicode version derives its own (`_format_ranges`).
FORMAT_RANGES_VERSION = "14.0.0"
FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)  # fmt: skip


def derive_format_ranges() -> tuple[tuple[int, int], ...]:
    """Category Cf's code point ranges, from `unicodedata` (every code point tested)."""
    ranges: list[tuple[int, int]] = []
    start = prev = -2
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) != "Cf":
            continue
        if cp != prev + 1:
            if start >= 0:
                ranges.append((start, prev))
            start = cp
        prev = cp
    ranges.append((start, prev))
    return tuple(ranges)


def _format_ranges() -> tuple[tuple[int, int], ...]:
    if unicodedata.unidata_version == FORMAT_RANGES_VERSION:
        return FORMAT_RANGES
    return derive_format_ranges()


def _format_characters() -> str:
    return "".join(_range(a, b) for a, b in _format_ranges())


def _range(a: int, b: int) -> str:
    return re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"


#: C1 control characters and DEL (U+007F): no text means them; read as a bullet where one stands
#: as a list marker (a symbol font's bullet glyph comes out as DEL in some label PDFs: "\x7f feel
#: tired or weak").
_C1 = "\x7f-\x9f"
BULLET = "\u2022"
_INVISIBLE = re.compile(f"[{_format_characters()}{''.join(LIGATURES)}{_C1}]")


def _marker(text: str, start: int) -> bool:
    """Whether the C1 control at `start` stands as a list marker: the first character of its line
    or of a table cell ("| \x88 | …", after the indent) and followed by a space or tab."""
    if text[start + 1 : start + 2] not in (" ", "\t"):
        return False
    j = start - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] in "\n|"


def _replacement(text: str, start: int) -> str:
    ch = text[start]
    if ch in LIGATURES:
        return LIGATURES[ch]
    if "\x7f" <= ch <= "\x9f" and _marker(text, start):
        return BULLET
    return ""


def clean_text(text: str) -> str:
    """`text` without format characters and stray C1 controls, a C1 list marker read as a bullet,
    and its ligatures spelled out."""
    if not _INVISIBLE.search(text):
        return text
    return apply_edits(text, _invisible_edits(text))


def clean_question(text: str | None) -> str | None:
    """A question read as the documents are: format characters out, ligatures spelled out
    (`Service.run_profile` and `Service.plan` clean `query` and `criterion_question` before any
    analysis, so "encryp\u00adtion" asks for "encryption" on every path)."""
    return None if text is None else clean_text(text)


class _OffsetMap:
    """Old offset → offset in the edited text: each edit at old position q moves every offset
    after q by its length difference (-1 for a removed character, +1 for "fi" from U+FB01, -4 for
    "&amp;" read as "&")."""

    def __init__(self, edits: list[tuple[int, int, str]]) -> None:
        self.positions = [a for a, _, _ in edits]
        self.shift = [0, *accumulate(len(new) - (b - a) for a, b, new in edits)]

    def __call__(self, offset: int) -> int:
        return offset + self.shift[bisect_left(self.positions, offset)]


def _invisible_edits(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), _replacement(text, m.start())) for m in _INVISIBLE.finditer(text)]


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, replacement) applied; the edits are sorted and disjoint."""
    if not edits:
        return text
    out: list[str] = []
    pos = 0
    for a, b, new in edits:
        out.append(text[pos:a])
        out.append(new)
        pos = b
    out.append(text[pos:])
    return "".join(out)


def edit_document(
    doc: ParsedDocument,
    edits: list[tuple[int, int, str]],
    *,
    source_edits: list[tuple[int, int, str]] | None = None,
    rename: Callable[[str], str] = lambda name: name,
) -> ParsedDocument:
    """`doc` with `edits` applied to its text (and `source_edits` to its CRLF source text), every
    section and page offset moved with the text, and `rename` applied to its title, subject and
    section names."""
    at = _OffsetMap(edits) if edits else (lambda offset: offset)
    sections = tuple(
        Section(
            name=rename(s.name),
            char_start=at(s.char_start),
            char_end=at(s.char_end),
            level=s.level,
            code=s.code,
        )
        for s in doc.sections
    )
    source = doc.source_text
    return replace(
        doc,
        text=apply_edits(doc.text, edits),
        title=rename(doc.title),
        subject=tuple(rename(n) for n in doc.subject),
        sections=sections,
        page_starts=tuple(at(p) for p in doc.page_starts),
        line_ends=tuple(at(e) for e in doc.line_ends),
        fact_headings=tuple(at(h) for h in doc.fact_headings),
        source_text=apply_edits(source, source_edits or []) if source is not None else None,
    )


def clean_document(doc: ParsedDocument) -> ParsedDocument:
    """`doc` with format characters and stray C1 controls removed, a C1 list marker read as a
    bullet, and ligatures spelled out in its text, title, subject and section names; section and
    page offsets follow the text. Unchanged documents are returned as they are."""
    text = doc.text
    names = [doc.title, *doc.subject, *(s.name for s in doc.sections)]
    if _INVISIBLE.search(text) is None and not any(_INVISIBLE.search(n) for n in names):
        return doc
    source = doc.source_text
    return edit_document(
        doc,
        _invisible_edits(text),
        source_edits=_invisible_edits(source) if source is not None else None,
        rename=clean_text,
    )
