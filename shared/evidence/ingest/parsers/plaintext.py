"""Structure in plain text: numbered clauses, ALL-CAPS headings and underlined headings become
sections, and a short first line is the title (under two-column front matter, as a memo's
"Network Working Group   G. Klyne", the first centred line is).

Plain text has no markup, so headings are read off the layout, conservatively: a heading line is
left out of the fact spans, so a false positive would lose a fact. Four forms are taken:

- **numbered clauses**: "8. Termination." / "2.1 Grant of Patent License." / "Section 4 - Fees" /
  "ARTICLE IV. TERM": a number (dotted levels give the nesting), then a short Title Case title.
  The title may run on into the clause's first sentence on the same line ("8. Termination. Either
  party may …"); the section starts at the line either way, and the line stays a fact span
  (`ingest.spans` skips only lines that are nothing but their heading). A document needs two such
  lines before any counts, so one numbered list item in prose makes no section;
- **ALL-CAPS lines** standing alone (a blank line or the start of the text before them, not
  continued by another capitals line: an all-caps disclaimer paragraph is prose), at most 8 words;
- **underlined headings**: a one-line paragraph over a line of `=`, `-`, `~` or `*` at least half
  its length (level 1 for `=`, else 2);
- **flush-left headings** in a document whose body is indented (an RFC, a man page printed to
  text): a short line at the left margin, standing alone, above indented text ("Abstract",
  "Security Considerations").

A numbered line whose title has lower-case words ("5. Date and Time format") or that is a bare
number ("12 Miscellaneous") counts only where it continues the numbering of the heading before it
(5 after 4.4, 4.2 after 4.1, A.2 after A.1: an appendix letter is a number past every
section's; VI after V: a Roman part number, of I, V and X, continues the Roman parts, not the
Arabic items inside them), so an address ("77 Massachusetts Avenue") or a table row is not taken.
Table-of-contents entries (a title, dot leaders, a page number; or, without leaders, a
numbered line whose number and title head a later section again and that has no body of its own:
`_without_contents_entries`), a list's next item right under its sibling (`_follows_sibling_item`)
and column layouts (a run of three spaces inside the title: a table's row) are never headings.
A no-break space reads as a space there ("1.\u00a0 Introduction", a DocBook chapter printed to text),
and a closing parenthesis as the number's dot ("1) Guarding use of …"). A contents list's entries
(`_contents_lines`: numbered lines without bodies, repeated further down) are taken out before any
heading is read, so they neither head sections nor set the numbering the body continues. An FAQ's
numbered question is a heading standing alone (wrapped onto up to two more lines), or right over
its answer however long (`_answered_question`); a question's line stays a fact span as well
(`question_fact_headings`). A keyword's title may stand in brackets ("Article 1 (Definitions)"), a
file name's dot ends no title ("9) Usage of autoload in the site-start.d files."), and a number
glued to its text ("2.If the Recipient …") is a list item, never a heading. An ALL-CAPS title of
up to three words right over an all-caps paragraph ("DISCLAIMER" over "THE FONT SOFTWARE IS
PROVIDED …") is a heading; a full-width first line of such a paragraph is not. A text in Debian's
control format (a licence quoted in a machine-readable copyright file) writes its empty lines as
" ."; those dots are blanked in place before parsing (`blank_field_dots`). A document none of
these forms gives a heading takes its Title Case lines standing alone (`_standalone_titles`:
"Definitions", "General Provisions" in a licence whose clauses are "(1)  You may …").

**Reference lists.** A definition list printed to text (a command reference, a changelog's
versions: each term on its own line or at the line start, its definition indented under it) of
many entries and much text heads a subsection at each term, with the HTML `<dl>` rule's bounds
(`reference_lists`); the term line stays in its fact span. A short list whose definitions hold a
list that meets the bounds (a policy's 7 menu sections, one holding 40 subsections) is read as a
tree: each level that meets them, or holds one that does, heads subsections under its entry's. A
numbered heading standing as a term would, right before, between or after a run of terms (an
FAQ's "4.2  Gcc Work-around for AIX 4.1x" among questions no heading rule took), is an entry of
the list: it keeps its heading and counts towards the bounds, the other terms taking its level.

**Paginated text** (pages split by form feeds, as RFCs and printed manuals are): the running
header and footer lines, found by their repetition across pages (`layout.running_lines`), and the
form feeds are blanked in place (the same number of spaces), so every offset still indexes the
uploaded text; the blank lines around a page break are blanked too, down to the one line break,
when the text before the break does not end a sentence, so a sentence across a page break is one
span. `page_starts` records where each page begins. A line recurring at the pages' tops only
with its digits masked, different on every page and not stepping with the pages ("Version 2.36",
"Version 2.35" …), is each page's own title, not a header; where the author's page breaks (no
running line at them) open two or more pages on a title standing alone, each heads a section (a
GNU NEWS file's versions).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from evidence.ingest.offsets import SourceOffsets, line_starts
from evidence.ingest.parsers.html import (
    MAX_ENTRY_NAME_CHARS,
    REFERENCE_LIST_CHARS,
    REFERENCE_LIST_ENTRIES,
    fit_names,
)
from evidence.ingest.parsers.layout import (
    Heading,
    dot_leader,
    flat_sections,
    normalise_newlines,
    running_lines,
)
from evidence.records import ParsedDocument, Section

#: "8. Termination." "2.1 Grant of Patent License. Subject to …" "12 Miscellaneous"
_NUMBERED = re.compile(
    r"^[ \t]*(?:(?P<kw>(?i:section|article|clause|part|chapter|appendix|annex))[ \t]+)?"
    # a letter is a number with its sub-numbers ("A.1"), after a keyword ("Appendix A") or with
    # its dot ("A. Collected ABNF"), never the first letter of a word ("GNU")
    r"(?P<num>\d{1,3}(?:\.\d{1,3}){0,4}|[IVXLC]{1,6}|[A-Z](?:\.\d{1,3}){1,4}"
    # a closing parenthesis may follow a number as a dot does ("1) Guarding use of …": a policy's)
    r"|(?(kw)[A-Z](?![A-Za-z])|[A-Z](?=\.[ \t])))(?P<dot>\.?|(?<=\d)\))"
    # a dash, or two hyphens typed for one ("Section 1 -- Definitions.": a licence in ASCII)
    r"[ \t]*(?:(?:--|[-\u2013\u2014:])[ \t]*)?"
    # a title starts with a capital, or is a path naming what its section is about ("4)
    # /usr/share/<flavor>/site-lisp/": a policy's); it stops at its first dot, but for an
    # initialism's ("10. U.S. GOVERNMENT END USERS.")
    # or, after a keyword, a title in brackets ("Article 1 (Definitions)": a contract's)
    r"(?P<title>(?:[A-Z]|/(?=[\w<])|(?(kw)\((?=[A-Z][^()\n]*\)[ \t]*$)|(?!)))"
    # or for a file name's ("9) Usage of autoload in the site-start.d files.": a dot between
    # lower-case letters, a short extension after it, is no sentence's end)
    # or for a version number's ("7.1. Extension Requests added in version 1.2 of the extension")
    r"(?:[^.\n:;!?]|(?<=(?<![A-Za-z])[A-Z])\.(?=[A-Z]\.)|(?<=\.[A-Z])\.(?=[ \t][A-Z])|(?<=\d)\.(?=\d)"
    r"|(?<=[a-z])\.(?=[a-z]{1,4}\b)){0,78})"
    # a question's mark ends a title too ("2.1. What is the latest version?": an FAQ's entries)
    r"(?P<end>[.:?](?=[ \t]|$)|[ \t]*$)"
)
_UNDERLINE = re.compile(r"^[ \t]*([=\-~*])\1{2,}[ \t]*$")
#: A document's attached part: "ADDENDUM: How to use this License …", "EXHIBIT A -Mozilla Public
#: License.", "Schedule 1 - Fees", "APPENDIX B", "Annex II. Definitions". The keyword in capitals
#: or capitalised, an optional letter, number or Roman numeral, then nothing or a separator and a
#: short title (`_part_heading`).
_PART = re.compile(
    r"^[ \t]*(?P<kw>(?:ADDENDUM|EXHIBIT|SCHEDULE|APPENDIX|ANNEX|ATTACHMENT|ENCLOSURE|SUPPLEMENT|RIDER)S?"
    r"|(?:Addendum|Exhibit|Schedule|Appendix|Annex|Attachment|Enclosure|Supplement|Rider)s?)"
    r"(?:[ \t]+(?P<num>\d{1,3}(?:\.\d{1,3})?|[IVXLC]{1,6}|[A-Z](?:-?\d{1,2})?)(?![\w'])"
    r")?(?P<sep>[ \t]*(?:[.:][ \t]|[.:]?$|[ \t]+[-\u2013\u2014][ \t]*|[ \t]*[-\u2013\u2014][ \t]+))?"
)
#: A list item's marker: "3.", "3)", "(a)", "A.", "iv.", "-", "*", "•".
_ITEM_MARK = re.compile(
    r"^[ \t]*(?:\(?(?:\d{1,3}(?:\.\d{1,3})*|[A-Za-z]|[ivxlc]{1,6})[.)][ \t]|[-*+\u2022][ \t])"
)
_SMALL_WORDS = frozenset(
    "a an and as at by for from in into of on or over per the to under upon with without its their".split()
)
MAX_TITLE_WORDS = 8
#: A sentence-case title over its own first sub-number ("4. The Developers by way of General
#: Resolution or election" over "4.1. Powers") may run longer: no list item has a sub-number.
MAX_PARENT_TITLE_WORDS = 12
MAX_TITLE_CHARS = 100


def _title_case(title: str) -> bool:
    """Every word that is not a small word starts with a capital (or is a number/symbol)."""
    words = title.split()
    if not words or len(words) > MAX_TITLE_WORDS:
        return False
    return all(w[0].isupper() or not w[0].isalpha() or w.lower() in _SMALL_WORDS for w in words)


#: A remark in parentheses closing a title ("Add-on package support (examples below should make
#: this much clearer)"): an aside, not the title's words.
_CLOSING_ASIDE = re.compile(r"[ \t]+\([^()]*\)[ \t]*$")


def _title_words(title: str) -> list[str]:
    """The title's words but for a closing aside in parentheses (see `_CLOSING_ASIDE`)."""
    return (_CLOSING_ASIDE.sub("", title) or title).split()


