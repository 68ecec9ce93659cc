"""A small deterministic corpus for the backend contract: vendor documents, follow-ups, spans.

Vectors are fake 8-dim unit vectors: chunk i of the corpus points mostly along axis i % 8,
so the nearest chunk to a query along an axis is known exactly.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from evidence.ids import chunk_id, content_hash, normalize_and_hash
from evidence.records import Chunk, ChunkKind, DocumentChunks, SpanType

DIM = 8
EMBEDDER = "fake-8"
CRITERION = "Do you encrypt data at rest?"
CRITERION_HASH = normalize_and_hash(CRITERION)


def _doc(
    document_id: str,
    title: str,
    passages: list[str],
    *,
    metadata: dict[str, object] | None = None,
    spans: list[tuple[int, SpanType]] = (),  # type: ignore[assignment]
    section: str = "",
) -> DocumentChunks:
    """Passages joined by blank lines; spans are whole passages re-stored as fact spans."""
    text = "\n\n".join(passages)
    meta = dict(metadata or {})
    chunks: list[Chunk] = []
    offset = 0
    starts = []
    for i, passage in enumerate(passages):
        starts.append(offset)
        chunks.append(
            Chunk(
                chunk_id=chunk_id(document_id, "passage", i),
                document_id=document_id,
                kind=ChunkKind.PASSAGE,
                text=passage,
                char_start=offset,
                char_end=offset + len(passage),
                sequence=i,
                source=f"{document_id}.md",
                title=title,
                section=section,
                page=1 if i == 0 else 2,
                metadata=meta,
                content_hash=content_hash(passage),
            )
        )
        offset += len(passage) + 2
    for j, (p, span_type) in enumerate(spans):
        chunks.append(
            Chunk(
                chunk_id=chunk_id(document_id, "span", j),
                document_id=document_id,
                kind=ChunkKind.SPAN,
                text=passages[p],
                char_start=starts[p],
                char_end=starts[p] + len(passages[p]),
                sequence=j,
                source=f"{document_id}.md",
                title=title,
                section=section,
                span_type=span_type,
                metadata=meta,
                content_hash=content_hash(passages[p]),
            )
        )
    return DocumentChunks(document_id, content_hash(title + text), f"{document_id}.md", tuple(chunks), meta)


def corpus() -> list[DocumentChunks]:
    return [
        _doc(
            "policy",
            "Security policy",
            [
                "All customer data is encrypted at rest with AES-256 and keys are rotated yearly.",
                "Backups are stored in a second region and tested every quarter.",
            ],
            metadata={"type": "tc_files"},
            spans=[(0, SpanType.SENTENCE)],
            section="Encryption",
        ),
        _doc(
            "incident",
            "Incident response",
            [
                "Security incidents are triaged within one hour by the on-call engineer.",
                "Customers are notified of breaches within 72 hours.",
            ],
            metadata={"type": "tc_files"},
            section="Incidents",
        ),
        _doc(
            "followup-r1",
            "Follow-up round 1",
            ["Yes. Databases and object storage use encryption at rest."],
            metadata={
                "type": "followup_response:1",
                "round_number": 1,
                "criterion_question_hash": CRITERION_HASH,
            },
        ),
        _doc(
            "followup-r2",
            "Follow-up round 2",
            ["Laptops also use full disk encryption since March."],
            metadata={
                "type": "followup_response:2",
                "round_number": 2,
                "criterion_question_hash": CRITERION_HASH,
            },
        ),
        _doc(
            "followup-doc",
            "Pen test summary",
            ["The annual penetration test found no critical issues in the encryption setup."],
            metadata={"type": "followup_document"},
        ),
    ]


def axis(i: int) -> np.ndarray:
    v = np.full(DIM, 0.05, dtype=np.float32)
    v[i % DIM] = 1.0
    return (v / np.linalg.norm(v)).astype(np.float32)


def vectors_for(docs: list[DocumentChunks]) -> list[np.ndarray]:
    """Chunk n (counted over the whole corpus, in order) points along axis n % DIM."""
    out = []
    n = 0
    for doc in docs:
        rows = []
        for _ in doc.chunks:
            rows.append(axis(n))
            n += 1
        out.append(np.stack(rows).astype(np.float32))
    return out


def edited(doc: DocumentChunks, passages: list[str]) -> DocumentChunks:
    """The same document id with new passages (fewer or more chunks than before)."""
    first = doc.chunks[0]
    new = _doc(doc.document_id, first.title, passages, metadata=dict(doc.metadata))
    return replace(new, source=doc.source)
