"""Evidence formatting: the XML an LLM reads, its valid citation indexes, JSON hits."""

from evidence.format.evidence import (
    EvidenceDocument,
    EvidenceEntry,
    FollowupEntry,
    build_evidence,
    escape_text,
    evidence_from_candidates,
    evidence_from_models,
    structured_output_schema,
)
from evidence.format.hits import format_response, to_followups, to_hits

#: What `EvidenceService.format` calls (POST /v1/format).
format_request = format_response

__all__ = [
    "EvidenceDocument",
    "EvidenceEntry",
    "FollowupEntry",
    "build_evidence",
    "escape_text",
    "evidence_from_candidates",
    "evidence_from_models",
    "format_request",
    "format_response",
    "structured_output_schema",
    "to_followups",
    "to_hits",
]
