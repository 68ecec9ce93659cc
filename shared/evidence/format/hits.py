"""JSON output: API models (`Hit`, `Followup`, `Citation`) from ranked candidates."""

from __future__ import annotations

from collections.abc import Sequence

from evidence.format.evidence import (
    evidence_from_models,
    followup_entry,
    hit_source,
    structured_output_schema,
)
from evidence.model import Citation, Followup, FormatRequest, FormatResponse, Hit
from evidence.rank.candidate import Candidate
from evidence.rank.followups import QUESTION_SIMILARITY


def to_hits(candidates: Sequence[Candidate], *, explain: bool = False) -> list[Hit]:
    """Ranked hits 1..N; the citation index is the rank, i.e. the `<index_N>` of the XML."""
    hits = []
    for rank, c in enumerate(candidates, start=1):
        chunk = c.chunk
        source = hit_source(c)
        hits.append(
            Hit(
                rank=rank,
                chunk_id=chunk.chunk_id,
                document_id=chunk.document_id,
                text=chunk.text,
                source=source,
                metadata=dict(chunk.metadata),
                score=c.score,
                scores=dict(c.scores) if explain else None,
                citation=Citation(
                    index=rank,
                    document_id=chunk.document_id,
                    source=source,
                    section=chunk.section or None,
                    page=chunk.page,
                    char_start=chunk.char_start,
                    char_end=chunk.char_end,
                ),
                explain=list(c.notes) if explain else None,
            )
        )
    return hits


def to_followups(candidates: Sequence[Candidate]) -> list[Followup]:
    out = []
    for c in candidates:
        entry = followup_entry(c)
        out.append(
            Followup(
                chunk_id=c.chunk.chunk_id,
                document_id=c.chunk.document_id,
                text=c.chunk.text,
                source=entry.filename or c.chunk.source or c.chunk.document_id,
                round_number=entry.round_number,
                question=entry.question,
                answer=entry.answer,
                metadata=dict(c.chunk.metadata),
                question_similarity_score=c.scores.get(QUESTION_SIMILARITY),
            )
        )
    return out


def format_response(request: FormatRequest) -> FormatResponse:
    """POST /v1/format: the evidence XML, its valid indexes and the structured-output schema."""
    doc = evidence_from_models(request.hits, request.followups)
    return FormatResponse(
        evidence_xml=doc.xml,
        valid_indexes=doc.valid_indexes,
        output_schema=structured_output_schema(doc.valid_indexes),
    )
