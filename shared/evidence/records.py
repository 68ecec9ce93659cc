"""Immutable records of the hot path: parsed documents, stored chunks, search hits.

Frozen dataclasses (not pydantic) because they are built by the thousand per
request; pydantic models live at the edges (`evidence.model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ChunkKind(StrEnum):
    PASSAGE = "passage"
    SPAN = "span"


class SpanType(StrEnum):
    SENTENCE = "sentence"
    BULLET = "bullet"
    TABLE_ROW = "table_row"
    CAPTION = "caption"


@dataclass(frozen=True, slots=True)
class Section:
    """A heading-delimited region of a document: `text[char_start:char_end]`."""

    name: str
    char_start: int
    char_end: int
    level: int = 1
    #: The source's own code for the section when it has one (FDA SPL: a LOINC code).
    code: str = ""


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """What a parser returns: the document text every offset refers to, and its structure.

    `page_starts[i]` is the character offset where page i+1 begins (PDF only;
    empty for formats without pages).
    """

    text: str
    title: str = ""
    sections: tuple[Section, ...] = ()
    page_starts: tuple[int, ...] = ()
    fmt: str = "txt"
    #: Names of the document's subject taken from the document itself (SPL: brand and generic).
    subject: tuple[str, ...] = ()
    #: The decoded upload when parsing changed its line ends (CRLF to LF): chunk offsets and
    #: texts are then taken from it, so they slice the user's own file (ingest/offsets.py).
    source_text: str | None = None
    #: Offsets of the line breaks that end a fact span whatever follows them: an HTML `<br>` line
    #: of an address or a listing (`ingest/spans.py`).
    line_ends: tuple[int, ...] = ()
    #: Starts of sections whose heading line is a fact too, kept in its span: an HTML reference
    #: list's terms (`git config`'s `core.fileMode`), each heading the subsection of its entry.
    fact_headings: tuple[int, ...] = ()

    def page_at(self, offset: int) -> int | None:
        if not self.page_starts:
            return None
        page = 0
        for i, start in enumerate(self.page_starts):
            if start <= offset:
                page = i
            else:
                break
        return page + 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """One stored retrieval unit: a passage or a verbatim fact span.

    Invariant: `text == document_text[char_start:char_end]` for the document
    it came from. `title` is the document title, prepended for search and
    embedding but never part of `text`.
    """

    chunk_id: str
    document_id: str
    kind: ChunkKind
    text: str
    char_start: int
    char_end: int
    sequence: int
    source: str = ""
    title: str = ""
    section: str = ""
    page: int | None = None
    span_type: SpanType | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    content_hash: str = ""

    @property
    def search_text(self) -> str:
        """What the lexical and dense legs see: the title gives every chunk its context."""
        return f"{self.title} {self.text}" if self.title else self.text


@dataclass(frozen=True, slots=True)
class DocumentChunks:
    """A document ready for a backend: its identity, content hash and chunks."""

    document_id: str
    content_hash: str
    source: str
    chunks: tuple[Chunk, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A backend's answer for one chunk: the chunk and the score of each leg that saw it."""

    chunk: Chunk
    score: float
    lexical: float | None = None
    dense: float | None = None
