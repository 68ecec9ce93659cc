"""Verbatim fact spans (seed 002): sentences, bullets, table rows, captions.

Every span is a pair of offsets into the document text; its text is always
`doc.text[char_start:char_end]`. Whitespace is trimmed by moving offsets, never
by editing text, so an answer built from spans is an exact substring of the source.

Lines are classified first: a bullet, table row or caption line is one span of
that type; runs of other lines form prose paragraphs, which are sentence-split
by a rule-based splitter (no model download).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from evidence.ingest.offsets import line_starts
from evidence.ingest.parsers.layout import CAPTION, dot_leader
from evidence.records import ParsedDocument, Section, SpanType

DEFAULT_MAX_SPAN_CHARS = 1000
# Bullets and captions longer than this are prose in disguise and get sentence-split.
_PROSE_ITEM_CHARS = 400


@dataclass(frozen=True, slots=True)
class FactSpan:
    text: str
    char_start: int
    char_end: int
    span_type: SpanType
    section: str
    page: int | None
    sequence: int


# --- line classes ----------------------------------------------------------------------------

_BULLET = re.compile(
    r"^[ \t]*+(?:"
    # -, *, +, bullet glyphs, en dash (Word's dash bullet); not the em dash, which opens asides
    r"[-*+\u2022\u25e6\u25aa\u25ab\u2023\u2043\u25cf\u25cb\u25a0\u25a1\u2013]"
    # 1. 2) a) (b) A) iv. II. -- not "V. cholerae" or "X. laevis" at the start of a wrapped line
    r"|\(?\d{1,3}[.)]|\(?[a-z][.)]|\(?[A-Z]\)|\(?(?:[ivx]{1,5}|[IVX]{2,5})[.)]"
    r")[ \t]++\S"
    # an item glued to its number ("1.If a Program is …", "(2)The notice …": a licence set so)
    r"|^[ \t]*+(?:\d{1,3}\.|\(\d{1,3}\))(?=[A-Z][a-z]|[A-Z]{2}|[\"\u201c])"
    # A bug tracker's id opening a line of a NEWS file's list of fixed bugs: "[29305] nscd: …"
    # or "306664  vex amd64->IR: …" (the id, then a column gap). Such a list has no bullet marks
    # and no full stops, so its lines ran into one paragraph cut blindly at the span limit. Three
    # digits at least in brackets: a footnote or reference mark ("[2] Compare …") is a small number.
    r"|^[ \t]*+(?:\[\d{3,7}\][ \t]++|\d{4,7}[ \t]{2,}+)\S"
)
_CAPTION = CAPTION  # `layout.CAPTION`: the PDF parser keeps these lines from headings
# A line of box-drawing characters only ("┌───", "└────┘") is a frame's border in a protocol's or a
# diagram's plain text, as a line of dashes is a rule: it ends the span running through it, or one
# frame ran on into the text and the frames after it.
_RULE = re.compile(r"^[ \t]*+(?:([-*_=])[ \t]*+(?:\1[ \t]*+){2,}+|[\u2500-\u257f]{3,}+[ \t]*+)$")
_FENCE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})")
#: An ATX heading's opening marks ("## "): no part of the heading's text.
_ATX_MARK = re.compile(r"^ {0,3}#{1,6}[ \t]+")
# Possessive quantifiers (`*+`, `++`) never give back what they matched: every piece here is
# followed by a character it cannot match, so nothing is lost, and a line of 60,000 spaces is one
# pass instead of a backtracking search over every split of the spaces between two `[ \t]*`.
_TABLE_SEP = re.compile(r"^[ \t]*+(?:\|[ \t]*+)?:?-{2,}+:?[ \t]*+(?:\|[ \t]*+:?-{2,}+:?[ \t]*+)++\|?[ \t]*+$")
_ALNUM = re.compile(r"\w")
# A table of contents' entry: dot leaders, then a page number ("4.1.2.  Semantics . . . . 10").
# One span per line; sentence-split, its leaders' dots would cut it into "Semantics ." fragments.
# Its bounds (four dots, arabic pages) are the ones the extractor was measured with; the plain-text
# parser's leader has the same shape with its own bounds, and one set for both is unmeasured. A
# front-matter page in lower-case roman numerals ("Quick Start Guide ........ iii") ends an entry
# too (session 54): a book's part-level contents lines otherwise ran into one span.
_CONTENTS_LINE = dot_leader(4, r"(?:\d{1,4}|[ivxlc]{1,8})")

_BLANK, _SKIP, _PROSE = 0, 1, 2


def _is_table_row(line: str) -> bool:
    s = line.strip()
    return s.startswith("|") and s.count("|") >= 2


# --- sentence splitting ----------------------------------------------------------------------

# Abbreviations after which a period never ends a sentence (lower-cased, without the final period).
_ABBREV = frozenset(
    """e.g i.e eg ie cf viz vs al etc.al dr mr mrs ms mx prof st mt sr jr gen col lt sgt capt rev hon
    fig figs eq eqs ref refs vol vols ed eds pp ch chap sec secs art approx ca esp incl resp dept univ
    corp assn nat'l intl no nos jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
