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
