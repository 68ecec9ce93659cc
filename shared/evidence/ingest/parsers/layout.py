"""The plain-text layout every parser writes and the span extractor reads.

Sections run from one heading to the next; table rows are `| a | b |` lines whose cells
cannot contain a bare `|`; runs of whitespace inside a cell or a heading are one space.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from evidence.records import Section

WS = re.compile(r"\s+")

#: (char_start, level, name) of one heading, in document order.
Heading = tuple[int, int, str]


def leader_dots(min_dots: int) -> str:
    """A dot leader's pattern: at least `min_dots` dots, each maybe spaced. A match starts only at
    a run's first dot (the lookbehinds), so a line of dots is scanned once, not once per dot."""
    return rf"(?<!\.)(?<!\.[ \t])(?:\.[ \t]?){{{min_dots},}}+"


def dot_leader(min_dots: int, page: str, flags: int = 0) -> re.Pattern[str]:
    """A contents line's tail: a dot leader (`leader_dots`) and a page number at the end.

    The parser and the span extractor read contents lines for different ends (the parser keeps a
    leader line from becoming a heading, the extractor keeps it whole as one span), so each picks
    its own leader length and page form; the shape is one (the PDF heading test's contents tail,
    `pdf_style._CONTENTS_TAIL`, reads the same leader or an ellipsis one).
    """
    return re.compile(rf"{leader_dots(min_dots)}[ \t]*+{page}[ \t]*+$", flags)


def _caption(labels: str) -> re.Pattern[str]:
    return re.compile(
        rf"^[ \t]*+(?:\*\*|__)?(?:{labels})"
        r"[ \t]++[A-Z]?\d+[A-Za-z]?(?:[.\-]\d+)*"
        r"(?:[ \t]*+(?:(?:\*\*|__)[ \t]*+)?[:.\u2014\u2013-]|[ \t]++(?-i:[A-Z]))",
        re.IGNORECASE,
    )


_FIGURE_LABELS = r"Figure|Fig\.|Figs\.|Table|Chart|Diagram|Image|Plate|Scheme"

#: A caption line: a figure or table label, its number, then a separator ("Figure 3. Mean plasma
#: concentrations …", "Table 2: Adverse reactions …", "**Fig. 2A** —") or whitespace and a capital
#: (a label's title set apart by spaces, as PDF labels do: "Table 11 Pharmacokinetic Properties …";
#: not "Table 2 summarizes …" nor "Table 9, and …"). The span extractor makes such a line one
#: `caption` span.
CAPTION = _caption(_FIGURE_LABELS + "|Exhibit")

#: The captions the PDF parser never reads as a heading (one would open a section, break the
#: section path and drop the caption from the spans): `CAPTION` without "Exhibit", which labels a
#: chart in a report but heads an attachment in a contract or a filing ("Exhibit 10.1 Form of
#: Indemnification Agreement"), where it must stay a heading, as the plain-text parser reads it.
FIGURE_CAPTION = _caption(_FIGURE_LABELS)


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def flat_sections(heads: Sequence[Heading], end: int) -> tuple[Section, ...]:
    """One section per heading, each running to the next heading (or to `end`)."""
    out: list[Section] = []
    for i, (start, level, name) in enumerate(heads):
        stop = heads[i + 1][0] if i + 1 < len(heads) else end
        if stop > start:
            out.append(Section(name=name, char_start=start, char_end=stop, level=level))
    return tuple(out)


def table_cell(text: str) -> str:
    return WS.sub(" ", text).strip().replace("|", "\\|")