# ...but these may end a sentence, unless a number follows ("No. 5", "Jan. 12").
_ABBREV_BEFORE_NUMBER = frozenset(
    {
        "no",
        "nos",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "vol",
        "vols",
    }
)
# Closing quotes and brackets after the punctuation belong to the sentence they close.
# Words that typically open a sentence: after an ambiguous "U.S." they decide for a boundary.
_OPENERS = frozenset(
    """the this these those that it its we our in a an however there they he she his her as at for on
    to thus moreover furthermore finally here although while when after before but of from with by
    since because all both each one two patients results conclusions methods background""".split()
)
#: The ideographic full stop, the full-width exclamation and question marks, the half-width full stop.
_CJK_ENDS = "\u3002\uff01\uff1f\uff61"
# A match starts only at the first mark of a run (the lookbehind): a run of 32,000 dots not followed
# by a space is then scanned once, not once from each of its dots.
_TERMINAL = re.compile(
    "(?<![.!?\u2026])[.!?\u2026]++[\"'\u201d\u2019)\\]]*+(?=\\s)"
    # CJK text puts no space after its full stop, exclamation and question marks; a closing
    # bracket or quote after them belongs to the sentence they end.
    f"|(?<![{_CJK_ENDS}])[{_CJK_ENDS}]++[\u300d\u300f\uff09\u3011\u201d\u2019)]*+"
)
_OPEN = "\"'\u201c\u2018([{"
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")


def _next_word(text: str, pos: int, end: int) -> str:
    i = pos
    while i < end and text[i].isspace():
        i += 1
    j = i
    while j < end and not text[j].isspace():
        j += 1
    return text[i:j]


def _prev_word(text: str, pos: int, start: int) -> tuple[str, int]:
    """The non-space run ending at `pos` (the terminal punctuation's start) and where it begins."""
    i = pos
    while i > start and not text[i - 1].isspace():
        i -= 1
    return text[i:pos], i


def _starts_sentence(word: str) -> bool:
    w = word.lstrip(_OPEN)
    if not w:
        return bool(word)
    c = w[0]
    if c.isupper() or c.isdigit():
        return True
    if c.islower():
        # gene and assay names open sentences in scientific text: "mRNA levels", "p53 was", "iPSCs"
        return any(ch.isupper() or ch.isdigit() for ch in w[1:8])
    return not c.isalnum()


