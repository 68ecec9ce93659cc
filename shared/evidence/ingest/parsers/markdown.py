"""Markdown: the source is kept verbatim (a span is an exact substring of the uploaded file);
ATX and setext headings outside fenced code become sections."""

from __future__ import annotations

import re

from evidence.ingest.parsers.layout import Heading, flat_sections
from evidence.records import ParsedDocument, Section

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
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
        atx = atx_heading(line)
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


def _strip_inline_markdown(s: str) -> str:
    return re.sub(r"[*_`]+", "", s).strip()


def parse_markdown(text: str, *, title: str = "") -> ParsedDocument:
    """`text` with newlines already normalised; the first level-1 heading is the default title."""
    sections, h1 = markdown_sections(text)
    return ParsedDocument(text=text, title=title or h1, sections=sections, fmt="md")