def table_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?[#ivxlc]+(?:\s*(?:/|of)\s*#)?$", re.IGNORECASE)
_EDGE_NUMBER = re.compile(r"^(\d{1,4})\b|\b(\d{1,4})$")
#: Lines at each end of a page where running headers and footers sit ("Chapter 2" over "2.1 Scope").
_ZONE = 2
#: A running line is short: a header, a footer, a page number.
_RUNNING_MAX_CHARS = 100


def _page_zones(lines: Sequence[str]) -> list[tuple[str, int, int]]:
    """(end, rank, line index) of the lines at the top and bottom of a page: rank 0 is the outermost.
    A page of fewer than three lines has no room for a header, so it has no zones. A bare page
    number takes no room of its own: a journal's running head stacked over the folio in the margin
    ("Shift work" / "interventions" / "163") is `_ZONE` lines besides it."""
    idx = [i for i, line in enumerate(lines) if line.strip()]
    if len(idx) < 3:
        return []
    # A short page's second line is as likely its content as a header's second line.
    zone = _ZONE if len(idx) >= 3 * _ZONE else 1
    top = zone + (zone > 1 and _PAGE_NUMBER.match(_running_key(lines[idx[0]])) is not None)
    bottom = zone + (zone > 1 and _PAGE_NUMBER.match(_running_key(lines[idx[-1]])) is not None)
    return [("top", r, idx[r]) for r in range(top)] + [("bottom", r, idx[-1 - r]) for r in range(bottom)]


def _printed_number(line: str) -> int | None:
    """The page number a header or footer carries at its start or end ("4 Manual", "Chapter 2: X 3")."""
    s = line.strip()
    m = _EDGE_NUMBER.search(s) if len(s) <= _RUNNING_MAX_CHARS else None
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def _page_offset(split: Sequence[Sequence[str]]) -> dict[str, int]:
    """Per end of the page, the offset between a page's position and the number printed on its
    outermost line, when at least a quarter of the pages (min. 3) agree on it."""
    votes: dict[tuple[str, int], int] = {}
    for page_no, lines in enumerate(split, start=1):
        for where, rank, i in _page_zones(lines):
            n = _printed_number(lines[i]) if rank == 0 else None
            if n is not None:
                votes[(where, page_no - n)] = votes.get((where, page_no - n), 0) + 1
    need = max(3, len(split) // 4)
    best: dict[str, tuple[int, int]] = {}
    for (where, offset), count in votes.items():
        if count >= need and count > best.get(where, (0, 0))[0]:
            best[where] = (count, offset)
    return {where: offset for where, (_, offset) in best.items()}


def _running_key(line: str) -> str:
    """A line with digits masked and spaces collapsed: a right-aligned "[Page 10]" has one space
    fewer before it than "[Page 9]"."""
    return WS.sub(" ", _DIGITS.sub("#", line.strip()))


def running_lines(split: Sequence[Sequence[str]]) -> list[set[int]]:
    """Per page (its lines), the indices of its running headers and footers: PDF pages, and plain
    text paginated by form feeds (an RFC's "Barth   Standards Track   [Page 5]" footer and
    "RFC 6265   HTTP State Management Mechanism   April 2011" header).

    A line in the top or bottom `_ZONE` lines of a page (of three lines or more) is running when,
    with digits masked, it recurs in that zone on at least half the pages (min. 3); the outermost
    line is running too when it is a bare page number ("12", "Page 3 of 9") or carries the page's
    printed number at its start or end, the printed numbers following the pages at one offset
    ("Chapter 2: Setup 7" on page 10, "8 User Guide" on page 11).
    """
    if len(split) < 2:
        return [set() for _ in split]
    counts: dict[tuple[str, str], int] = {}
    # A book's or a journal's left and right pages carry different running heads (the journal's
    # name on one, the article's short title on the other): counted per side as well.
    sided: dict[tuple[int, str, str], int] = {}
    for page_no, lines in enumerate(split, start=1):
        for seen in {(where, _running_key(lines[i])) for where, _, i in _page_zones(lines)}:
            counts[seen] = counts.get(seen, 0) + 1
            sided[(page_no % 2, *seen)] = sided.get((page_no % 2, *seen), 0) + 1
    need = max(3, (len(split) + 1) // 2)
    need_side = {side: max(3, (len(split[1 - side :: 2]) + 1) // 2) for side in (0, 1)}
    offsets = _page_offset(split)
    out: list[set[int]] = []
    for page_no, lines in enumerate(split, start=1):
        drop = set()
        side = page_no % 2
        for where, rank, i in _page_zones(lines):
            key = _running_key(lines[i])
            recurs = (
                counts.get((where, key), 0) >= need or sided.get((side, where, key), 0) >= need_side[side]
            )
            if (recurs and len(key) <= _RUNNING_MAX_CHARS) or (
                rank == 0
                and (
                    _PAGE_NUMBER.match(key)
                    or (where in offsets and _printed_number(lines[i]) == page_no - offsets[where])
                )
            ):
                drop.add(i)
        out.append(drop)
    return out