def _is_boundary(text: str, m: re.Match[str], seg_start: int, end: int, opened: int) -> bool:
    """Whether the terminal punctuation `m` ends a sentence; `opened`: unclosed "(" since `seg_start`."""
    punct = m.group()
    nxt = _next_word(text, m.end(), end)
    if not nxt:
        return True
    if not _starts_sentence(nxt):
        return False
    if "." not in punct or any(c in punct for c in "!?…"):
        return True
    if punct.startswith("..."):
        return True
    prev, prev_start = _prev_word(text, m.start(), seg_start)
    core = prev.lstrip(_OPEN)
    low = core.lower()
    if not core:
        return True
    nxt_core = nxt.lstrip(_OPEN)
    next_is_number = nxt_core[:1].isdigit()
    if low in _ABBREV_BEFORE_NUMBER:
        return not next_is_number
    if low in _ABBREV:
        return False
    if low == "al" or low.endswith("et al"):
        return False
    if _DOTTED.match(core):
        # "e.g." and "i.e." never end a sentence; "U.S." does only before a typical sentence opener.
        if low in ("e.g", "i.e", "a.k.a", "n.b"):
            return False
        return nxt_core.lower().rstrip(",;:") in _OPENERS
    if len(core) == 1 and core.isalpha() and core.isupper():
        # An initial ("J. Smith", "A. B. Jones") unless it closes a phrase like "vitamin D."
        before, _ = _prev_word(text, _skip_space_back(text, prev_start, seg_start), seg_start)
        b = before.lstrip(_OPEN)
        return bool(b) and b[0].islower() and not b.endswith(".")
    if core.isdigit() and len(core) <= 3 and not text[seg_start:prev_start].strip():
        return False  # "1. First step" opening a paragraph is a list number, not a sentence
    # Inside parentheses that close soon after: "(see Fig. 2. Left) ..." stays one sentence.
    # An unbalanced "(" whose next ")" belongs to a later "(" does not hold the sentence open.
    if opened <= 0:
        return True
    close = text.find(")", m.end(), m.end() + 150)
    if close == -1:
        return True
    reopen = text.find("(", m.end(), close)
    return reopen != -1


def _skip_space_back(text: str, pos: int, start: int) -> int:
    while pos > start and text[pos - 1].isspace():
        pos -= 1
    return pos


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence offsets in `text[start:end]`, untrimmed and contiguous."""
    stop = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    seg = start
    # Parenthesis depth since `seg`, kept incrementally so a long paragraph stays linear.
    depth = 0
    counted = start
    for m in _TERMINAL.finditer(text, start, stop):
        depth += text.count("(", counted, m.end()) - text.count(")", counted, m.end())
        counted = m.end()
        # A CJK mark ends its sentence: that script has no case and no abbreviations to test.
        if m.group()[0] in _CJK_ENDS or _is_boundary(text, m, seg, stop, depth):
            out.append((seg, m.end()))
            seg = m.end()
            depth = 0
    if seg < stop:
        out.append((seg, stop))
    return out


def trim_offsets(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]` without its leading and trailing whitespace, as offsets (spans stay exact)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_long(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut a trimmed span longer than `max_chars` at "; ", then ", ", then a space (never mid-word)."""
    out: list[tuple[int, int]] = []
    s = start
    while end - s > max_chars:
        limit = s + max_chars
        floor = s + max_chars // 3
        cut = -1
        for sep in ("; ", ", ", " "):
            i = text.rfind(sep, floor, limit)
            if i != -1:
                cut = i + len(sep.rstrip())
                break
        if cut == -1:
            cut = limit
        a, b = trim_offsets(text, s, cut)
        if b > a:
            out.append((a, b))
        s, _ = trim_offsets(text, cut, end)
    if end > s:
        out.append((s, end))
    return out


# --- extraction ------------------------------------------------------------------------------


def _line_table(lines: Sequence[str]) -> list[bool]:
    """Rows of pipe tables, including GitHub tables without a leading pipe (found by their separator)."""
    rows = [_is_table_row(line) for line in lines]
    for i, line in enumerate(lines):
        if "|" in line and _TABLE_SEP.match(line):
            if i > 0 and "|" in lines[i - 1]:
                rows[i - 1] = True
            j = i + 1
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                rows[j] = True
                j += 1
    return rows


def extract_spans(doc: ParsedDocument, *, max_chars: int = DEFAULT_MAX_SPAN_CHARS) -> list[FactSpan]:
    """All fact spans of a document in text order, with section, page and sequence."""
    text = doc.text
    raw = _raw_spans(
        text,
        doc.sections,
        max_chars,
        line_ends=frozenset(doc.line_ends),
        fact_headings=frozenset(doc.fact_headings),
    )
    sec_starts = [s.char_start for s in doc.sections]
    pages = doc.page_starts
    out: list[FactSpan] = []
    for seq, (a, b, kind) in enumerate(raw):
        out.append(
            FactSpan(
                text=text[a:b],
                char_start=a,
                char_end=b,
                span_type=kind,
                section=_section_at(doc.sections, sec_starts, a),
                page=(max(bisect_right(pages, a), 1) if pages else None),
                sequence=seq,
            )
        )
    return out