def _caps(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 3 and all(c.isupper() for c in letters)


#: A table of contents' entry: dot leaders and a page number ("Semantics . . . . . 10", "Scope ....4",
#: front matter's roman "Preface ... iv"); the span extractor's contents line is the same shape.
_LEADER = dot_leader(3, r"[\divxlc]{1,5}", re.IGNORECASE)
#: Columns: a run of three spaces inside a line's text (a table row, a two-column front matter).
_COLUMNS = re.compile(r"\S[ \t]{3,}\S")


@dataclass(frozen=True, slots=True)
class _Numbered:
    level: int
    heading: str
    #: The number's parts when it is dotted digits ("4.1.2" → (4, 1, 2)), else None.
    parts: tuple[int, ...] | None
    #: Whether the line counts only where it continues the numbering (see the module notes).
    needs_sequence: bool
    #: Whether the number is a Roman part number ("VI."): it continues the Roman numbering, not
    #: the Arabic clauses numbered inside the parts.
    roman: bool = False


def _numbered_heading(line: str) -> tuple[int, str] | None:
    """(level, heading text) of a numbered clause heading at the start of `line`, else None."""
    found = _numbered(line, loose=False)
    return None if found is None else (found.level, found.heading)


def _numbered(
    line: str, *, loose: bool, dot_ok: bool = False, max_words: int = MAX_TITLE_WORDS
) -> _Numbered | None:
    """`loose`: a title in sentence case (of at most `max_words` words) may count (where it
    continues the numbering); `dot_ok`: so may one that ends on a dot ("5. Application of this
    License."), which the caller allows only over a body indented deeper than the line (a
    one-sentence numbered paragraph is not)."""
    m = _NUMBERED.match(line)
    if not m or _LEADER.search(line):
        return None
    num, title = m.group("num"), m.group("title").strip()
    roman = bool(re.fullmatch(r"[IVXLC]{1,6}", num))
    lettered = num[0].isalpha() and not roman
    if roman and not (m.group("kw") or m.group("dot")):
        return None  # "I think …": a Roman numeral needs its dot or a keyword
    if lettered and "." not in num and not m.group("kw"):
        return None  # "A Guide to …": a lone letter is a number only after "Appendix"
    if (roman or lettered) and m.group("dot") and not line[m.end("dot") : m.end("dot") + 1].isspace():
        return None  # "C.F.R. 12.212": an initialism, not Roman numeral C and a title
    if not title or _COLUMNS.search(title):
        return None
    if m.group("dot") and m.start("title") == m.end("dot"):
        return None  # "2.If the Recipient …": an item glued to its number, not a heading's title
    if (
        "." in num
        and line[:1] in " \t"
        and not (m.group("kw") or m.group("dot"))
        and line[m.end("num") : m.end("num") + 1] == ":"
    ):
        # "\t1.5: Added Monitors": a version's label in an indented list of versions, no clause
        # number (at the margin, "1.9.9: Ludovic Rousseau" heads a changelog's release: kept).
        return None
    # A path's words start with no letter, so it would pass as Title Case: it counts only where it
    # continues the numbering, as a sentence-case title does (a list of paths is no outline).
    path = title.startswith("/")
    strict = not path and (_title_case(title) or _caps(title))
    ends = m.group("end").strip()
    sentence_case_ok = (
        loose and len(_title_words(title)) <= max_words and (ends in ("", "?") or (dot_ok and ends == "."))
    )
    if not strict and not sentence_case_ok:
        return None
    rest = line[m.end() :].strip()
    bare = not m.group("kw") and not m.group("dot") and "." not in num
    if rest and bare:
        return None  # "3 Tablets were taken. …": a number opening a sentence, not a heading
    level = num.count(".") + 1
    heading = line[: m.end()].strip().rstrip(".:").strip()
    parts = _outline_parts(num) if not roman else _roman_parts(num)
    # A title holding a version number ("1. ICU License - ICU 1.8.1 to ICU 57.1": a bundled
    # licence's name in a list of them) counts only where it continues the numbering.
    versioned = _VERSION_DOT.search(title) is not None
    return _Numbered(level, heading, parts, needs_sequence=not strict or bare or versioned, roman=roman)


#: A dot between digits inside a title: a version number's ("version 1.2", "ICU 57.1").
_VERSION_DOT = re.compile(r"\d\.\d")


#: A Roman numeral of I, V and X only, up to 39 ("XV"): a manual's or a contract's part numbers.
#: L, C (and D, M) are left out: "C. Liability" is as likely a lettered item as part 100.
_SMALL_ROMAN = re.compile(r"X{0,3}(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}


def _roman_parts(num: str) -> tuple[int, ...] | None:
    """ "VI" → (6,): a Roman part number continues the numbering as an Arabic one does ("VI.
    Modifying libpng" after "V. Simplified API", a sentence-case title); None for any other."""
    if not num or not _SMALL_ROMAN.fullmatch(num):
        return None
    values = [_ROMAN_VALUES[c] for c in num]
    total = sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))
    return (total,)


#: An appendix letter's place among the outline numbers: past any section number, in letter order.
_LETTER_BASE = 1000


def _outline_parts(num: str) -> tuple[int, ...]:
    """ "4.1.2" → (4, 1, 2); an appendix's letter counts as a number past every section's ("A.2" →
    (1001, 2)), so "A.2. Withdrawing ballot options" continues "A.1" as "4.2" continues "4.1"."""
    head, *rest = num.split(".")
    first = int(head) if head.isdigit() else _LETTER_BASE + ord(head) - ord("A") + 1
    return (first, *(int(x) for x in rest))


#: How far an outline number may step past the one expected (missed headings tolerated).
MAX_NUMBER_STEP = 3


def _continues(prev: tuple[int, ...] | None, cur: tuple[int, ...] | None) -> bool:
    """Whether outline number `cur` may follow `prev`: one level deeper from 1 ("4" → "4.1"), or
    the next number at a level, a missed heading or two tolerated either way ("4.1" → "4.2", "4.4"
    → "5"; "1" → "1.2" when "1.1. man-db", a title in lower case, was no heading)."""
    if cur is None:
        return False
    if prev is None:
        return cur[-1] <= 1
    if cur[:-1] == prev and cur[-1] <= MAX_NUMBER_STEP:
        return True
    k = len(cur) - 1
    return k < len(prev) and cur[:k] == prev[:k] and 0 < cur[k] - prev[k] <= MAX_NUMBER_STEP


