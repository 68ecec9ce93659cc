"""Pydantic models at the edges: HTTP API, Lambda events, CLI JSON output.

Bounds here are the contract (docs/contracts.md#limits); a value out of range is a 422
naming the field and its range.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evidence.names import (
    MAX_FILTER_KEY_CHARS,
    MAX_FILTER_KEYS,
    MAX_QUERY_CHARS,
    check_filters,
    reject_blank,
    reject_control_characters,
)

MetaScalar = str | int | float | bool
#: What JSON Schema can say of `check_filters`' limits (the OpenAPI document; the total count of
#: values and their lengths are checked by the validator alone).
FILTERS_SCHEMA: dict[str, Any] = {
    "maxProperties": MAX_FILTER_KEYS,
    "propertyNames": {"maxLength": MAX_FILTER_KEY_CHARS},
}
Metadata = dict[str, MetaScalar | list[str] | None]


class _Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- indexing -------------------------------------------------------------------------------


class IndexDocumentRequest(_Edge):
    """POST /v1/indexes/{index}/documents."""

    document_id: str | None = Field(default=None, min_length=1, max_length=1024)
    filename: str = Field(min_length=1, max_length=1024)
    text: str | None = None
    content_base64: str | None = None
    content_type: str | None = Field(default=None, max_length=255)
    metadata: Metadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_content(self) -> IndexDocumentRequest:
        if (self.text is None) == (self.content_base64 is None):
            raise ValueError("give exactly one of 'text' or 'content_base64'")
        return self


class IndexDocumentResponse(_Edge):
    index: str
    document_id: str
    status: Literal["created", "updated", "unchanged"]
    chunks: int
    spans: int


class DeleteDocumentResponse(_Edge):
    index: str
    document_id: str
    deleted_chunks: int


class IndexSummary(_Edge):
    name: str
    documents: int
    chunks: int


class ListIndexesResponse(_Edge):
    """The indexes the caller may read or write (all of them without an access policy)."""

    indexes: list[IndexSummary]


# --- retrieval ------------------------------------------------------------------------------


class Overrides(_Edge):
    """Per-request overrides of a profile's defaults (docs/architecture.md#scores-and-knobs)."""

    first_stage_k: int | None = Field(default=None, ge=1, le=1000)
    rerank_k: int | None = Field(default=None, ge=1, le=1000)
    top_k: int | None = Field(default=None, ge=1, le=200)
    rerank_cutoff: float | None = Field(default=None, ge=0.0, le=1.0)
    followup_max_rounds: int | None = Field(default=None, ge=0, le=50)
    followup_boost: float | None = Field(default=None, ge=1.0, le=10.0)
    followup_boost_cap: float | None = Field(default=None, ge=0.0, le=100.0)
    min_similarity: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=(
            "Seed 003's floor on dense cosine similarity: hits below it are dropped; 0 = off. "
            "0-1, the range of EVIDENCE_MIN_SIMILARITY and of the seed (a negative floor keeps everything)."
        ),
    )
    max_chars: int | None = Field(default=None, ge=0, le=10_000_000)
    mmr_lambda: float | None = Field(default=None, ge=0.0, le=1.0)
    max_chunks_per_document: int | None = Field(default=None, ge=1, le=1000)
    #: Withhold the hits when the answerability confidence is below this (0 = off, the default of
    #: every profile): docs/ranking.md, Answerability.
    withhold_below: float | None = Field(default=None, ge=0.0, le=1.0)
    #: How the first stage fuses its lexical and dense legs (docs/ranking.md#fusion); the
    #: profile's default (z-score) when absent. Set, it fuses client-side on every backend.
    fusion: Literal["zscore", "minmax", "rrf"] | None = Field(
        default=None,
        description="First-stage fusion of the lexical and dense legs: zscore (the default), minmax or rrf.",
    )


OVERRIDE_FIELDS: tuple[str, ...] = tuple(Overrides.model_fields)


class ConversationTurn(_Edge):
    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=MAX_QUERY_CHARS)

    _plain = field_validator("content")(reject_control_characters)


