"""Multi-section verbatim evidence (seed 002): `[SECTION: NAME]` blocks of exact text, no glue.

Hits are grouped by the section they come from, sections in the order their best hit ranks,
spans in rank order within a section. Nothing is written between the spans but a newline and
nothing around a block but its `[SECTION: NAME]` line, so every line of a block that is not
its header is a verbatim span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidence.records import Chunk


@dataclass(frozen=True, slots=True)
class SectionBlock:
    name: str  # the section's heading as the document gives it ("" when outside any heading)
    document_id: str
    spans: tuple[Chunk, ...]

    @property
    def header(self) -> str:
        return f"[SECTION: {(self.name or 'DOCUMENT').upper()}]"

    @property
    def text(self) -> str:
        return "\n".join([self.header, *(s.text for s in self.spans)])


def section_blocks(spans: Sequence[Chunk]) -> list[SectionBlock]:
    order: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[Chunk]] = {}
    for s in spans:
        key = (s.document_id, s.section)
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(s)
    return [SectionBlock(name=sec, document_id=doc, spans=tuple(groups[(doc, sec)])) for doc, sec in order]


def format_bundle(spans: Sequence[Chunk]) -> str:
    """The evidence bundle: one block per section, blocks separated by a blank line."""
    return "\n\n".join(b.text for b in section_blocks(spans))
