"""Ingestion: bytes or records → `ParsedDocument` → passages + verbatim fact spans → chunks."""

from evidence.ingest.chunker import (
    DEFAULT_OVERLAP,
    DEFAULT_PASSAGE_TOKENS,
    DEFAULT_RECORD_MAX_TOKENS,
    Passage,
    chunk_document,
    document_hash,
    make_passages,
)
from evidence.ingest.parsers import (
    SUPPORTED_FORMATS,
    decode_text,
    detect_format,
    parse_bytes,
    parse_text,
    unsupported_reason,
)
from evidence.ingest.sources import (
    KNOWN_TYPES,
    SourceFailure,
    SourceItem,
    enrich_metadata,
    iter_sources,
    type_note,
)
from evidence.ingest.spans import FactSpan, extract_spans, split_sentences

__all__ = [
    "DEFAULT_OVERLAP",
    "DEFAULT_PASSAGE_TOKENS",
    "DEFAULT_RECORD_MAX_TOKENS",
    "KNOWN_TYPES",
    "SUPPORTED_FORMATS",
    "FactSpan",
    "Passage",
    "SourceFailure",
    "SourceItem",
    "chunk_document",
    "decode_text",
    "detect_format",
    "document_hash",
    "enrich_metadata",
    "extract_spans",
    "iter_sources",
    "make_passages",
    "parse_bytes",
    "parse_text",
    "split_sentences",
    "type_note",
    "unsupported_reason",
]