def _section_at(sections: Sequence[Section], starts: Sequence[int], offset: int) -> str:
    i = bisect_right(starts, offset) - 1
    if i >= 0 and sections[i].char_start <= offset < sections[i].char_end:
        return sections[i].name
    return ""


def _raw_spans(
    text: str,
    sections: Sequence[Section],
    max_chars: int,
    *,
    line_ends: frozenset[int] = frozenset(),
    fact_headings: frozenset[int] = frozenset(),
) -> list[tuple[int, int, SpanType]]:
    """`line_ends`: the line breaks that end a span whatever follows (`ParsedDocument.line_ends`:
    `<br>` lines of an address or a listing in HTML); `fact_headings`: section starts whose
    heading line is read as text all the same (`ParsedDocument.fact_headings`)."""
    lines = text.split("\n")
    offsets = line_starts(lines)
    heading_starts = {s.char_start for s in sections if not _runs_on(text, s)} - fact_headings
    table = _line_table(lines)
    out: list[tuple[int, int, SpanType]] = []
    para: tuple[int, int] | None = None  # (start, end) of the current prose run

    def flush() -> None:
        nonlocal para
        if para is not None:
            for a, b in split_sentences(text, para[0], para[1]):
                _emit(text, a, b, SpanType.SENTENCE, max_chars=max_chars, out=out)
            para = None

    i = 0
    n = len(lines)
    in_fence = False
    while i < n:
        line = lines[i]
        start = offsets[i]
        end = start + len(line)
        if _FENCE.match(line) and not (not in_fence and _underline(lines, i)):
            flush()
            in_fence = not in_fence
            i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        if in_fence:
            # Code and layout blocks are line-oriented: one span per line, never sentence-split.
            _emit(text, start, end, SpanType.SENTENCE, max_chars=max_chars, out=out)
            i += 1
            continue
        atx = _ATX_MARK.match(line) if start in fact_headings else None
        if atx is not None:
            # A Markdown heading read as a fact (a question): its text without the `#` marks.
            flush()
            _emit(
                text,
                start + atx.end(),
                start + len(line.rstrip(" \t#")),
                SpanType.SENTENCE,
                max_chars=max_chars,
                out=out,
            )
            i += 1
            continue
        if (
            _heading_line(start, line, heading_starts)
            or _RULE.match(line)
            or _TABLE_SEP.match(line)
            or _underline(lines, i)
        ):
            flush()
            i += 1
            continue
        kind = _line_kind(line, is_table=table[i])
        if kind is None:
            para = (start, end) if para is None else (para[0], end)
            i += 1
            if end in line_ends:
                flush()
            continue
        flush()
        if kind is SpanType.BULLET:
            i, end = _bullet_end(
                lines, offsets, i, table=table, heading_starts=heading_starts, line_ends=line_ends
            )
        else:
            i += 1
        _emit_item(text, start, end, kind, max_chars=max_chars, out=out)
    flush()
    return out


def _underline(lines: Sequence[str], i: int) -> bool:
    """A line of `~` right under a line of text, about as long: a reStructuredText-style heading
    underline (plain-text standards and manuals use it), not a Markdown code fence, which has a
    blank line or the start of the text before it or says its language after the tildes."""
    s = lines[i].strip()
    if i == 0 or not s.startswith("~~~") or s.strip("~"):
        return False
    prev = lines[i - 1].strip()
    return bool(prev) and len(s) * 2 >= len(prev)


def _runs_on(text: str, section: Section) -> bool:
    """A heading that runs on into its clause's text on the same line ("8. Termination. Either
    party may …", plain text): the line is a fact, not a heading line to skip."""
    eol = text.find("\n", section.char_start)
    line = text[section.char_start : eol if eol >= 0 else len(text)].strip()
    return len(line) > len(section.name) + 2 and line.startswith(section.name) and section.name != ""