def _next_number(prev: tuple[int, ...] | None, cur: tuple[int, ...] | None) -> bool:
    """Whether outline number `cur` is the one right after `prev` at the same level ("8" → "9",
    "4.1" → "4.2"): no number skipped, no level changed."""
    return (
        prev is not None
        and cur is not None
        and len(cur) == len(prev)
        and cur[:-1] == prev[:-1]
        and cur[-1] == prev[-1] + 1
    )


def _first_text(lines: list[str], j: int, stop: int) -> int:
    """The index of the first line from `j` on, before `stop`, that is not blank (`stop`: none)."""
    while j < stop and not lines[j].strip():
        j += 1
    return j


def _next_text(lines: list[str], j: int) -> str:
    """The first line from `j` on that is not blank ("" at the end): no copy of the rest."""
    j = _first_text(lines, j, len(lines))
    return lines[j] if j < len(lines) else ""


def _parent_heading(line: str, body: str, dot_ok: bool) -> _Numbered | None:
    """A numbered line standing alone whose sentence-case title is longer than a heading's usual
    (up to `MAX_PARENT_TITLE_WORDS` words) but whose next text line is its own first sub-number:
    "4. The Developers by way of General Resolution or election" over "4.1. Powers"."""
    found = _numbered(line, loose=True, dot_ok=dot_ok, max_words=MAX_PARENT_TITLE_WORDS)
    if found is None or found.parts is None:
        return None
    sub = _numbered(body, loose=True)
    return found if sub is not None and sub.parts == (*found.parts, 1) else None


def _long_sub_heading(line: str, dot_ok: bool, last: tuple[int, ...] | None) -> _Numbered | None:
    """A sub-numbered line standing alone whose sentence-case title runs as long as a parent's
    (up to `MAX_PARENT_TITLE_WORDS` words) where its number continues the numbering: "7.1.
    Extension Requests added in version 1.2 of the extension" under "7. Extension Requests" (no
    list item has a sub-number, see `MAX_PARENT_TITLE_WORDS`)."""
    found = _numbered(line, loose=True, dot_ok=dot_ok, max_words=MAX_PARENT_TITLE_WORDS)
    if found is None or found.parts is None or len(found.parts) < 2 or not _continues(last, found.parts):
        return None
    return found


#: A sub-numbered title in lower case standing alone: "1.1.  man-db", "6.1.  index database
#: location" (a manual naming its programs and files by their own spelling).
_LOWER_SUB_HEADING = re.compile(
    r"^(?P<num>\d{1,3}(?:\.\d{1,3}){1,4})\.?[ \t]+(?P<title>[a-z][\w\-]*(?:[ \t]+[\w\-]+)*)[ \t]*$"
)


def _lower_case_sub_heading(line: str) -> _Numbered | None:
    """A sub-numbered line standing alone whose title is in lower case (`_LOWER_SUB_HEADING`, up
    to `MAX_TITLE_WORDS` words, no closing mark), taken only where its number continues the
    numbering (`needs_sequence`): a parent's first sub-heading, so its siblings continue from it."""
    m = _LOWER_SUB_HEADING.match(line)
    if not m or len(m.group("title").split()) > MAX_TITLE_WORDS:
        return None
    parts = _outline_parts(m.group("num"))
    heading = line.strip()
    return _Numbered(len(parts), heading, parts, needs_sequence=True)


#: How many more lines an FAQ's question may wrap onto.
MAX_QUESTION_WRAP = 2


def _wrapped_question(lines: list[str], i: int) -> bool:
    """Line `i` is the first line of a question wrapped onto one or two more lines, the last
    ending it, none deeper than it, followed by a blank line ("3.1. Which distribution is better"
    over "for me?"): an FAQ's entry heading standing alone, as a one-line title does."""
    s = lines[i].rstrip()
    if s.endswith((".", ":", "?", ",", ";")):
        return False
    for k in range(1, MAX_QUESTION_WRAP + 1):
        nxt = lines[i + k] if i + k < len(lines) else ""
        after = lines[i + k + 1] if i + k + 1 < len(lines) else ""
        if not nxt.strip() or _indent(nxt) > _indent(lines[i]):
            return False
        if nxt.rstrip().endswith("?") and not after.strip():
            return True
    return False


#: A numbered question of any length on one line: "1.1  Can I use the fonts for a book …?".
_QUESTION = re.compile(r"^[ \t]*(?P<num>\d{1,3}(?:\.\d{1,3}){0,4})\.?[ \t]+[A-Z][^\n]*\?[ \t]*$")


def _answered_question(line: str, nxt: str) -> _Numbered | None:
    """A numbered question on a line of its own with its answer right under it, no blank line
    between (an FAQ set as "1.1  Can I use …?" over "Yes. You are …"): a heading however long,
    where it continues the numbering. Its name is the line cut to `MAX_TITLE_CHARS` at a word
    end; a question cut so runs on (`ingest.spans`), so its line stays a fact span too."""
    m = _QUESTION.match(line)
    if m is None or not nxt.strip() or _ENTRY.match(nxt) or _indent(nxt) > _indent(line):
        return None
    s = line.strip()
    num = m.group("num")
    if len(s) > MAX_TITLE_CHARS:
        # A statement before the question ("1.3  I sell kettles. Does this mean …?") is its
        # setting: the name starts at the question, and the line stays a fact span
        # (`question_fact_headings`).
        lead = _STATEMENT_FIRST.match(s)
        if lead is not None:
            s = f"{num} {s[lead.end() :]}"
    name = s if len(s) <= MAX_TITLE_CHARS else s[: s.rfind(" ", 0, MAX_TITLE_CHARS)].rstrip(" ,;:")
    return _Numbered(num.count(".") + 1, name, _outline_parts(num), needs_sequence=True)


#: A numbered line opening on statements: the match ends where the sentence holding the line's
#: first question mark starts.
_STATEMENT_FIRST = re.compile(
    r"^\d{1,3}(?:\.\d{1,3}){0,4}\.?[ \t]+[^?\n]*[A-Za-z)]{2}[.!][ \t]+(?=[A-Z][^?.!\n]*\?)"
)


def question_fact_headings(text: str, sections: Sequence[Section]) -> tuple[int, ...]:
    """Section starts whose heading line is a question, read as a fact span all the same
    (`ParsedDocument.fact_headings`): an FAQ's question line is what a reader asks ("1.1  Can I
    use the fonts in a book?"), so it stays findable as a span of its own (the answer under it is
    its section's text). A question named from its middle (`_answered_question`) is one too."""
    out: list[int] = []
    for sec in sections:
        eol = text.find("\n", sec.char_start)
        line = text[sec.char_start : eol if eol >= 0 else len(text)].strip()
        if line.endswith("?") and sec.name.endswith("?"):
            out.append(sec.char_start)
            continue
        lead = _STATEMENT_FIRST.match(line) if len(line) > MAX_TITLE_CHARS else None
        num, _, question = sec.name.partition(" ")
        if lead is not None and question and line.startswith(num) and line[lead.end() :].startswith(question):
            out.append(sec.char_start)
    return tuple(out)


def _list_item(lines: list[str], i: int, found: _Numbered) -> bool:
    """A loosely taken numbered line followed by its next sibling, not by a body: an item of a
    double-spaced list ("3. Day of the month" over "4. Month of the year")."""
    body = _next_text(lines, i + 2)
    nxt = _numbered(body, loose=True)
    return (
        nxt is not None
        and nxt.parts is not None
        and found.parts is not None
        and len(nxt.parts) == len(found.parts)
    )


_ITEM_NUMBER = re.compile(r"^[ \t]*\(?(\d{1,3})[.)][ \t]")


def _follows_sibling_item(lines: list[str], i: int, found: _Numbered, headed: list[int]) -> bool:
    """Line `i` continues a numbered list with no blank line before it: the nearest line above at
    its indent (over the deeper-indented lines an item wraps onto) is the item numbered one less,
    and that item is no heading (`headed`: the lines taken as numbered headings so far): "6. The
    Project Secretary." under "5. Delegates appointed by the Project Leader …;" is an item, "2.
    Source Code" under "1. Free Redistribution" and its indented body a clause."""
    if found.parts is None or len(found.parts) != 1:
        return False
    indent = _indent(lines[i])
    j = i - 1
    while j >= 0 and lines[j].strip() and _indent(lines[j]) > indent:
        j -= 1
    if j < 0 or not lines[j].strip() or _indent(lines[j]) != indent:
        return False
    m = _ITEM_NUMBER.match(lines[j])
    return m is not None and int(m.group(1)) == found.parts[0] - 1 and not (headed and headed[-1] == j)


