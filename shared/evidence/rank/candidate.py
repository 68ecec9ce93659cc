"""Candidates: immutable items flowing through the ranking stages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from evidence.records import Chunk

_EMPTY: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk with the score the list is ordered by, plus each stage's score for `explain`.

    `scores` keys (those that ran): "lexical", "dense", "fused" (first stage), "rerank",
    "boosted" (seed 001's boost), "mmr" (marginal value when selected), "question_similarity"
    (follow-ups whose stored question differs from the criterion), "relevance" (the calibrated
    relevance the vrm cutoff reads when no reranker ran).
    """

    chunk: Chunk
    score: float
    first_stage_score: float
    scores: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    notes: tuple[str, ...] = ()

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.chunk.metadata

    def with_score(self, stage: str, score: float, note: str | None = None) -> Candidate:
        scores = dict(self.scores)
        scores[stage] = score
        notes = (*self.notes, note) if note else self.notes
        return replace(self, score=score, scores=MappingProxyType(scores), notes=notes)

    def with_note(self, note: str) -> Candidate:
        return replace(self, notes=(*self.notes, note))


def sort_key(c: Candidate) -> tuple[float, str]:
    """Descending score, ties broken by chunk id so order is deterministic."""
    return (-c.score, c.chunk.chunk_id)
