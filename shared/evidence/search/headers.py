"""Contextual section headers: what of a chunk's section the first-stage legs index beside its title.

`Chunk.search_text` (title + text) is what the refusal and grounding read; the legs may see more:
with `EVIDENCE_SECTION_HEADER=heading|path` a passage's BM25 document and/or its vector (the legs
`EVIDENCE_SECTION_HEADER_LEGS` names) is built from `title + header + text`, so a passage whose body
never repeats its topic words ("8. Termination", "2.2 Renal impairment") can be found by its heading
(docs/ingest.md#section-headers). The header is read from the stored chunk itself (its `section`
and the parent heading `annotate_chunks` records), so an inverted index rebuilt from the records
gets the same one. `hashed` joins the rule to the document content hash (`Indexing`): changing the
setting re-indexes every document instead of keeping vectors built without the header.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from evidence.config import HeaderLegs, SectionHeaderKind, Settings
from evidence.ids import content_hash
from evidence.records import Chunk, ChunkKind, DocumentChunks

#: `evidence.ingest.sections.SECTION_PARENT_KEY` (not imported: the search package does not load
#: the ingest package; a unit test holds them equal).
PARENT_KEY = "section_parent"


@dataclass(frozen=True, slots=True)
class SectionHeaders:
    """The header rule of one indexing run (`from_settings`); `OFF` (the default) adds nothing."""

    kind: SectionHeaderKind = SectionHeaderKind.OFF
    legs: HeaderLegs = HeaderLegs.BOTH
    spans: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> SectionHeaders:
        return cls(settings.section_header, settings.section_header_legs, settings.section_header_spans)

    @property
    def on(self) -> bool:
        return self.kind is not SectionHeaderKind.OFF

    def params(self) -> dict[str, Any] | None:
        """What the document content hash records of the rule (None when off: hashes unchanged).
        `path` records that its header leaves the title out (`header`, session 46): a store
        indexed under `path` before holds the title twice and is rewritten on its next index."""
        if not self.on:
            return None
        params: dict[str, Any] = {"kind": self.kind.value, "legs": self.legs.value, "spans": self.spans}
        if self.kind is SectionHeaderKind.PATH:
            params["title"] = "once"
        return params

    def hashed(self, chunks: DocumentChunks) -> DocumentChunks:
        """`chunks` with the rule joined to its content hash: the stores re-index a document only
        when that hash changes, and the header changes what is indexed without changing the text,
        the chunks or their layout. The same object when off, and for a document none of whose
        chunks has a section (BEIR/JSONL records, SciFact): every header is empty, nothing indexed
        changes, so nothing is re-indexed."""
        params = self.params()
        if params is None or not any(c.section for c in chunks.chunks):
            return chunks
        rule = json.dumps(params, sort_keys=True, separators=(",", ":"))
        return replace(chunks, content_hash=content_hash(f"{chunks.content_hash}\x00section_header:{rule}"))

    def header(
        self, kind: ChunkKind | str, section: str, metadata: Mapping[str, Any], title: str = ""
    ) -> str:
        """The header text of one chunk ("" when off, or for a span unless `spans`). Under `path`,
        a heading that is the chunk's `title` (a document whose first heading is its title: the
        parent of every second-level section) is left out: the title already leads what is
        indexed (`_joined`)."""
        if not self.on or not section:
            return ""
        if ChunkKind(kind) is not ChunkKind.PASSAGE and not self.spans:
            return ""
        if self.kind is SectionHeaderKind.PATH:
            parent = metadata.get(PARENT_KEY)
            parts = [parent] if isinstance(parent, str) and parent and parent != section else []
            return " ".join(p for p in (*parts, section) if not _same(p, title))
        return section

    @property
    def lexical(self) -> bool:
        return self.on and self.legs is not HeaderLegs.DENSE

    @property
    def dense(self) -> bool:
        return self.on and self.legs is not HeaderLegs.LEXICAL

    def lexical_header(
        self, kind: ChunkKind | str, section: str, metadata: Mapping[str, Any], title: str = ""
    ) -> str:
        """The header the BM25 document carries between the title and the text."""
        return self.header(kind, section, metadata, title) if self.lexical else ""

    def lexical_text(self, chunk: Chunk) -> str:
        """What the lexical leg indexes (OpenSearch's `search_text` field): title, header, text."""
        head = self.lexical_header(chunk.kind, chunk.section, chunk.metadata, chunk.title)
        return _joined(chunk, head)

    def dense_text(self, chunk: Chunk) -> str:
        """What a passage's stored vector embeds: title, header (when the dense leg has it), text."""
        head = self.header(chunk.kind, chunk.section, chunk.metadata, chunk.title) if self.dense else ""
        return _joined(chunk, head)


def _same(heading: str, title: str) -> bool:
    """Whether a heading says the title (white space and case aside)."""
    return bool(title) and " ".join(heading.split()).casefold() == " ".join(title.split()).casefold()


def _joined(chunk: Chunk, head: str) -> str:
    if not head:
        return chunk.search_text
    return f"{chunk.title} {head} {chunk.text}" if chunk.title else f"{head} {chunk.text}"


OFF = SectionHeaders()
