"""Documents and vectors for the embedded store's tests: a Markdown document chunked as indexing
does, a document of one passage, and a vector per chunk seeded by the document's content (spans
get none, as indexing leaves them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from evidence.ids import content_hash
from evidence.ingest import chunk_document, parse_text
from evidence.records import Chunk, ChunkKind, DocumentChunks

DIM = 4


def doc(document_id: str, text: str, metadata: dict[str, Any] | None = None) -> DocumentChunks:
    parsed = parse_text(text, filename=f"{document_id}.md", fmt="md")
    return chunk_document(
        parsed, document_id=document_id, source=f"{document_id}.md", metadata=metadata or {}
    )


def one_passage(document_id: str, text: str) -> DocumentChunks:
    """A document of one passage, `text` whole, whose chunk id is the document's id."""
    chunk = Chunk(
        chunk_id=document_id,
        document_id=document_id,
        kind=ChunkKind.PASSAGE,
        text=text,
        char_start=0,
        char_end=len(text),
        sequence=0,
        content_hash=content_hash(text),
    )
    return DocumentChunks(document_id, content_hash(text), document_id, (chunk,))


def vectors(document: DocumentChunks) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, document.content_hash)))
    vecs = rng.standard_normal((len(document.chunks), DIM)).astype(np.float32)
    for i, c in enumerate(document.chunks):
        if c.kind is ChunkKind.SPAN:
            vecs[i] = np.nan
    return vecs
