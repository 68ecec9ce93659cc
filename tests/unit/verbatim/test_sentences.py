"""Passage-then-sentence ranking: the passage's rank carries its sentences."""

from __future__ import annotations

import pytest

from evidence.service import EvidenceService
from evidence.verbatim.sentences import SpanRanking

INDEX = "label"


def test_sentences_come_from_the_best_passages(label_only_service: EvidenceService) -> None:
    ranked = SpanRanking(passages=3).rank(
        label_only_service.backend, INDEX, "terminal elimination half-life of ferlostatin", k=5
    )
    assert (
        ranked[0].chunk.text == "The terminal elimination half-life of ferlostatin is approximately 19 hours."
    )
    assert all(0.0 <= r.passage <= 1.0 and 0.0 <= r.sentence <= 1.0 for r in ranked)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)


def test_passage_weight_one_ranks_by_passage_only(label_only_service: EvidenceService) -> None:
    ranked = SpanRanking(passages=1, passage_weight=1.0).rank(
        label_only_service.backend, INDEX, "hemodialysis overdosage", k=50
    )
    assert len({r.chunk.document_id for r in ranked}) == 1
    assert all(r.score == 1.0 for r in ranked)
    # ties keep text order
    assert [r.chunk.char_start for r in ranked] == sorted(r.chunk.char_start for r in ranked)


def test_nothing_found_is_empty(label_only_service: EvidenceService) -> None:
    assert SpanRanking().rank(label_only_service.backend, INDEX, "zzzz qqqq", k=5) == []


@pytest.mark.parametrize(
    "kwargs", [{"passages": 0}, {"passages": 20, "first_stage_k": 10}, {"passage_weight": 1.5}]
)
def test_bad_configuration_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SpanRanking(**kwargs)  # type: ignore[arg-type]
