"""Seed 004's coach <-> retriever contract, field for field, as pydantic edge models.

Request: `query, subject, intent, conversation_snippet, constraints{content_types, difficulty,
top_k{lo, content}, graph_depth{prereq, content}, token_budget, timeout_ms}, seek_clarification`,
with the seed's defaults (top_k lo 6 / content 6, graph_depth 1 / 1, a 900-token budget, 1.2 s).

Response: every field of the seed's example (`can_answer, needs_clarification, confidence,
matched_los, supporting_los, content_items, minimal_context, citations, telemetry{stages,
applied_filters}`) plus a few additions: `clarification_question` (one concise question, set
when `needs_clarification`), `minimal_context_sources` (the node each bullet is quoted from),
`intent`, and telemetry's `degraded`, `total_ms` and `tokens`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evidence.names import MAX_QUERY_CHARS, reject_blank, reject_control_characters

MAX_CONTENT_ITEMS = 3
MIN_TOKEN_BUDGET = 128
Difficulty = Literal["intro", "core", "advanced"]
#: The request's intent as JSON spells it (the API parses strictly: a string, never an enum member).
IntentName = Literal["tutoring", "practice", "definition", "comparison", "troubleshooting"]


class Intent(StrEnum):
    TUTORING = "tutoring"
    PRACTICE = "practice"
    DEFINITION = "definition"
    COMPARISON = "comparison"
    TROUBLESHOOTING = "troubleshooting"


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopK(_In):
    lo: int = Field(default=6, ge=1, le=50, description="learning objectives returned at most")
    content: int = Field(default=6, ge=0, le=50, description="content candidates; at most 3 are returned")


class GraphDepth(_In):
    prereq: int = Field(default=1, ge=0, le=5, description="PREREQUISITE_OF edges followed back from a match")
    content: int = Field(default=1, ge=0, le=5, description="edges from a matched LO to its content")


class Constraints(_In):
    content_types: list[str] | None = Field(
        default=None, max_length=20, description="content node types allowed, e.g. Example, Exercise"
    )
    difficulty: Difficulty | list[Difficulty] | None = Field(
        default=None, description="content difficulty: one level or a list"
    )
    top_k: TopK = Field(default_factory=TopK)
    graph_depth: GraphDepth = Field(default_factory=GraphDepth)
    token_budget: int = Field(
        default=900, ge=MIN_TOKEN_BUDGET, le=8000, description="cap on the response, in embedder tokens"
    )
    timeout_ms: int = Field(default=1200, ge=1, le=60_000)

    @field_validator("content_types")
    @classmethod
    def _types(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        out = [t.strip() for t in v]
        if any(not t or len(t) > 64 for t in out):
            raise ValueError("content types are non-empty strings of at most 64 characters")
        return list(dict.fromkeys(out))

    def difficulties(self) -> list[str] | None:
        if self.difficulty is None:
            return None
        return [self.difficulty] if isinstance(self.difficulty, str) else list(dict.fromkeys(self.difficulty))


class CoachRequest(_In):
    """POST /v1/indexes/{index}/coach: seed 004's retrieval request."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    subject: str | None = Field(default=None, min_length=1, max_length=128)
    intent: IntentName | None = None
    conversation_snippet: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    constraints: Constraints = Field(default_factory=Constraints)
    seek_clarification: bool = False

    _filled = field_validator("query")(reject_blank)
    _plain = field_validator("query", "conversation_snippet")(reject_control_characters)


class MatchedLO(_Out):
    id: str
    title: str
    reason: str
    score: float


class SupportingLO(_Out):
    id: str
    title: str
    edge: Literal["PREREQUISITE_OF"] = "PREREQUISITE_OF"
    path_len: int
    score: float
    #: The prerequisite path, this LO first and the matched LO it leads to last.
    path: list[str]


class ContentItem(_Out):
    id: str
    type: str
    title: str
    for_lo: str
    score: float
    difficulty: str | None = None
    #: The item's opening sentence(s), verbatim.
    snippet: str | None = None


class CoachCitation(_Out):
    type: Literal["LO", "Content"]
    id: str


class CoachTelemetry(_Out):
    #: Milliseconds per stage that ran (seed 004: hybrid, rerank, graph, compress, ...).
    stages: dict[str, float]
    applied_filters: list[str]
    #: Stages skipped or degraded, e.g. "rerank:skipped_timeout", "hyde:timeout".
    degraded: list[str] = Field(default_factory=list)
    total_ms: float = 0.0
    #: Tokens of the response as the coach reads it (everything but telemetry).
    tokens: int = 0
    intent_source: str = "rules"
    detail: dict[str, float | int | str | bool | list[str]] = Field(default_factory=dict)


class CoachResponse(_Out):
    can_answer: bool
    needs_clarification: bool
    confidence: float
    matched_los: list[MatchedLO]
    supporting_los: list[SupportingLO]
    content_items: list[ContentItem]
    minimal_context: list[str]
    citations: list[CoachCitation]
    telemetry: CoachTelemetry
    clarification_question: str | None = None
    #: `minimal_context_sources[i]` is the id of the node `minimal_context[i]` is quoted from.
    minimal_context_sources: list[str] = Field(default_factory=list)
    intent: Intent = Intent.TUTORING
