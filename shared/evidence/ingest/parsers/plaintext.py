"""Structure in plain text: numbered clauses, ALL-CAPS headings and underlined headings become
sections, and a short first line is the title.

Plain text has no markup, so headings are read off the layout, conservatively: a heading line is
left out of the fact spans, so a false positive would lose a fact. Three forms are taken:

- **numbered clauses**: "8. Termination." / "2.1 Grant of Patent License." / "Section 4 - Fees" /
  "ARTICLE IV. TERM": a number (dotted levels give the nesting), then a short Title Case title.
  The title may run on into the clause's first sentence on the same line ("8. Termination. Either
  party may …"); the section starts at the line either way, and the line stays a fact span
  (`ingest.spans` skips only lines that are nothing but their heading). A document needs two such
  lines before any counts, so one numbered list item in prose makes no section;
- **ALL-CAPS lines** standing alone (a blank line or the start of the text before them, not
  continued by another capitals line: an all-caps disclaimer paragraph is prose), at most 8 words;
- **underlined headings**: a one-line paragraph over a line of `=`, `-`, `~` or `*` at least half
  its length (level 1 for `=`, else 2).
"""

from __future__ import annotations

import re

from evidence.ingest.parsers.layout import Heading, flat_sections
from evidence.records import ParsedDocument

#: "8. Termination." "2.1 Grant of Patent License. Subject to …" "12 Miscellaneous"
_NUMBERED = re.compile(
    r"^[ \t]*(?:(?P<kw>(?i:section|article|clause|part|chapter))[ \t]+)?"
    r"(?P<num>\d{1,3}(?:\.\d{1,3}){0,4}|[IVXLC]{1,6})(?P<dot>\.?)[ \t]*(?:[-\u2013\u2014:][ \t]*)?"
    r"(?P<title>[A-Z][^.\n:;!?]{0,78})(?P<end>[.:](?=[ \t]|$)|[ \t]*$)"
)
_UNDERLINE = re.compile(r"^[ \t]*([=\-~*])\1{2,}[ \t]*$")
_SMALL_WORDS = frozenset(
    "a an and as at by for from in into of on or over per the to under upon with without its their".split()
)
MAX_TITLE_WORDS = 8
MAX_TITLE_CHARS = 100


def _title_case(title: str) -> bool:
    """Every word that is not a small word starts with a capital (or is a number/symbol)."""
    words = title.split()
    if not words or len(words) > MAX_TITLE_WORDS:
        return False
    return all(w[0].isupper() or not w[0].isalpha() or w.lower() in _SMALL_WORDS for w in words)


def _caps(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 3 and all(c.isupper() for c in letters)


def _numbered_heading(line: str) -> tuple[int, str] | None:
    """(level, heading text) of a numbered clause heading at the start of `line`, else None."""
    m = _NUMBERED.match(line)
    if not m:
        return None
    num, title = m.group("num"), m.group("title").strip()
    roman = not num[0].isdigit()
    if roman and not (m.group("kw") or m.group("dot")):
        return None  # "I think …": a Roman numeral needs its dot or a keyword
    if not title or not (_title_case(title) or _caps(title)):
        return None
    rest = line[m.end() :].strip()
    if rest and not m.group("kw") and not m.group("dot") and "." not in num:
        return None  # "3 Tablets were taken. …": a number opening a sentence, not a heading
    level = (num.count(".") + 1) if not roman else 1
    heading = line[: m.end()].strip().rstrip(".:").strip()
    return level, heading


def _caps_heading(lines: list[str], i: int) -> bool:
    s = lines[i].strip()
    if not (3 <= len(s) <= 80) or len(s.split()) > MAX_TITLE_WORDS or not _caps(s):
        return False
    if s[-1] in ",;" or (s[-1] == "." and len(s.split()) > 4):
        return False
    before = lines[i - 1].strip() if i else ""
    after = lines[i + 1].strip() if i + 1 < len(lines) else ""
    # Inside an all-caps paragraph (a disclaimer), or wrapped from the line before: prose.
    return not before and not (after and _caps(after) and not _UNDERLINE.match(after))


def plaintext_headings(text: str) -> list[Heading]:
    lines = text.split("\n")
    starts: list[int] = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    numbered: list[Heading] = []
    other: list[Heading] = []
    underlined: set[int] = set()
    for i, line in enumerate(lines):
        if not line.strip() or i in underlined:
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        um = _UNDERLINE.match(nxt)
        prev_blank = i == 0 or not lines[i - 1].strip()
        s = line.strip()
        if um and prev_blank and len(s) <= MAX_TITLE_CHARS and len(nxt.strip()) * 2 >= len(s):
            other.append((starts[i] + len(line) - len(line.lstrip()), 1 if um.group(1) == "=" else 2, s))
            underlined.add(i + 1)
            continue
        found = _numbered_heading(line)
        if found is not None and (prev_blank or len(s) <= MAX_TITLE_CHARS):
            numbered.append((starts[i] + len(line) - len(line.lstrip()), found[0] + 1, found[1]))
            continue
        if _caps_heading(lines, i):
            other.append((starts[i] + len(line) - len(line.lstrip()), 1, s))
    heads = other + (numbered if len(numbered) >= 2 else [])
    return sorted(heads)


#: "Q: Do you …?", "Note: …": a labelled line is content, not a title.
_LABELLED = re.compile(r"^\w{1,12}\s*:\s")


def _first_line_title(text: str) -> str:
    """A short first line followed by more text: "Apache License", "MIT License"; not a sentence
    or question ("Q: Do you encrypt data at rest?"), a labelled line, or a numbered clause."""
    for line in text.split("\n"):
        s = line.strip()
        if s:
            words = s.split()
            if (
                len(s) <= MAX_TITLE_CHARS
                and len(words) <= 12
                and s[-1] not in ",;.?!:"
                and not _NUMBERED.match(s)
                and not _LABELLED.match(s)
            ):
                return " ".join(words)
            return ""
    return ""


def parse_plaintext(text: str, *, title: str = "") -> ParsedDocument:
    """`text` with newlines already normalised; offsets are the text's own (nothing is edited)."""
    sections = flat_sections(plaintext_headings(text), len(text))
    return ParsedDocument(text=text, title=title or _first_line_title(text), sections=sections, fmt="txt")
