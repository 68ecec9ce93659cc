"""A document's text, rebuilt from its stored chunks, for the workbench's source view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidence.errors import DocumentNotFoundError
from evidence.model import DocumentSummary, DocumentText, ListDocumentsResponse, TextRange

if TYPE_CHECKING:
    from evidence.service import EvidenceService

#: A document larger than this many chunks is not shown whole (OpenSearch's result window).
MAX_CHUNKS = 10_000
#: What stands for a character no chunk covers: offsets stay exact, the layout stays readable.
GAP = "\n"


def list_documents(service: EvidenceService, index: str) -> ListDocumentsResponse:
    docs = service.list_documents(index)
    return ListDocumentsResponse(
        index=index,
        documents=[
            DocumentSummary(document_id=d.document_id, source=d.source, passages=d.passages, spans=d.spans)
            for d in docs
        ],
    )


def document_text(service: EvidenceService, index: str, document_id: str) -> DocumentText:
    """Every chunk laid at its offsets, in one pass by start. Chunks agree where they overlap
    (each is a slice of the same parsed text), so each character is taken from the first chunk
    that covers it."""
    service.backend.get_index(index)
    hits = service.backend.lookup(index, {"document_id": document_id}, limit=MAX_CHUNKS, kind=None)
    chunks = [h.chunk for h in hits if h.chunk.document_id == document_id]
    if not chunks:
        raise DocumentNotFoundError(
            f"document {document_id!r} is not in index {index!r}", field="document_id"
        )
    parts: list[str] = []
    gaps: list[TextRange] = []
    filled = 0  # text[:filled] is laid
    for c in sorted(chunks, key=lambda c: c.char_start):
        if c.char_start > filled:
            gaps.append(TextRange(start=filled, end=c.char_start))
            parts.append(GAP * (c.char_start - filled))
            filled = c.char_start
        if c.char_end > filled:
            parts.append(c.text[filled - c.char_start :])
            filled = c.char_end
    return DocumentText(
        index=index,
        document_id=document_id,
        source=chunks[0].source,
        text="".join(parts),
        gaps=gaps,
        chunks=len(chunks),
    )
