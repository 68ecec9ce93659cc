"""Seed 004's low-confidence playbook, as a rule: a question in the graph's domain, with nothing
ambiguous about it, is asked back (`clarify`, reason `low_confidence`) when the calibrated
confidence is below 0.5, and answered from 0.5 up (issue 24 item 5: this was caught by slow
tests only)."""

from __future__ import annotations

import pytest

from evidence.coach import calibration as cal
from evidence.coach import confidence as conf
from evidence.coach.confidence import QueryFeatures, decide

#: In the domain (in_domain well above its threshold), no ambiguity flag, one clear sense.
PLAIN = QueryFeatures(cos_max=0.65, coverage=1.0, top=0.95, sense_gap=0.3, words=2)


def test_the_threshold_is_one_half() -> None:
    assert cal.ANSWER_THRESHOLD == 0.5
    assert conf.in_domain(PLAIN) >= cal.DOMAIN_THRESHOLD and not PLAIN.ambiguous


@pytest.mark.parametrize(
    ("p_answer", "mode"), [(0.05, "clarify"), (0.4999, "clarify"), (0.5, "answer"), (0.9, "answer")]
)
def test_below_one_half_asks_back_from_one_half_answers(
    monkeypatch: pytest.MonkeyPatch, p_answer: float, mode: str
) -> None:
    monkeypatch.setattr(conf, "confidence", lambda f: p_answer)
    d = decide(PLAIN)
    assert d.mode == mode
    assert d.confidence == p_answer
    if mode == "clarify":
        assert d.reasons == ["low_confidence"]
        assert d.needs_clarification and not d.can_answer
    else:
        assert d.reasons == [] and d.can_answer


def test_a_weak_best_node_lowers_confidence_into_asking_back() -> None:
    """The calibrated models themselves: an in-domain query whose best LO is weak (and whose
    cosine and coverage are middling) is asked back."""
    weak = QueryFeatures(cos_max=0.5, coverage=0.8, top=0.0, sense_gap=0.3, words=2)
    assert conf.in_domain(weak) >= cal.DOMAIN_THRESHOLD
    assert conf.confidence(weak) < cal.ANSWER_THRESHOLD
    d = decide(weak)
    assert (d.mode, d.reasons) == ("clarify", ["low_confidence"])
    assert decide(PLAIN).mode == "answer"


def test_low_confidence_out_of_the_domain_is_out_of_scope_not_asked_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(conf, "confidence", lambda f: 0.1)
    far = QueryFeatures(cos_max=0.15, coverage=0.0, top=0.01, sense_gap=0.3, words=2)
    assert decide(far).mode == "out_of_scope"
