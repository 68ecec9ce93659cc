"""The refusal signal every profile shares (`verbatim.grounding`): it refuses evidence that lacks the
question's asked-about content, answers when it is there, and keeps `can_answer` and
`confidence` on one scale."""

from __future__ import annotations

import pytest

from evidence.rank.confidence import AnswerSignal
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.grounding import (
    DENSE_MODEL,
    HITS_REFUSAL_FLOOR,
    LEXICAL_MODEL,
    REFUSAL_FLOOR,
    Verdict,
    apply_grounding,
    concept_weights,
    grounding_confidence,
    judge,
    read_evidence,
    word_rarity,
)
from tests.unit.rank.rankkit import cand, chunk

DISPUTE = "Do disputes go to binding arbitration?"
COURTS = "Any dispute shall be heard by the courts of the State of New York; the parties waive a jury."
ARBITRATED = "Disputes go to binding arbitration under the rules of the chamber of commerce."
TERM = "What is the elimination half-life of the drug?"
PK = "Peak plasma levels are reached after 2 hours; absorption is not affected by food."
PK_HALF = "The elimination half-life is about 9 hours; peak plasma levels come after 2 hours."


def test_a_rare_word_weighs_more_than_a_common_one() -> None:
    assert word_rarity("levorphanol") == 1.0  # split into word pieces: rare
    assert word_rarity("the") == 0.0
    assert 0.0 < word_rarity("cost") < word_rarity("arbitration") <= 1.0
    q = "Is the typical dose of levorphanol lower?"
    weights = concept_weights(q, question_groups(q))
    assert weights["levorphanol"] > weights["typic"] > weights["lower"]


def test_evidence_missing_the_asked_about_slot_is_refused_and_present_is_answered() -> None:
    missing = _judge(TERM, [PK])
    present = _judge(TERM, [PK_HALF])
    assert set(missing.missing) == {"elimin", "half", "life"} and present.missing == ()
    assert missing.refused(REFUSAL_FLOOR) and missing.refused(HITS_REFUSAL_FLOOR)
    assert not present.refused(REFUSAL_FLOOR) and not present.refused(HITS_REFUSAL_FLOOR)


def test_a_missing_specific_word_weighs_more_than_a_missing_common_one() -> None:
    # "arbitration" missing (the subject of disputes is there): refused on first hits that are on
    # the topic but not close (cosine 0.25); the same evidence with the word present is answered.
    missing = _judge(DISPUTE, [COURTS], cosine=0.25)
    assert "arbitr" in missing.missing and missing.refused(HITS_REFUSAL_FLOOR)
    assert not _judge(DISPUTE, [ARBITRATED], cosine=0.25).refused(HITS_REFUSAL_FLOOR)
    # Only the common words missing: a much smaller loss than the specific one.
    common = _judge("Do disputes go to the courts?", [COURTS], cosine=0.25)
    assert common.probability > missing.probability


def test_the_cosine_moves_the_probability_only_on_a_fitted_embedder() -> None:
    lexical = _judge(TERM, [PK_HALF])
    close = _judge(TERM, [PK_HALF], cosine=0.8)
    far = _judge(TERM, [PK_HALF], cosine=0.0)
    reading = read_evidence(TERM, [PK_HALF], question_groups(TERM))
    assert lexical.probability == pytest.approx(LEXICAL_MODEL.probability(reading.features(None)))
    assert close.probability == pytest.approx(DENSE_MODEL.probability(reading.features(0.8)))
    assert far.probability < close.probability
    assert set(close.features()) == {"grounding", "answer_probability"}


def test_a_floor_of_zero_refuses_nothing() -> None:
    assert not _judge(TERM, [PK]).refused(0.0)


def test_evidence_exactly_at_the_floor_answers() -> None:
    # Where confidence lands on 0.5, `can_answer`'s bar: the floor itself is an answer.
    at = Verdict(REFUSAL_FLOOR, 0.5, None, ())
    assert not at.refused(REFUSAL_FLOOR)
    assert Verdict(REFUSAL_FLOOR - 1e-9, 0.5, None, ()).refused(REFUSAL_FLOOR)


def test_confidence_lands_on_half_exactly_at_the_floor() -> None:
    assert grounding_confidence(REFUSAL_FLOOR, REFUSAL_FLOOR) == pytest.approx(0.5)
    assert grounding_confidence(REFUSAL_FLOOR - 0.01, REFUSAL_FLOOR) < 0.5
    assert grounding_confidence(REFUSAL_FLOOR + 0.01, REFUSAL_FLOOR) > 0.5
    assert grounding_confidence(1.0, REFUSAL_FLOOR) == pytest.approx(1.0)


def _judge(question: str, texts: list[str], cosine: float | None = None) -> Verdict:
    return judge(question, texts, cosine=cosine, groups=question_groups(question))


def _apply(text: str, floor: float = HITS_REFUSAL_FLOOR) -> AnswerSignal:
    hits = [cand(chunk("c0", text), 1.0)]
    before = AnswerSignal(0.9, True, "dense", {"cosine": 0.25, "coverage": 0.8})
    return apply_grounding(DISPUTE, hits, before, floor, question_groups(DISPUTE))


def test_apply_grounding_refuses_hits_without_the_slot_and_the_verdicts_agree() -> None:
    refused = _apply(COURTS)
    assert not refused.can_answer and refused.confidence < 0.5
    assert refused.features["answer_probability"] < HITS_REFUSAL_FLOOR
    kept = _apply(ARBITRATED)
    assert kept.can_answer and kept.confidence == 0.9
    assert kept.features["answer_probability"] >= HITS_REFUSAL_FLOOR
    # Off: the features are reported, nothing is refused.
    off = _apply(COURTS, floor=0.0)
    assert off.can_answer and "grounding" in off.features
