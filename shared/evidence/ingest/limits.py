"""The work one document may cost: past a limit it is refused by name, never processed for minutes.

Every stage of ingestion is linear in the text (no backtracking regex, no per-level copies), so
these caps bound a document's cost outright: the parsed text's length, how deep HTML lists nest
(each level indents its items), and how many fact spans and passages it becomes (each one is a
stored chunk, a passage an embedding too). They sit far above real documents: a 1,000-page
manual is ~3 M characters and ~3,000 passages.
"""

from __future__ import annotations

from dataclasses import dataclass

from evidence.errors import DocumentParseError


@dataclass(frozen=True, slots=True)
class IngestLimits:
    max_chars: int = 16_000_000
    max_list_depth: int = 100
    #: XML (SPL): how deep elements nest. Real labels nest ~20 deep; the walk over sections, lists
    #: and inline markup recurses once per level.
    max_xml_depth: int = 200
    max_spans: int = 250_000
    max_passages: int = 20_000


DEFAULT_LIMITS = IngestLimits()


def check_count(source: str, what: str, count: int, limit: int, fix: str) -> None:
    """Raise `DocumentParseError` naming the limit when `count` goes past it."""
    if count > limit:
        raise DocumentParseError(source, f"{what}: {count:,} is more than the limit of {limit:,}; {fix}")
