"""Markdown: the source is kept verbatim (a span is an exact substring of the uploaded file),
but for its HTML character references outside code ("soluti&shy;ons", "R&amp;D", "&#8209;"),
which are read as the characters they stand for (`decode_entities`); ATX and setext headings
outside fenced code become sections, and so does an ATX heading opening a list item ("1. ####
Introduction", a contract's numbered clauses set as headings inside an ordered list: CommonMark
reads the item's first block as a heading). A heading that is a question ("## What is Kettlex?")
stays a fact span too, its text without the `#` marks (`question_headings`)."""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_left, bisect_right

from evidence.ingest.parsers.invisible import edit_document
from evidence.ingest.parsers.layout import Heading, flat_sections
from evidence.records import ParsedDocument, Section

#: An HTML character reference: named ("&amp;", "&shy;"), decimal ("&#8209;") or hex ("&#x2011;").
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_BACKTICKS = re.compile(r"`+")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s|>|\||#)")


def markdown_sections(text: str) -> tuple[tuple[Section, ...], str]:
    """ATX and setext headings outside fenced code; flat sections, each to the next heading."""
    heads: list[Heading] = []
    fence: str | None = None
    pos = 0
    # The previous line, if it is a one-line paragraph: only those become setext headings
    # (cheap, and a "---" under a longer paragraph stays a rule rather than eating it).
    prev: tuple[int, str] | None = None
    para_lines = 0
    for line in text.split("\n"):
        start = pos
        pos += len(line) + 1
        fm = FENCE.match(line)
        if fence is not None:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
            prev, para_lines = None, 0
            continue
        if fm:
            fence = fm.group(1)
            prev, para_lines = None, 0
            continue
        atx = atx_heading(line)
        if atx is None:
            atx = item_heading(line)
        if atx:
            heads.append((start, *atx))
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
    sections = flat_sections(heads, len(text))
    h1 = next((name for _, level, name in heads if level == 1 and name), "")
    return sections, _strip_inline_markdown(h1)


def atx_heading(line: str) -> tuple[int, str] | None:
    """(level, name) of an ATX heading line ("## Name ##"), else None.

    Read with string operations: the lazy regex it replaces rescanned the trailing spaces from
    every position of a long heading line (a line of 20,000 spaces took 8 s)."""
    indent = len(line) - len(line.lstrip(" "))
    if indent > 3:
        return None
    end = indent
    while end < len(line) and line[end] == "#":
        end += 1
    level = end - indent
    rest = line[end:]
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t" and rest.strip(" \t")):
        return None
    body = rest.rstrip(" \t")
    closing = len(body.rstrip("#"))
    # One closing run of "#" after a space ends the heading, unless it is all the heading holds.
    if 0 < closing < len(body) and body[closing - 1] in " \t" and body[:closing].strip(" \t"):
        body = body[:closing]
    return level, body.strip()


#: A list item's marker before an ATX heading: "1. #### Introduction", "- ## Options".
_ITEM_HEADING = re.compile(r"^ {0,3}(?:(?P<num>\d{1,9}[.)])|[-*+])[ \t]+(?=#)")


def item_heading(line: str) -> tuple[int, str] | None:
    """(level, name) of an ATX heading that opens a list item, else None: CommonMark reads a list
    item's first line as any block, so "1. #### Introduction" is a level-4 heading inside the
    item (a contract's clauses numbered by the list). An ordered item's number stays in the name
    ("1. Introduction"): it is how the clause is cited."""
    m = _ITEM_HEADING.match(line)
    if m is None:
        return None
    atx = atx_heading(line[m.end() :])
    if atx is None or not atx[1]:
        return None
    level, name = atx
    return level, f"{m.group('num')} {name}" if m.group("num") else name


def _strip_inline_markdown(s: str) -> str:
    return re.sub(r"[*_`]+", "", s).strip()


def parse_markdown(text: str, *, title: str = "") -> ParsedDocument:
    """`text` with newlines already normalised; the first level-1 heading is the default title."""
    sections, h1 = markdown_sections(text)
    return ParsedDocument(
        text=text,
        title=title or h1,
        sections=sections,
        fmt="md",
        line_ends=tuple(sorted({*tab_line_ends(text), *link_definition_ends(text)})),
        fact_headings=question_headings(sections),
    )


#: A link reference definition: "[CVE-2024-1234]: https://…" (a footnote's "[^1]: …" is text).
_LINK_DEFINITION = re.compile(r"^ {0,3}\[(?!\^)[^\]\n]{1,999}\]:[ \t]*\S")


def link_definition_ends(text: str) -> tuple[int, ...]:
    """The line breaks around each link reference definition outside code: a renderer draws none
    of them (they only give links their targets), so each is a span of its own; run together, a
    changelog's 185 CVE links were spans of up to 1,000 characters of URLs."""
    if "]:" not in text:
        return ()
    code = code_ranges(text)
    ends: list[int] = []
    pos = 0
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        if _LINK_DEFINITION.match(line) and not (code and inside_any(code, start)):
            if start:
                ends.append(start - 1)
            ends.append(start + len(line))
    return tuple(e for e in ends if e < len(text))


def question_headings(sections: tuple[Section, ...]) -> tuple[int, ...]:
    """Section starts whose heading is a question ("## What is Kettlex?", an FAQ's or a medication
    guide's): read as a fact span all the same (`ParsedDocument.fact_headings`), so the question a
    reader asks stays findable over its answer, as in plain text."""
    return tuple(s.char_start for s in sections if s.name.rstrip().endswith("?"))


