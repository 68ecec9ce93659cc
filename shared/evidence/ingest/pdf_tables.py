"""PDF tables as rows: pypdf's layout mode finds the tables, its plain text keeps the prose.

pypdf's default extraction joins the cells of a table row with single spaces ("Adults 10 mg
once daily 40 mg once daily"): the row is there but its cells are lost. Its layout mode keeps
the page's geometry, so cells stay apart by runs of spaces at stable columns. A run of two or
more consecutive lines whose cells start at the same columns is a table. Layout mode, though,
interleaves the lines of a two-column page, which plain extraction keeps in reading order; so
the page text is the plain text, with each line that is a table row (its cells joined by single
spaces) replaced by `| cell | cell |`, which the span extractor reads as one table-row span.

Two columns of prose side by side also align; they are told apart from a table by their cells:
a table has three or more columns, or a first column of short labels (≤ `LABEL_CHARS`).
pdfplumber would find ruled tables more reliably but brings pdfminer.six, pypdfium2 and Pillow
(~25 MB) into a Lambda layer with ~30 MB left; this needs nothing beyond pypdf.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_GAP = re.compile(r" {3,}")
#: A first-column cell at most this long reads as a row label, not a line of prose.
LABEL_CHARS = 32
#: Column starts may drift by this many characters between rows (proportional fonts).
TOLERANCE = 2


def _cells(line: str) -> list[tuple[int, str]]:
    """(start column, text) of each cell: text separated by runs of 3+ spaces."""
    out = []
    pos = 0
    for part in _GAP.split(line):
        start = line.index(part, pos) if part else pos
        pos = start + len(part)
        if part.strip():
            lead = len(part) - len(part.lstrip())
            out.append((start + lead, part.strip()))
    return out


def _aligned(a: list[tuple[int, str]], b: list[tuple[int, str]]) -> bool:
    if len(a) != len(b) or len(a) < 2:
        return False
    return all(abs(x[0] - y[0]) <= TOLERANCE for x, y in zip(a, b, strict=True))


def _bullet_cell(text: str) -> bool:
    """A cell that is one mark and nothing else: a list's bullet (a dot, a dash, a square, or a
    symbol font's glyph read as a control character, which `parsers.invisible` makes a bullet)."""
    return len(text) == 1 and not text.isalnum()


def _is_table(rows: list[list[tuple[int, str]]]) -> bool:
    if len(rows) < 2:
        return False
    if len(rows[0]) == 2 and all(_bullet_cell(r[0][1]) for r in rows):
        return False  # a bulleted list set with a gap after its marks: list items, not a table
    if len(rows[0]) >= 3:
        return True
    return all(len(r[0][1]) <= LABEL_CHARS for r in rows)


def table_rows(layout: str) -> dict[str, str]:
    """Plain-text form of each table row found in layout-mode text → its `| a | b |` form."""
    lines = layout.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    cells = [_cells(line) for line in lines]
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        j = i + 1
        while j < len(lines) and _aligned(cells[i], cells[j]):
            j += 1
        if _is_table(cells[i:j]):
            for row in cells[i:j]:
                texts = [c for _, c in row]
                out.setdefault(
                    _key(" ".join(texts)), "| " + " | ".join(t.replace("|", "\\|") for t in texts) + " |"
                )
        i = j
    return out


def _key(line: str) -> str:
    return " ".join(line.split())


def page_text(page: Any, visitor_text: Any = None, code: Callable[[str], bool] | None = None) -> str:
    """A page's plain text with its table rows as `| a | b |` lines; `visitor_text` sees the
    plain extraction's text runs (their fonts give headings away); `code` says whether a plain
    line is set in a typewriter face (known once the plain extraction has run)."""
    plain = str(page.extract_text(visitor_text=visitor_text) or "")
    try:
        layout = page.extract_text(extraction_mode="layout") or ""
    except Exception:
        return plain  # layout mode is an improvement; a page it cannot read keeps its plain text
    rows = table_rows(layout)
    if not rows:
        return plain
    return "\n".join(_with_rows(plain.split("\n"), rows, code))


#: A listing line printed with its line number: the number, then the code ("18 \\def\\x{…}").
_NUMBERED_LINE = re.compile(r"\| \d{1,5} \| [^|]*(?:\\\|[^|]*)* \|")


def _with_rows(
    lines: list[str], rows: dict[str, str], code: Callable[[str], bool] | None = None
) -> list[str]:
    """The plain lines with each table row in its `| a | b |` form. A two-cell "row" of a line
    number and a line set in a typewriter face is a line of a numbered listing (its indented lines
    stand apart from their numbers as a second column does): it stays the line it is, a code line."""
    out: list[str] = []
    for line in lines:
        row = rows.get(_key(line))
        if row is not None and code is not None and _NUMBERED_LINE.fullmatch(row) and code(line):
            row = None
        out.append(line if row is None else row)
    return out
