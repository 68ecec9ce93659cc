"""The answer / clarify / decline decision built on the calibrated models."""

from __future__ import annotations

import pytest

from evidence.coach import calibration as cal
from evidence.coach.confidence import QueryFeatures, confidence, decide, in_domain, logistic, node_relevance


def _f(**kw: object) -> QueryFeatures:
    base: dict[str, object] = {"cos_max": 0.65, "coverage": 1.0, "top": 0.95, "sense_gap": 0.3, "words": 2}
    base.update(kw)
    return QueryFeatures(**base)  # type: ignore[arg-type]


def test_a_clear_in_domain_match_is_answered() -> None:
    d = decide(_f())
    assert d.mode == "answer" and d.can_answer and not d.needs_clarification
    assert d.confidence >= 0.5


def test_far_from_the_graph_is_out_of_scope() -> None:
    d = decide(_f(cos_max=0.15, coverage=0.0, top=0.01))
    assert d.mode == "out_of_scope" and not d.can_answer and not d.needs_clarification
    assert d.reasons == ["out_of_domain"]


@pytest.mark.parametrize("flag", ["vague", "unresolved_reference"])
def test_nothing_to_judge_on_means_asking_back(flag: str) -> None:
    d = decide(_f(cos_max=0.1, coverage=0.0, top=0.0, **{flag: True}))
    assert d.mode == "clarify" and flag in d.reasons and d.confidence <= 0.5


@pytest.mark.parametrize("flag", ["bare_topic", "broad", "seek_clarification"])
def test_in_domain_but_ambiguous_asks_back(flag: str) -> None:
    d = decide(_f(**{flag: True}))
    assert d.mode == "clarify" and flag in d.reasons


def test_a_near_tie_between_distinct_senses_asks_back() -> None:
    assert decide(_f(sense_gap=cal.SENSE_GAP)).reasons == ["split"]
    assert decide(_f(sense_gap=cal.SENSE_GAP + 0.01)).mode == "answer"


def test_a_conversation_that_cites_nodes_keeps_a_weak_query_in_scope() -> None:
    weak = _f(cos_max=0.2, coverage=0.2, top=0.9)
    assert decide(weak).mode == "out_of_scope"
    assert decide(_f(cos_max=0.2, coverage=0.2, top=0.9, prior=True)).mode != "out_of_scope"


def test_models_are_monotone_in_their_evidence() -> None:
    assert node_relevance(0.7, 1.0, 1.0) > node_relevance(0.7, 1.0, 0.0) > node_relevance(0.7, 0.0, 0.0)
    assert node_relevance(0.7, 0.5, 0.0) > node_relevance(0.3, 0.5, 0.0)
    assert node_relevance(None, 1.0, 1.0) == node_relevance(0.0, 1.0, 1.0)
    assert in_domain(_f(cos_max=0.6)) > in_domain(_f(cos_max=0.3))
    assert confidence(_f()) > confidence(_f(bare_topic=True))
    assert logistic((0.0, 1.0), (1000.0,)) == 1.0 and logistic((0.0, 1.0), (-1000.0,)) == 0.0


def test_a_query_naming_a_subject_is_asked_back_even_far_from_the_text() -> None:
    """Graph texts rarely say "statistics": the subject name alone must not read as out of scope."""
    d = decide(_f(cos_max=0.15, coverage=0.0, top=0.05, broad=True))
    assert d.mode == "clarify" and "broad" in d.reasons