#: Most words of an ALL-CAPS title right over an all-caps paragraph ("DISCLAIMER").
MAX_CAPS_TITLE_OVER_CAPS = 3


def _caps_heading(lines: list[str], i: int) -> bool:
    s = lines[i].strip()
    if not (3 <= len(s) <= 80) or len(s.split()) > MAX_TITLE_WORDS or not _caps(s) or _COLUMNS.search(s):
        return False
    if s[-1] in ",;" or (s[-1] == "." and len(s.split()) > 4):
        return False
    before = lines[i - 1].strip() if i else ""
    after = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if before:
        return False  # wrapped from the line before: prose
    if not after or not _caps(after) or _UNDERLINE.match(after):
        return True
    # Over an all-caps paragraph: its first line (a disclaimer's) unless it is a short title
    # over a full line ("DISCLAIMER" over "THE FONT SOFTWARE IS PROVIDED …", a licence's last
    # part): a paragraph's first line does not stop at a third of the next one's length.
    return len(s.split()) <= MAX_CAPS_TITLE_OVER_CAPS and 3 * len(s) <= len(after) and s[-1].isalpha()


def _part_heading(lines: list[str], i: int) -> str | None:
    """An addendum, exhibit, schedule, appendix or annex heading standing alone (after a blank
    line, not wrapped into the next line unless a blank follows the title): the line's text."""
    s = lines[i].strip()
    m = _PART.match(s)
    if not m or len(s) > MAX_TITLE_CHARS or (i and lines[i - 1].strip()) or _LEADER.search(s):
        return None
    if m.group("sep") is None and m.end() < len(s):
        return None  # "Exhibit A shows …", "Schedules are …": a sentence
    title = s[m.end() :].strip()
    if not title:
        return s.rstrip(".:").strip() if (m.group("num") or m.group("kw").isupper()) else None
    if s[-1] in ",;" or _COLUMNS.search(title) or len(title.split()) > MAX_TITLE_WORDS + 4:
        return None
    words = title.rstrip(".").strip()
    colon = m.group("sep").strip() == ":" and m.group("kw").isupper()
    if not (_title_case(words) or _caps(words) or colon):
        return None  # "Schedule 1. The customer pays …": a clause's sentence
    nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if nxt and not title.endswith((".", ":")) and nxt[:1].islower():
        return None  # the title wraps on: prose
    return s.rstrip(".:").strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _body_indent(lines: list[str]) -> int:
    """The indent of most text lines when most are indented (headings are then the lines at the
    left margin, and a capitals line indented deeper than the body is a figure's), else 0."""
    body = [_indent(line) for line in lines if line.strip()]
    indented = [n for n in body if n >= 2]
    if len(body) < 20 or len(indented) < 0.6 * len(body):
        return 0
    return Counter(indented).most_common(1)[0][0]


#: What may open a heading before its first letter: quotes and a bracket ('"Social Contract" with …').
_OPENING = "\"'\u201c\u2018("


def _flush_left_heading(lines: list[str], i: int) -> bool:
    """A short line at the left margin, alone, over indented text: "Abstract", "Security Considerations"."""
    line = lines[i]
    s = line.strip()
    first = s.lstrip(_OPENING)[:1]
    if _indent(line) or not first.isupper() or len(s) > 60 or len(s.split()) > MAX_TITLE_WORDS:
        return False
    if s[-1] in ".,;:!?" or _COLUMNS.search(s) or _LEADER.search(s):
        return False
    if i and lines[i - 1].strip():
        return False
    after = _next_text(lines, i + 1)
    return _indent(after) >= 2


def _toc_wrap(lines: list[str], i: int) -> bool:
    """The first line of a contents entry that wraps: its leaders and page number end the next line."""
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    return bool(nxt.strip()) and _LEADER.search(nxt) is not None and not _LEADER.search(lines[i])


#: Spaces other than space and tab that a text dump sets between a clause number and its title
#: ("1.\u00a0 Introduction": a DocBook chapter printed to text): read as spaces for the headings,
#: one character each, so every offset stays the text's own.
_OTHER_SPACES = str.maketrans(dict.fromkeys("\u00a0\u2007\u202f", " "))


def plaintext_headings(text: str) -> list[Heading]:
    lines = text.translate(_OTHER_SPACES).split("\n")
    starts = line_starts(lines)
    numbered: list[Heading] = []
    numbered_lines: list[int] = []
    other: list[Heading] = []
    underlined: set[int] = set()
    body_indent = _body_indent(lines)
    width = max((len(x.rstrip()) for x in lines), default=0)
    last: tuple[int, ...] | None = None
    # Roman parts ("VI. Modifying libpng") are numbered apart from the Arabic clauses inside them.
    last_roman: tuple[int, ...] | None = None
    contents = _contents_lines(lines)
    for i, line in enumerate(lines):
        if not line.strip() or i in underlined:
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        um = _UNDERLINE.match(nxt)
        prev_blank = i == 0 or not lines[i - 1].strip()
        s = line.strip()
        at = starts[i] + _indent(line)
        if um and prev_blank and len(s) <= MAX_TITLE_CHARS and len(nxt.strip()) * 2 >= len(s):
            other.append((at, 1 if um.group(1) == "=" else 2, s))
            underlined.add(i + 1)
            continue
        question = _wrapped_question(lines, i)
        loose = prev_blank and (not nxt.strip() or question)
        # An FAQ's question runs longer than a title (up to a parent title's words on its line).
        question = question or (not nxt.strip() and s.endswith("?"))
        # A dot-ended sentence-case title ("5. Application of this License.") over a body indented
        # deeper than it (the MPL's clauses), never over text at its own margin.
        # A list item's next sibling or sub-item under it ("2. The package's files are removed." over
        # "   3. postrm remove") is no body.
        body = _next_text(lines, i + 1)
        over_body = loose and _indent(body) > _indent(line) and not _ITEM_MARK.match(body)
        dot_ok = over_body and line.rstrip().endswith(".")
        words = MAX_PARENT_TITLE_WORDS if question else MAX_TITLE_WORDS
        # A contents list's entry neither heads a section nor sets the numbering the body's
        # headings must continue ("8.1.2. APT" at the list's end would leave chapters 1-8 out).
        found = None if i in contents else _numbered(line, loose=loose, dot_ok=dot_ok, max_words=words)
        if found is None and dot_ok and i not in contents:
            # A title closed by its dot over a body indented deeper than it may run as long as a
            # parent title ("9) Usage of autoload instead of load in the site-start.d files." over
            # its paragraph) where it is the very next number after the heading before it (8 →
            # 9): a long step of a list numbered under a heading ("4. All the scripts are
            # removed." after "1. Call") skips numbers from it.
            long = _numbered(line, loose=True, dot_ok=True, max_words=MAX_PARENT_TITLE_WORDS)
            found = long if long is not None and _next_number(last, long.parts) else None
        if found is None and loose and i not in contents:
            found = _long_sub_heading(line, dot_ok, last)
        if found is None and loose and i not in contents:
            found = _lower_case_sub_heading(line)
        if found is None and loose and i not in contents:
            found = _parent_heading(line, body, dot_ok)
        answered = False
        if found is None and prev_blank and i not in contents:
            found = _answered_question(line, nxt)
            answered = found is not None  # its answer is its body: no list's item
        if (
            found is not None
            and (prev_blank or len(s) <= MAX_TITLE_CHARS)
            and not _toc_wrap(lines, i)
            and not (not prev_blank and _follows_sibling_item(lines, i, found, numbered_lines))
            and (
                not found.needs_sequence
                or (
                    _continues(last_roman if found.roman else last, found.parts)
                    and (answered or not _list_item(lines, i, found))
                )
            )
        ):
            numbered.append((at, found.level + 1, found.heading))
            numbered_lines.append(i)
            if found.roman:
                last_roman = found.parts or last_roman
            else:
                last = found.parts or last
            continue
        part = _part_heading(lines, i)
        if part is not None:
            other.append((at, 1, part))
        elif _caps_heading(lines, i) and not (
            body_indent and _indent(line) > body_indent and not _centred(line, width)
        ):
            other.append((at, 1, s))
        elif body_indent and _flush_left_heading(lines, i):
            other.append((at, 2, s))
    numbered = _without_contents_entries(lines, numbered, numbered_lines)
    numbered += _prose_clauses(lines, starts, numbered_lines)
    heads = other + (numbered if len(numbered) >= 2 else [])
    if not heads:
        heads = _standalone_titles(lines, starts)
    else:
        heads = heads + _subheadings(lines, starts, sorted(heads))
    # A permalink's pilcrow that a web page printed to text keeps after each heading ("1.
    # Copyright¶") is no part of the heading's name.
    return sorted((at, level, name.removesuffix("\u00b6").rstrip()) for at, level, name in heads)