#: A content tab's title line (pymdown-extensions' and MkDocs Material's tabs: `=== "Python"`,
#: `===! "A"` starting a new set, `===+ "B"` selected); its content is the block indented under it.
_TAB = re.compile(r'^ {0,3}===[!+]?[ \t]+"[^"\n]*"[ \t]*$')
_TAB_INDENT = 4


def tab_line_ends(text: str) -> tuple[int, ...]:
    """The line breaks that end a span in content tabs: the tab's title line is a line of its own
    (it ran on into the tab's first paragraph, or the last one of the tab before), and a fenced
    block indented under a tab, which CommonMark reads as paragraph text (up to 1,000 characters
    of code in one span), is one span per line, as a fence at the margin is (`ingest.spans`)."""
    if "===" not in text:
        return ()
    ends: list[int] = []
    pos = 0
    in_tab = False
    fence: str | None = None
    prev_end = -1  # the end of the previous line when it held text
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        end = start + len(line)
        if _TAB.match(line):
            if prev_end >= 0:
                ends.append(prev_end)
            ends.append(end)
            in_tab, fence, prev_end = True, None, end
            continue
        if in_tab and line.strip():
            indent = len(line) - len(line.lstrip(" "))
            if indent < _TAB_INDENT:
                in_tab, fence = False, None
            else:
                fm = FENCE.match(line[_TAB_INDENT:])
                if fence is None and fm:
                    ends.append(end)
                    fence = fm.group(1)
                elif fence is not None:
                    ends.append(end)
                    if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                        fence = None
        prev_end = end if line.strip() else -1
    return tuple(ends)


def code_ranges(text: str) -> list[tuple[int, int]]:
    """Where `text` is code, in which a character reference is literal: fenced blocks, indented
    blocks (four spaces after a blank line) and inline code spans (a backtick run closed by one of
    the same length before a blank line). Lines may end in CRLF (an upload's source text). A text
    without a backtick, a tilde fence, four spaces or a tab has none: it is not scanned."""
    if not ("`" in text or "~~~" in text or "    " in text or "\t" in text):
        return []
    ranges: list[tuple[int, int]] = []
    fence: str | None = None
    blank_before = True
    indented = False
    blanks: list[int] = []  # starts of blank lines: an inline code span does not cross one
    pos = 0
    for raw in text.split("\n"):
        start, pos = pos, pos + len(raw) + 1
        line = raw.rstrip("\r")
        fm = FENCE.match(line)
        if fence is not None:
            ranges.append((start, pos))
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
            continue
        if fm:
            fence = fm.group(1)
            ranges.append((start, pos))
            continue
        if not line.strip():
            blanks.append(start)
            blank_before = True  # an indented block goes on over blank lines
            continue
        lead = len(line) - len(line.lstrip(" \t"))
        code = line[:lead].expandtabs(4)
        indented = len(code) >= 4 and (blank_before or indented)
        if indented:
            ranges.append((start, pos))
        blank_before = False
    ticks = list(_BACKTICKS.finditer(text))
    runs: dict[int, list[int]] = {}
    for m in ticks:
        runs.setdefault(m.end() - m.start(), []).append(m.start())
    # The block ranges stay apart from the inline spans found here: `inside_any` bisects a sorted
    # list, and a span's closing run (before `closed`) must not open another span.
    inline: list[tuple[int, int]] = []
    closed = 0
    for m in ticks:
        n = m.end() - m.start()
        if m.start() < closed or (ranges and inside_any(ranges, m.start())):
            continue
        same = runs[n]
        k = bisect_right(same, m.start())
        if k < len(same) and bisect_left(blanks, same[k]) == bisect_left(blanks, m.start()):
            closed = same[k] + n
            inline.append((m.start(), closed))
    return sorted(ranges + inline)


def inside_any(ranges: list[tuple[int, int]], offset: int) -> bool:
    i = bisect_right(ranges, (offset, float("inf"))) - 1
    return i >= 0 and ranges[i][0] <= offset < ranges[i][1]


def _readable(char: str) -> bool:
    """A reference that stands for a line break or a control character stays as written: it
    would change the document's lines (and the CRLF offset map), which the reference does not."""
    return bool(char) and not any(c in "\r\n" or unicodedata.category(c) == "Cc" for c in char)


def entity_edits(text: str) -> list[tuple[int, int, str]]:
    """(start, end, character) of every character reference outside code, not escaped (`\\&amp;`)."""
    if "&" not in text:
        return []
    code = code_ranges(text)
    edits: list[tuple[int, int, str]] = []
    for m in _ENTITY.finditer(text):
        a = m.start()
        if (a and text[a - 1] == "\\") or (code and inside_any(code, a)):
            continue
        char = html.unescape(m.group())
        if char != m.group() and _readable(char):
            edits.append((a, m.end(), char))
    return edits


def decode_entities(doc: ParsedDocument) -> ParsedDocument:
    """A Markdown document with its character references outside code read as their characters
    ("&shy;" a soft hyphen, removed with the other format characters next; "&amp;" "&"), section
    offsets following the text; its source text (a CRLF upload's) alike."""
    edits = entity_edits(doc.text)
    if not edits and not any("&" in n for n in (doc.title, *(s.name for s in doc.sections))):
        return doc
    source = doc.source_text
    return edit_document(
        doc,
        edits,
        source_edits=entity_edits(source) if source is not None else None,
        rename=lambda name: html.unescape(name) if "&" in name else name,
    )