class RetrieveRequest(Overrides):
    """POST /v1/indexes/{index}/retrieve."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    criterion_question: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    profile: str = Field(default="default", max_length=64)
    filters: dict[str, MetaScalar | list[str]] | None = Field(default=None, json_schema_extra=FILTERS_SCHEMA)
    explain: bool = False
    conversation: list[ConversationTurn] | None = Field(default=None, max_length=50)

    _filled = field_validator("query")(reject_blank)
    _plain = field_validator("query", "criterion_question")(reject_control_characters)
    _bounded = field_validator("filters")(check_filters)

    def overrides(self) -> dict[str, Any]:
        """Only the override fields the caller actually set."""
        return {k: getattr(self, k) for k in OVERRIDE_FIELDS if getattr(self, k) is not None}


class Citation(_Edge):
    index: int
    document_id: str
    source: str
    section: str | None = None
    page: int | None = None
    char_start: int
    char_end: int


class Hit(_Edge):
    rank: int
    chunk_id: str
    document_id: str
    text: str
    source: str
    metadata: dict[str, Any]
    score: float
    scores: dict[str, float] | None = None
    citation: Citation
    explain: list[str] | None = None


class Followup(_Edge):
    chunk_id: str
    document_id: str
    text: str
    source: str
    round_number: int | None = None
    question: str | None = None
    answer: str | None = None
    metadata: dict[str, Any]
    question_similarity_score: float | None = None


class StageTelemetry(_Edge):
    name: str
    candidates_in: int
    candidates_out: int
    ms: float
    detail: dict[str, Any] | None = None


class AnswerTelemetry(_Edge):
    """What `confidence` and `can_answer` were computed from (docs/ranking.md, Answerability)."""

    basis: Literal["dense", "lexical", "cascade", "followups", "none"]
    features: dict[str, float] = Field(default_factory=dict)
    #: True when the hits were withheld because the confidence was below `withhold_below`.
    withheld: bool = False


class Telemetry(_Edge):
    stages: list[StageTelemetry]
    path_used: str
    degraded: list[str] = Field(default_factory=list)
    total_ms: float
    answer: AnswerTelemetry | None = None


class Plan(_Edge):
    """A retrieval plan: rules first, an optional LLM, always a safe fallback (seed 002)."""

    query: str
    normalized_query: str
    criterion_hash: str | None = None
    profile: str
    query_mode: Literal["SECTION", "ATTRIBUTE", "MULTI_SECTION", "GENERIC", "GLOBAL"] = "GLOBAL"
    entity: str | None = None
    attribute: str | None = None
    candidate_sections: list[str] = Field(default_factory=list)
    search_phrases: list[str] = Field(default_factory=list)
    extraction_level: Literal["sentence", "block"] = "block"
    filters: dict[str, MetaScalar | list[str]] = Field(default_factory=dict)
    planner: Literal["rules", "llm", "fallback"] = "rules"


class RetrieveResponse(_Edge):
    hits: list[Hit]
    followups: list[Followup]
    evidence_xml: str
    valid_indexes: list[int]
    plan: Plan
    telemetry: Telemetry
    can_answer: bool
    confidence: float
    needs_clarification: bool


class PlanRequest(_Edge):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    criterion_question: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    profile: str = Field(default="default", max_length=64)
    filters: dict[str, MetaScalar | list[str]] | None = Field(default=None, json_schema_extra=FILTERS_SCHEMA)

    _filled = field_validator("query")(reject_blank)
    _plain = field_validator("query", "criterion_question")(reject_control_characters)
    _bounded = field_validator("filters")(check_filters)


class FormatRequest(_Edge):
    hits: list[Hit]
    followups: list[Followup] = Field(default_factory=list)


class FormatResponse(_Edge):
    evidence_xml: str
    valid_indexes: list[int]
    output_schema: dict[str, Any] | None = None


class DocumentSummary(_Edge):
    document_id: str
    source: str
    passages: int
    spans: int


class ListDocumentsResponse(_Edge):
    """`GET /v1/indexes/{index}/documents`: the index's documents, by id."""

    index: str
    documents: list[DocumentSummary]


class TextRange(_Edge):
    start: int
    end: int


class DocumentText(_Edge):
    """`GET /v1/indexes/{index}/documents/{document_id}`: the text every offset of the document refers to.

    Rebuilt from the stored chunks (`text[c.char_start:c.char_end] == c.text` for every chunk); the
    store does not keep characters no chunk covers (whitespace between sections, mostly), so each
    of those is a newline here and `gaps` lists the ranges `[start, end)`.
    """

    index: str
    document_id: str
    source: str
    text: str
    gaps: list[TextRange]
    chunks: int