#: Most words of a title standing alone (`_standalone_titles`).
MAX_STANDALONE_TITLE_WORDS = 10
#: Fewest such titles before a document's are taken.
MIN_STANDALONE_TITLES = 2


def _standalone_titles(lines: list[str], starts: list[int]) -> list[Heading]:
    """In a document no other form gives a heading (a licence's "Definitions", "Permissions for
    Redistribution of the Standard Version" over numbered "(2)  You may …" clauses): Title Case
    lines standing alone at the left margin (a blank line before and after, text after that, up to
    `MAX_STANDALONE_TITLE_WORDS` words, no closing mark), past the first line (the title), at
    least `MIN_STANDALONE_TITLES` of them."""
    out: list[Heading] = []
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    for i in range(first + 1, len(lines) - 2):
        line = lines[i]
        s = line.strip()
        if not s or _indent(line) or lines[i - 1].strip() or lines[i + 1].strip():
            continue
        words = s.split()
        if len(words) > MAX_STANDALONE_TITLE_WORDS or s[-1] in ".,;:!?" or not s[0].isupper():
            continue
        if not all(w[0].isupper() or w.lower() in _SMALL_WORDS for w in words) or _COLUMNS.search(s):
            continue
        if not _next_text(lines, i + 1).strip():
            continue
        out.append((starts[i], 2, s))
    return out if len(out) >= MIN_STANDALONE_TITLES else []


#: What no title holds: a clause's punctuation, code's and markup's characters.
_NO_TITLE_CHARS = re.compile(r"[,:;=<>{}\[\]#|*_`$\\]")


def _subheading(lines: list[str], i: int) -> bool:
    """A short line standing alone between blank lines at its paragraphs' margin, opening on a
    capital, no closing mark, nothing of code in it, over a paragraph at its own margin (not over
    indented code, which a lead-in such as "You must supply the function" stands over), after
    text that does not lead in to it with a colon: "Setup", "Input transformations"."""
    line = lines[i]
    s = line.strip()
    if not s or not s[0].isupper() or len(s) > MAX_TITLE_CHARS or len(s.split()) > MAX_TITLE_WORDS:
        return False
    if (
        s[-1] in ".!?"
        or _NO_TITLE_CHARS.search(s)
        or _COLUMNS.search(s)
        or _caps(s)
        or _ITEM_MARK.match(line)
    ):
        return False
    if "\t" in s or sum(c.isalpha() for c in s) < 3:
        return False  # "M\tsrc/main.c": a tab between columns (a commit's file list); "OR"
    if (i and lines[i - 1].strip()) or i + 1 >= len(lines) or lines[i + 1].strip():
        return False
    k = i - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k >= 0 and lines[k].rstrip().endswith(":"):
        return False
    body = _next_text(lines, i + 1)
    # The paragraph under it runs a full line at the title's margin: prose, not a list or code.
    return (
        bool(body)
        and _indent(body) == _indent(line)
        and len(body.strip()) >= 2 * len(s)
        and body.strip()[0].isalpha()
    )


def _subheadings(lines: list[str], starts: list[int], heads: list[Heading]) -> list[Heading]:
    """Sentence-case subheadings of a long section (a manual's part holding 44 % of it, its
    "Setup", "Input transformations" … short lines standing alone: `_subheading`), each one level
    under the section's heading, where that section holds at least `REFERENCE_LIST_CHARS`
    characters (much text, the list rule's bound) and at least `MIN_STANDALONE_TITLES` of them."""
    total = starts[-1] + len(lines[-1]) if lines else 0
    taken = {at for at, _, _ in heads}
    out: list[Heading] = []
    bounds = [*(at for at, _, _ in heads), total]
    i = 0
    for n, (at, level, _) in enumerate(heads):
        end = bounds[n + 1]
        if end - at < REFERENCE_LIST_CHARS:
            continue
        while i < len(lines) and starts[i] <= at:
            i += 1
        # At the left margin, as its section's heading: a commit message's subject, indented
        # under its "commit" line over its indented body, is no subheading of a changelog (and
        # would cut the changelog's list of commits short: `reference_lists`).
        if at != starts[i - 1]:
            continue
        found: list[Heading] = []
        while i < len(lines) and starts[i] < end:
            here = starts[i] + _indent(lines[i])
            if here not in taken and not _indent(lines[i]) and _subheading(lines, i):
                found.append((here, min(level + 1, 6), lines[i].strip()))
            i += 1
        if len(found) >= MIN_STANDALONE_TITLES:
            out += found
    return out


#: A clause in running prose: "  1. You may copy and distribute verbatim copies of the …".
_PROSE_CLAUSE = re.compile(r"^(?P<indent>[ \t]{0,6})(?P<num>\d{1,2})\.[ \t]+(?P<text>[A-Z\"'\u201c(].*)$")
#: Fewest clauses in a run before a document's numbered paragraphs count as its clauses.
MIN_PROSE_CLAUSES = 3


def _prose_clauses(lines: list[str], starts: list[int], headed: list[int]) -> list[Heading]:
    """Numbered paragraphs that are a document's clauses though no title heads them (a licence's
    "  0. This License applies to any program …", wrapped onto the next line): runs of paragraphs,
    each after a blank line and wrapping (or already a heading), at one indent, numbered one after
    another from 0 or 1, at least `MIN_PROSE_CLAUSES` long (a document of several agreements has a
    run for each), when every single-number heading the document has lies inside such a run (so a
    numbered list inside a numbered chapter stays a list). Each clause not already a heading opens
    a section named by its number and first words."""
    runs: list[list[int]] = []
    numbers: dict[int, int] = {}
    matched: dict[int, re.Match[str]] = {}  # kept to name the clause below, not matched again
    for i, line in enumerate(lines):
        m = _PROSE_CLAUSE.match(line)
        if m is None or (i and lines[i - 1].strip()):
            continue
        matched[i] = m
        num = numbers[i] = int(m.group("num"))
        run = runs[-1] if runs else None
        if run is not None and numbers[run[-1]] + 1 == num and _indent(lines[run[-1]]) == _indent(line):
            run.append(i)
        elif num <= 1:
            runs.append([i])
    taken = set(headed)
    clauses = [
        run
        for run in runs
        if len(run) >= MIN_PROSE_CLAUSES
        # a one-line item among them: a list, not clauses
        and all(j in taken or (j + 1 < len(lines) and lines[j + 1].strip()) for j in run)
    ]
    inside = {j for run in clauses for j in run}
    if not clauses or any(_SINGLE_NUMBER.match(lines[j]) and j not in inside for j in headed):
        return []
    out: list[Heading] = []
    for j in sorted(inside - taken):
        m = matched[j]
        words = re.split(r"(?<=[.;:])\s", m.group("text"))[0].split()[:MAX_TITLE_WORDS]
        name = f"{m.group('num')}. " + " ".join(words).rstrip(".;:,")
        out.append((starts[j] + _indent(lines[j]), 2, name))
    return out


#: Any numbered line, whatever its title's case or first character ("5.7. (How) Does it …"), with
#: its keyword: what a contents list's entries look like.
_ENTRY = re.compile(
    r"^[ \t]*(?:(?i:section|article|clause|part|chapter|appendix|annex)[ \t]+)?"
    r"(?P<num>\d{1,3}(?:\.\d{1,3}){0,4}|[A-Z](?:\.\d{1,3}){1,4}"
    # a Roman part number with its dot ("  IV. Writing": a manual's contents)
    r"|[IVX]{1,6}(?=\.)"
    # a lettered part after its keyword ("APPENDIX A - FONTLOG EXAMPLE")
    r"|(?<=[A-Za-z][ \t])(?<![ \t][ \t])[A-Z](?![A-Za-z]))[.)]?[ \t]+(?P<title>\S.*)$"
)
#: Fewest entries in a run before numbered lines without bodies count as a contents list.
MIN_CONTENTS_ENTRIES = 3


