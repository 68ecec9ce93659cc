"""Offsets into the text as the user uploaded it (decoded), when parsing changed its line ends.

Parsers work on text whose line ends are LF (`layout.normalise_newlines`): a CRLF file is one
character shorter per line there, so an offset into the parsed text would not slice the user's
own file. `SourceOffsets` maps an offset of the normalised text back to the original: CRLF
became LF (one character removed) and a lone CR became LF (same length), so the original offset
is the normalised one plus the number of CRs removed before it. A range that starts or ends at
a line break keeps the whole CRLF pair.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


def line_starts(lines: Sequence[str]) -> list[int]:
    """The offset of each line of `"\n".join(lines)` (the lines of a `text.split("\n")`)."""
    starts: list[int] = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    return starts


class SourceOffsets:
    def __init__(self, original: str) -> None:
        removed: list[int] = []
        start = 0
        while (i := original.find("\r\n", start)) >= 0:
            # The LF this pair became sits at normalised position i - len(removed).
            removed.append(i - len(removed))
            start = i + 2
        self._removed = removed

    @property
    def identity(self) -> bool:
        return not self._removed

    def __call__(self, offset: int) -> int:
        return offset + bisect_left(self._removed, offset)
