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

`clean_document` removes the format characters, spells the ligatures out, and moves every
section and page offset with the text. A document without any is returned as it is (same
object), so its content hash, and its index, do not change.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from bisect import bisect_left
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


def _format_characters() -> str:
    ranges: list[str] = []
    start = prev = -2
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) != "Cf":
            continue
        if cp != prev + 1:
            if start >= 0:
                ranges.append(_range(start, prev))
            start = cp
        prev = cp
    ranges.append(_range(start, prev))
    return "".join(ranges)


def _range(a: int, b: int) -> str:
    return re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"


_INVISIBLE = re.compile(f"[{_format_characters()}{''.join(LIGATURES)}]")


def clean_text(text: str) -> str:
    """`text` without format characters and with its ligatures spelled out."""
    if not _INVISIBLE.search(text):
        return text
    return _INVISIBLE.sub(lambda m: LIGATURES.get(m.group(), ""), text)


class _OffsetMap:
    """Old offset → offset in the cleaned text: each change at old position q moves every offset
    after q by its length difference (-1 for a removed character, +1 for "fi" from U+FB01)."""

    def __init__(self, text: str) -> None:
        self.positions: list[int] = []
        deltas: list[int] = []
        for m in _INVISIBLE.finditer(text):
            self.positions.append(m.start())
            deltas.append(len(LIGATURES.get(m.group(), "")) - 1)
        self.shift = [0, *accumulate(deltas)]

    def __call__(self, offset: int) -> int:
        return offset + self.shift[bisect_left(self.positions, offset)]


def clean_document(doc: ParsedDocument) -> ParsedDocument:
    """`doc` with format characters removed and ligatures spelled out in its text, title, subject
    and section names; section and page offsets follow the text. Unchanged documents are returned
    as they are."""
    text = doc.text
    changed_text = _INVISIBLE.search(text) is not None
    names = [doc.title, *doc.subject, *(s.name for s in doc.sections)]
    if not changed_text and not any(_INVISIBLE.search(n) for n in names):
        return doc
    at = _OffsetMap(text) if changed_text else (lambda offset: offset)
    sections = tuple(
        Section(
            name=clean_text(s.name),
            char_start=at(s.char_start),
            char_end=at(s.char_end),
            level=s.level,
            code=s.code,
        )
        for s in doc.sections
    )
    return replace(
        doc,
        text=clean_text(text),
        title=clean_text(doc.title),
        subject=tuple(clean_text(n) for n in doc.subject),
        sections=sections,
        page_starts=tuple(at(p) for p in doc.page_starts),
        source_text=clean_text(doc.source_text) if doc.source_text is not None else None,
    )