def _contents_lines(lines: list[str]) -> set[int]:
    """The lines of a contents list without dot leaders: runs of at least `MIN_CONTENTS_ENTRIES`
    numbered lines each with no body of its own (nothing before the next numbered line but the
    lines its entry wraps onto, or blank lines), each of whose number and title (or the start of
    it: an entry wraps where the heading does not) number a line again further down. An
    FAQ's wrapped questions in its contents, a chapter keyword dropped ("2. Getting started" for
    "Chapter 2. Getting started"), are entries as a one-line title is."""
    at = [i for i, line in enumerate(lines) if _ENTRY.match(line)]
    no_body: list[bool] = []
    for k, i in enumerate(at):
        end = at[k + 1] if k + 1 < len(at) else len(lines)
        j = i + 1
        while j < end and lines[j].strip():
            j += 1  # the entry's wrapped lines
        no_body.append(k + 1 < len(at) and all(not lines[x].strip() for x in range(j, end)))
    keys: list[tuple[str, str]] = []
    for i in at:
        m = _ENTRY.match(lines[i])
        assert m is not None
        keys.append((m.group("num"), " ".join(m.group("title").split()).casefold()))
    out: set[int] = set()
    k = 0
    while k < len(at):
        if not no_body[k]:
            k += 1
            continue
        run_end = k
        while run_end < len(at) and no_body[run_end]:
            run_end += 1
        # the run's last entry has no body but for the next numbered line: an entry too
        run = range(k, min(run_end + 1, len(at)))
        entries = [
            r
            for r in run
            if any(
                n == keys[r][0] and (t.startswith(keys[r][1]) or keys[r][1].startswith(t))
                for n, t in keys[r + 1 :]
            )
        ]
        if len(run) >= MIN_CONTENTS_ENTRIES and entries:
            out.update(at[r] for r in entries)
        k = run_end + 1
    return out


#: A heading numbered with one number ("4. Fees", "12 Notices"), not a sub-number or a letter.
_SINGLE_NUMBER = re.compile(r"^[ \t]*\d{1,3}\.?[ \t]")


def _entry_key(heading: str) -> tuple[str, str]:
    """A numbered heading's number and title, its keyword dropped ("Chapter 2. Perl Packaging" and
    "2. Perl Packaging" are one entry), spaces collapsed, case folded."""
    m = _NUMBERED.match(heading)
    if m is None:
        return heading, ""
    return m.group("num"), " ".join(heading[m.start("title") :].split()).casefold()


def _without_contents_entries(
    lines: list[str], numbered: list[Heading], at_lines: list[int]
) -> list[Heading]:
    """`numbered` without a contents list's entries where the list has no dot leaders ("2.1.
    Versions" over "2.2. Base Package", blank lines between): a numbered heading with nothing
    before the next one but blank lines, numbered lines (entries not taken as headings) and the
    line its title wraps onto, whose number and
    title (or the start of it, when the entry wraps) head a later section again."""
    keys = [_entry_key(h[2]) for h in numbered]
    out: list[Heading] = []
    for k, head in enumerate(numbered):
        nxt = at_lines[k + 1] if k + 1 < len(at_lines) else None
        if nxt is not None:
            # other entries the headings did not take ("4. Configuration frontends") are no body
            at = at_lines[k]
            between = [j for j in range(at + 1, nxt) if lines[j].strip() and not _NUMBERED.match(lines[j])]
            wrap = between == [at + 1] and _indent(lines[at + 1]) >= _indent(lines[at])
            if not between or wrap:
                num, title = keys[k]
                if any(n == num and t.startswith(title) for n, t in keys[k + 1 :]):
                    continue
        out.append(head)
    return out


#: "Q: Do you …?", "Note: …": a labelled line is content, not a title.
_LABELLED = re.compile(r"^\w{1,12}\s*:\s")


#: Where a centred title is looked for, and how far off centre its line may be.
_TITLE_LINES = 60
_CENTRE_SLACK = 4


def _centred(line: str, width: int) -> bool:
    """A short line about as far from the right edge of the text (`width`) as from the left."""
    s = line.strip()
    if not s or _COLUMNS.search(s) or len(s) > MAX_TITLE_CHARS:
        return False
    lead = _indent(line)
    return lead >= 8 and abs(lead - (width - len(line.rstrip()))) <= _CENTRE_SLACK


def _centred_title(lines: list[str]) -> str:
    """The first line centred on the text's width (with the next when it is centred too): the
    title of a memo under its two-column front matter; "" when there is none."""
    head = lines[:_TITLE_LINES]
    width = max((len(x.rstrip()) for x in head), default=0)

    def centred(line: str) -> bool:
        return _centred(line, width)

    for i, line in enumerate(head):
        if centred(line) and (i == 0 or not head[i - 1].strip()):
            parts = [line.strip()]
            if i + 1 < len(head) and centred(head[i + 1]):
                parts.append(head[i + 1].strip())
            return " ".join(" ".join(parts).split())
    return ""


def _first_line_title(text: str) -> str:
    """A short first line followed by more text: "Apache License", "MIT License"; not a sentence
    or question ("Q: Do you encrypt data at rest?"), a labelled line, or a numbered clause."""
    lines = text.split("\n")
    for line in lines:
        s = line.strip()
        if s and _COLUMNS.search(s):
            # Front matter in two columns (a memo's "Network Working Group   G. Klyne"): the
            # title is the first centred line below it.
            return _centred_title(lines)
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


#: A line ending so does not run on into the next page.
_ENDS_SENTENCE = ".!?:"


_NUMBERS = re.compile(r"\d+")


def _numbers(line: str) -> tuple[int, ...]:
    return tuple(int(d) for d in _NUMBERS.findall(line))


def _steps_with_pages(found: list[tuple[int, str]]) -> bool:
    """Whether the numbers on a running line follow the pages (a footer's "[Page 5]" on page 5, 6
    on the next): between most pairs of pages it is on, one of its numbers moves by the pages'
    distance."""
    pairs = list(pairwise(found))
    steps = 0
    for (p, a), (q, b) in pairs:
        x, y = _numbers(a), _numbers(b)
        steps += len(x) == len(y) and any(v - u == q - p for u, v in zip(x, y, strict=True))
    return 2 * steps >= len(pairs)


def _own_page_titles(split: list[list[str]], drops: list[set[int]]) -> list[set[int]]:
    """`drops` (`layout.running_lines`) without the lines that recur only with their digits masked
    and differ on every page, their numbers not following the pages: each page's own title, not
    a header ("Version 2.36", "Version 2.35" … at the top of a changelog's pages split by form
    feeds)."""
    groups: dict[str, list[tuple[int, int]]] = {}
    for page, drop in enumerate(drops):
        for i in drop:
            key = _NUMBERS.sub("#", " ".join(split[page][i].split()))
            groups.setdefault(key, []).append((page, i))
    keep = [set(d) for d in drops]
    for found in groups.values():
        texts = [(page, " ".join(split[page][i].split())) for page, i in found]
        if len(found) >= 3 and len({t for _, t in texts}) == len(texts) and not _steps_with_pages(texts):
            for page, i in found:
                keep[page].discard(i)
    return keep


#: Fewest pages opening on a title standing alone before a text's page breaks are read as its
#: sections' (`_page_title`).
MIN_PAGE_TITLES = 2


def _page_title(lines: list[str]) -> int | None:
    """The index of a page's first line when it is a title standing alone (a blank line or the
    page's end after it, at most `MAX_TITLE_CHARS`, no sentence's end, no list item): "Version
    2.36", "version 1.34 - Sergey Poznyakoff, 2021-02-13" opening a changelog's page."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    s = lines[first].strip()
    after = lines[first + 1] if first + 1 < len(lines) else ""
    if after.strip() or len(s) > MAX_TITLE_CHARS or s[-1] in ".,;!" or _ITEM_MARK.match(s):
        return None
    return first


def _page_title_heads(
    page_at: list[int], split: list[list[str]], drops: list[set[int]]
) -> tuple[Heading, ...]:
    """The titles opening the pages after the author's page breaks (no running line at the break:
    a printer's break has its header and footer), when at least `MIN_PAGE_TITLES` pages have one."""
    titles: list[Heading] = []
    for k in range(1, len(split)):
        if drops[k - 1] or drops[k]:
            continue
        t = _page_title(split[k])
        if t is not None:
            lines = split[k]
            at = page_at[k] + sum(len(x) + 1 for x in lines[:t]) + _indent(lines[t])
            titles.append((at, 1, lines[t].strip().rstrip(":").strip()))
    return tuple(titles) if len(titles) >= MIN_PAGE_TITLES else ()