def _line_kind(line: str, *, is_table: bool) -> SpanType | None:
    """The span type of a line that is one item on its own, or None for a line of prose."""
    if is_table:
        return SpanType.TABLE_ROW
    if _CAPTION.match(line):
        return SpanType.CAPTION
    if _CONTENTS_LINE.search(line):
        return SpanType.SENTENCE  # "1.  Introduction . . . 4" before a numbered item's rule
    if _BULLET.match(line):
        return SpanType.BULLET
    return None


def _bullet_end(
    lines: Sequence[str],
    offsets: Sequence[int],
    i: int,
    *,
    table: Sequence[bool],
    heading_starts: set[int],
    line_ends: frozenset[int] = frozenset(),
) -> tuple[int, int]:
    """The bullet starting at line `i` with its continuation lines: (next line index, end offset);
    a line break in `line_ends` ends it."""
    line = lines[i]
    indent = len(line) - len(line.lstrip())
    end = offsets[i] + len(line)
    j = i + 1
    prev = line
    opened = line.count("(") - line.count(")")
    while (
        j < len(lines)
        and end not in line_ends
        and _continues_bullet(
            lines[j],
            prev,
            indent,
            opened=opened,
            is_table=table[j],
            heading_starts=heading_starts,
            start=offsets[j],
        )
    ):
        prev = lines[j]
        opened += prev.count("(") - prev.count(")")
        end = offsets[j] + len(lines[j])
        j += 1
    return j, end


def _emit_item(
    text: str, start: int, end: int, kind: SpanType, *, max_chars: int, out: list[tuple[int, int, SpanType]]
) -> None:
    if kind is not SpanType.TABLE_ROW and end - start > _PROSE_ITEM_CHARS:
        # A paragraph-long "bullet" (an inline "1. ... 2. ..." abstract, an <li> holding prose)
        # is sentence-split so spans stay sentence-sized; its pieces keep the line's type.
        for a, b in split_sentences(text, start, end):
            _emit(text, a, b, kind, max_chars=max_chars, out=out)
    else:
        _emit(text, start, end, kind, max_chars=max_chars, out=out)


def _heading_line(start: int, line: str, heading_starts: set[int]) -> bool:
    if start in heading_starts:
        return True
    # A section may start after leading spaces on its line.
    lead = len(line) - len(line.lstrip())
    return bool(lead) and (start + lead) in heading_starts


def _continues_bullet(
    line: str, prev: str, indent: int, *, opened: int, is_table: bool, heading_starts: set[int], start: int
) -> bool:
    """A wrapped bullet: an indented line, (PDF text) a lower-case line after an unfinished one, or
    any line after one that ends on a word no item ends on ("… any distribution of this" /
    "Package."): plain text wraps a numbered clause at its number's column or left of it."""
    s = line.strip()
    if not s or is_table or start in heading_starts or _BULLET.match(line) or _CAPTION.match(line):
        return False
    if _RULE.match(line) or _FENCE.match(line) or _TABLE_SEP.match(line):
        return False
    lead = len(line) - len(line.lstrip())
    if lead > indent or opened > 0:
        return True  # indented, or the item left a parenthesis open
    if _OPEN_ENDED.search(prev):
        return True
    return s[0].islower() and prev.rstrip()[-1:] not in (".", "!", "?", ":", ";")


#: A line ending on an article, a determiner, "of" or a conjunction stops mid-phrase: its item goes
#: on. Not the particles that end phrasal verbs ("Sign in", "Turn the power on", "what it is for"),
#: after which a capitalised line is a new statement.
_OPEN_ENDED = re.compile(
    r"\s(?:the|a|an|this|these|those|its|their|any|each|of|with|by|from|into|under|than|and|or|nor)[ \t]*$",
    re.IGNORECASE,
)


def _emit(
    text: str, a: int, b: int, kind: SpanType, *, max_chars: int, out: list[tuple[int, int, SpanType]]
) -> None:
    a, b = trim_offsets(text, a, b)
    if b <= a or not _ALNUM.search(text, a, b):
        return
    if b - a <= max_chars:
        out.append((a, b, kind))
        return
    for x, y in split_long(text, a, b, max_chars):
        if _ALNUM.search(text, x, y):
            out.append((x, y, kind))