def blank_page_furniture(text: str) -> tuple[str, tuple[int, ...], tuple[Heading, ...]]:
    """`text` with its pages' running headers and footers and its form feeds blanked in place (see
    the module notes), where each page starts, and the headings of the pages the author's page
    breaks start (no running line at the break) with a title standing alone (`_page_title`), where
    at least `MIN_PAGE_TITLES` do (a GNU NEWS file's versions); `text` itself, no pages and no
    headings when it has no form feed. The result has `text`'s length, so offsets into it index
    `text`."""
    if "\f" not in text:
        return text, (), ()
    page_at = [0] + [i + 1 for i, c in enumerate(text) if c == "\f"]
    ends = [*(f - 1 for f in page_at[1:]), len(text)]
    split = [text[a:b].split("\n") for a, b in zip(page_at, ends, strict=True)]
    chars = list(text)
    drops = _own_page_titles(split, running_lines(split))
    titles = _page_title_heads(page_at, split, drops)
    for a, lines, drop in zip(page_at, split, drops, strict=True):
        pos = a
        for i, line in enumerate(lines):
            if i in drop:
                chars[pos : pos + len(line)] = " " * len(line)
            pos += len(line) + 1
    for f in page_at[1:]:
        chars[f - 1] = " "
    for k, f in enumerate(page_at[1:]):
        if not (drops[k] or drops[k + 1]):
            continue  # a page break alone (no header or footer at it) is the author's: kept
        # The whitespace between the last text before the break and the first line after it.
        a = f - 1
        while a > 0 and chars[a - 1].isspace():
            a -= 1
        c = f
        while c < len(chars) and chars[c].isspace():
            c += 1
        b = a
        for j in range(c - 1, a - 1, -1):
            if chars[j] == "\n":
                b = j + 1
                break
        if a == 0 or c >= len(chars) or b <= a:
            continue
        line_start = a
        while line_start > 0 and chars[line_start - 1] != "\n":
            line_start -= 1
        prev = "".join(chars[line_start:a])
        # A flush-left line after indented text starts a block (a heading), not a continuation.
        join = prev[-1] not in _ENDS_SENTENCE and not (c == b and _indent(prev) > 0)
        keep = "\n" if join else "\n\n"
        if b - a >= len(keep):
            chars[a:b] = " " * (b - a - len(keep)) + keep
    return "".join(chars), tuple(page_at), titles


#: A line that is a space and a dot: an empty line inside a field's value in Debian's control
#: format (deb822), as a machine-readable copyright file sets the licence texts it quotes.
_FIELD_BLANK = re.compile(r"(?m)^[ \t]+\.[ \t]*$")
#: Fewest such lines before a text is read as deb822: one is a stray dot.
MIN_FIELD_BLANKS = 3


def blank_field_dots(text: str) -> str:
    """`text` with the dot of each deb822 empty line blanked in place (the same length), so the
    paragraphs of a quoted licence stand apart and its headings ("PREAMBLE", "1. Definitions")
    stand alone as they do in the licence's own file; a text with fewer than `MIN_FIELD_BLANKS`
    such lines is returned as it is."""
    if len(_FIELD_BLANK.findall(text)) < MIN_FIELD_BLANKS:
        return text
    return _FIELD_BLANK.sub(lambda m: " " * len(m.group()), text)


def blank_source(original: str, blanked: str) -> str:
    """The upload `original` (CRLF line ends) with the characters `blank_page_furniture` blanked in
    its normalised text (`blanked`) blanked too, its line breaks kept: `ingest.offsets` maps
    offsets by the CRLF pairs, which must stay where they are."""
    normalised = normalise_newlines(original)
    if normalised == blanked:
        return original
    at = SourceOffsets(original)
    chars = list(original)
    for i, (was, now) in enumerate(zip(normalised, blanked, strict=True)):
        if was not in (now, "\n"):
            chars[at(i)] = " "
    return "".join(chars)


@dataclass(frozen=True, slots=True)
class _ReferenceList:
    heads: list[Heading]  # one per term, and the interrupted section resuming after the list
    facts: list[int]  # heading starts whose line is text all the same (`fact_headings`)
    ends: list[int]  # line breaks right before a term: its entry is no part of the text above


def _term_lines(lines: list[str], i: int, heading_lines: set[int], own: int = -1) -> int:
    """How many lines from `i` are a definition list entry's terms (0: none). A term stands on its
    own line or at the line start, is no heading, list item or sentence ending on its dot, and has
    its definition under it indented deeper (blank lines may come between); it follows a blank
    line or the previous entry's definition, so a paragraph's last line over an indented block is
    no term. Several terms of one entry ("quit", "stop", "thanks" over one definition) stand on
    lines of their own right under one another, each a title's length (`MAX_TITLE_WORDS`), so a
    wrapped paragraph over an indented block is no entry. The heading at line `own` is read as no
    heading (`_heading_entry`)."""
    ind = _indent(lines[i])
    if i > 0 and lines[i - 1].strip() and _indent(lines[i - 1]) <= ind:
        return 0
    j = i
    while j < len(lines) and _term(lines[j], heading_lines, j, own) and _indent(lines[j]) == ind:
        j += 1
        if j < len(lines) and lines[j].strip() and _indent(lines[j]) > ind:
            break
    if j - i > 1 and any(len(line.split()) > MAX_TITLE_WORDS for line in lines[i:j]):
        return 0
    terms = j - i  # the blank lines before the definition are no terms
    while j < len(lines) and not lines[j].strip():
        j += 1
    ok = terms > 0 and j < len(lines) and j not in heading_lines and _indent(lines[j]) > ind
    return terms if ok else 0


#: A line of box-drawing characters (U+2500-U+257F) and blanks.
_BOX_RULE = re.compile(r"[\u2500-\u257f \t]+")
_SENTENCE_DOT = re.compile(r"\w\.[\"')\u201d]*$")


def _term(line: str, heading_lines: set[int], i: int, own: int = -1) -> bool:
    s = line.strip()
    return (
        bool(s)
        # A line of box-drawing characters only ("┌───" over a request, "└───" under it: a
        # protocol spec's frames) names nothing: it is a rule, not a term ("#...", "--", a
        # command reference's punctuation commands, are terms).
        and not _BOX_RULE.fullmatch(s)
        and (i == own or i not in heading_lines)
        and len(s) <= MAX_TITLE_CHARS
        and not (_ITEM_MARK.match(line) or _SENTENCE_DOT.search(s))
    )


def _entry_end(lines: list[str], i: int, heading_lines: set[int]) -> int:
    """The first line after the definition of the entry whose terms end at line `i`: the next line
    of text at or left of the terms' indentation, or a heading."""
    ind = _indent(lines[i])
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or (_indent(lines[j]) > ind and j not in heading_lines)):
        j += 1
    while j > i + 1 and not lines[j - 1].strip():
        j -= 1  # the blank lines after a definition belong to what follows
    return j


def _entry_name(terms: list[str]) -> str:
    """An entry's name: its terms, each up to a column gap (a definition may start on the term's
    line, "-v    print more"), comma-separated, as many as fit `MAX_ENTRY_NAME_CHARS`; a single
    longer term is cut at a space."""
    name = fit_names([_COLUMN_GAP.split(t.strip(), maxsplit=1)[0] for t in terms])
    if len(name) > MAX_ENTRY_NAME_CHARS:
        name = name[: max(name.rfind(" ", 0, MAX_ENTRY_NAME_CHARS), 1)].rstrip(" ,;:") + " …"
    return name


_COLUMN_GAP = re.compile(r"[ \t]{3,}")


@dataclass(frozen=True, slots=True)
class _Entry:
    at: int  # the line of its first term
    terms: int  # how many term lines
    end: int  # the first line after its definition
    nested: list[_TermList]  # the lists in its definition, outermost first
    heading: bool = False  # a numbered heading standing as the list's entry (`_heading_entry`)


@dataclass(frozen=True, slots=True)
class _TermList:
    entries: list[_Entry]


def _heading_entry(lines: list[str], k: int, heading_lines: set[int], numbered: list[int]) -> int:
    """How many term lines the numbered heading at line `k` has as a list's entry (0: none): it
    stands as a term would, on its own line over its definition indented deeper (`_term_lines`,
    reading it as no heading)."""
    at = bisect_left(numbered, k)
    return _term_lines(lines, k, heading_lines, own=k) if at < len(numbered) and numbered[at] == k else 0


#: A dotted number opening a line, before a blank ("4.2\tGcc …", "A.1. Scope", "3) …").
_OPENING_NUMBER = re.compile(r"[ \t]*(?P<num>(?:\d{1,3}|[A-Z])(?:\.\d{1,3}){0,4})[.)]?[ \t]")


def _depth(line: str) -> int | None:
    """How many parts the number opening `line` has (`3.8.1` → 3; None: no number opens it)."""
    m = _OPENING_NUMBER.match(line)
    return m.group("num").count(".") + 1 if m else None


def _entry_levels(
    lines: list[str], entries: list[_Entry], heading_levels: dict[int, int], level: int
) -> list[int]:
    """The level of each entry of a list at `level`: a heading entry's own (`heading_levels`, by
    line); with heading entries among them, the other terms are those headings' kin: each takes
    the level of the heading entry before it (the first one's, before it), one deeper for each
    number part more than it (`3.8.1` after the heading `3.8`), as numbered headings nest; a term
    no number opens (`0.35-2 Maintainer <…>` among a changelog's `0.36 Maintainer <…>`) is its
    sibling."""
    heads = [e.at for e in entries if e.heading]
    if not heads:
        return [level] * len(entries)
    out: list[int] = []
    near = heads[0]
    for e in entries:
        near = e.at if e.heading else near
        mine, theirs = _depth(lines[e.at]), _depth(lines[near]) or 1
        out.append(
            heading_levels[near] if mine is None else min(max(heading_levels[near] + mine - theirs, 1), 6)
        )
    return out


def _term_lists(
    lines: list[str], lo: int, hi: int, heading_lines: set[int], numbered: list[int]
) -> list[_TermList]:
    """The outermost definition lists between lines `lo` and `hi` (runs of entries at one
    indentation: see `_term_lines`), each entry with the lists nested in its definition. A
    numbered heading (a line of `numbered`, in order) standing as a term right before, between or right
    after a run's entries is an entry of it (an FAQ's `4.2  Gcc Work-around for AIX 4.1x`,
    taken as a heading, among questions that are not): one rule reading a line first says
    nothing of the list's extent. A run starts at a term that is no heading, so headings alone
    (an RFC's sections over their indented bodies) make no list."""
    out: list[_TermList] = []
    i = floor = lo  # a heading entry before a run is after the run before it
    while i < hi:
        n = _term_lines(lines, i, heading_lines) if lines[i].strip() else 0
        if not n:
            i += 1
            continue
        ind = _indent(lines[i])
        found: list[tuple[int, int, int, bool]] = []
        for k in reversed(numbered[bisect_left(numbered, floor) : bisect_left(numbered, i)]):
            m = _heading_entry(lines, k, heading_lines, numbered) if _indent(lines[k]) == ind else 0
            if not m:
                break
            k_end = min(_entry_end(lines, k + m - 1, heading_lines), hi)
            if _first_text(lines, k_end, hi) != (found[0][0] if found else i):
                break
            found.insert(0, (k, m, k_end, True))
        end = min(_entry_end(lines, i + n - 1, heading_lines), hi)
        found.append((i, n, end, False))
        while end < hi:
            k = _first_text(lines, end, hi)
            heading = False
            n = _term_lines(lines, k, heading_lines) if k < hi and _indent(lines[k]) == ind else 0
            if not n and k < hi and _indent(lines[k]) == ind:
                n, heading = _heading_entry(lines, k, heading_lines, numbered), True
            if not n:
                break
            end = min(_entry_end(lines, k + n - 1, heading_lines), hi)
            found.append((k, n, end, heading))
        entries = [
            _Entry(t, n, e, _term_lists(lines, t + n, e, heading_lines, numbered), h) for t, n, e, h in found
        ]
        out.append(_TermList(entries))
        i = floor = end
    return out


def reference_lists(text: str, heads: Sequence[Heading]) -> _ReferenceList:
    """A definition list in plain text (a command reference's commands, a policy's tree of
    sections: each term on its own line or at the line start, its definition indented under it)
    of many entries and much text would leave one section holding most of the document, as an
    HTML `<dl>` did: an outermost list (its terms in no other entry's definition) of at least
    `REFERENCE_LIST_ENTRIES` entries holding at least `REFERENCE_LIST_CHARS` characters (the HTML
    rule's bounds, session 51) heads a subsection at each term, one level under the heading before
    it; the term line stays in its fact span, and the section the list interrupted resumes after
    it, up to the next heading. In a tree of lists (a policy's menu sections: 7 top entries, one
    defined by a list of 40 subsections) a list heads subsections when it meets the bounds or a
    list nested in its definitions does, each nested list one level under its entry's; a nested
    list that does not stays its entry's text (a command's option list). A one-entry list heads
    nothing (one term over an indented block is a paragraph's shape as much as a list's): the
    lists in its definition are read as if it were not there."""
    lines = text.split("\n")
    starts = line_starts(lines)
    head_at = {at for at, _, _ in heads}
    heading_lines = {
        i for i, line in enumerate(lines) if line.strip() and starts[i] + _indent(line) in head_at
    }
    by_at = {h[0]: h for h in heads}
    numbered = sorted(i for i in heading_lines if _OPENING_NUMBER.match(lines[i]))
    heading_levels = {i: by_at[starts[i] + _indent(lines[i])][1] for i in numbered}
    out = _ReferenceList([], [], [])

    def meets_bounds(tl: _TermList) -> bool:
        """`tl` has the bounds' entries and characters itself, or a list nested in it has."""
        first_line, last_line = tl.entries[0].at, tl.entries[-1].end - 1
        first = starts[first_line] + _indent(lines[first_line])
        last = starts[last_line] + len(lines[last_line].rstrip())
        if len(tl.entries) >= REFERENCE_LIST_ENTRIES and last - first >= REFERENCE_LIST_CHARS:
            return True
        return any(meets_bounds(n) for e in tl.entries for n in e.nested)

    def head(tl: _TermList, level: int, parent: Heading | None, hi: int) -> None:
        """Subsections at the terms of `tl`, a list that meets the bounds (when it has two entries
        or more) and, within each definition, at those of its nested lists that meet them too;
        `parent`'s section resumes after the list, before `hi`."""
        headed = len(tl.entries) >= 2
        for e, mine in zip(tl.entries, _entry_levels(lines, tl.entries, heading_levels, level), strict=True):
            at = starts[e.at] + _indent(lines[e.at])
            me: Heading | None = by_at[at] if e.heading else parent
            if headed and not e.heading:
                me = (at, mine, _entry_name(lines[e.at : e.at + e.terms]))
                out.heads.append(me)
                out.facts.append(at)
                if e.at > 0 and lines[e.at - 1].strip():
                    out.ends.append(starts[e.at] - 1)
            # a heading entry's lists nest under it as under any heading (`min(…, 6)` below)
            inner = min(mine + 1, 6) if e.heading else mine + 1 if headed else mine
            for n in e.nested:
                if meets_bounds(n):
                    head(n, inner, me, e.end)
        k = _first_text(lines, tl.entries[-1].end, hi)
        if parent is not None and k < hi and k < len(lines) and k not in heading_lines:
            at = starts[k] + _indent(lines[k])
            out.heads.append((at, parent[1], parent[2]))
            out.facts.append(at)  # no heading line: the section's text resumes

    for tl in _term_lists(lines, 0, len(lines), heading_lines, numbered):
        if meets_bounds(tl):
            first = starts[tl.entries[0].at] + _indent(lines[tl.entries[0].at])
            before = [h for h in heads if h[0] < first]
            parent = before[-1] if before else None
            head(tl, min((parent[1] if parent else 1) + 1, 6), parent, len(lines))
    return out


def parse_plaintext(text: str, *, title: str = "") -> ParsedDocument:
    """`text` with newlines already normalised; offsets are the text's own: page furniture is
    blanked in place, nothing is moved."""
    text, pages, page_heads = blank_page_furniture(text)
    heads = plaintext_headings(text)
    taken = {at for at, _, _ in heads}
    heads = sorted([*heads, *(h for h in page_heads if h[0] not in taken)])
    refs = reference_lists(text, heads)
    sections = flat_sections(sorted([*heads, *refs.heads]), len(text))
    return ParsedDocument(
        text=text,
        title=title or _first_line_title(text),
        sections=sections,
        page_starts=pages,
        line_ends=tuple(refs.ends),
        fmt="txt",
        fact_headings=tuple(sorted({*question_fact_headings(text, sections), *refs.facts})),
    )
