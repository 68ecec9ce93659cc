"""The refusal signal every profile shares (`verbatim.grounding`): it refuses evidence that lacks the
question's asked-about content, answers when it is there, and keeps `can_answer` and
`confidence` on one scale."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evidence.ingest.sections import NAME_TERMS_KEY
from evidence.rank.candidate import Candidate
from evidence.rank.confidence import AnswerSignal
from evidence.records import Chunk
from evidence.search.scoped import bind_filters
from evidence.verbatim.answer_types import answer_types
from evidence.verbatim.cascade import VerbatimCascade, question_groups
from evidence.verbatim.grounding import (
    AGREEMENT_DEPTH,
    DENSE_MODEL,
    DF_CAP,
    HITS_REFUSAL_FLOOR,
    LEXICAL_AGREEMENT,
    LEXICAL_COSINE,
    LEXICAL_MODEL,
    REFUSAL_FLOOR,
    SAFETY_NET_FLOOR,
    Verdict,
    agreement,
    apply_grounding,
    concept_weights,
    evidence_agreement,
    expected_answer_types,
    grounding_confidence,
    index_df,
    index_rarity,
    judge,
    key_concepts,
    named_concepts,
    named_word,
    passage_agreement,
    read_evidence,
    unique_concepts,
    unnamed_groups,
    word_rarity,
)
from evidence.verbatim.run_state import RunState
from evidence.verbatim.scoring import terms
from tests.unit.rank.rankkit import INDEX, cand, chunk, new_backend, vec

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


@pytest.mark.parametrize("hyphen", ["\u2010", "\u2011", "\u00ad"])
def test_a_word_joined_by_a_unicode_hyphen_reads_as_with_a_hyphen_minus(hyphen: str) -> None:
    # PDFs and HTML write "non\u2010opioid" (or a soft hyphen inside a word): the tokenizer splits it
    # as it splits "non-opioid", and its rarity is the compound's, not that of its parts read alone
    # ("non" is common English, the compound is not).
    q = "Is the non-opioid dose lower?"
    other = q.replace("-", hyphen)
    assert terms(other) == terms(q)
    assert concept_weights(other, question_groups(other)) == concept_weights(q, question_groups(q))


def test_evidence_missing_the_asked_about_slot_is_refused_and_present_is_answered() -> None:
    missing = _judge(TERM, [PK])
    present = _judge(TERM, [PK_HALF])
    assert set(missing.missing) == {"elimin", "half", "life"} and present.missing == ()
    assert missing.refused(SAFETY_NET_FLOOR) and missing.refused(HITS_REFUSAL_FLOOR)
    assert not present.refused(SAFETY_NET_FLOOR) and not present.refused(HITS_REFUSAL_FLOOR)


def test_a_missing_specific_word_weighs_more_than_a_missing_common_one() -> None:
    # "arbitration" missing (the subject of disputes is there): refused as the safety net's evidence
    # far from the question (cosine 0.1, the rankings disagreeing); the same evidence with the
    # word present is answered.
    missing = _judge(DISPUTE, [COURTS], cosine=0.1, agreement=0.0)
    assert "arbitr" in missing.missing and missing.refused(SAFETY_NET_FLOOR)
    assert not _judge(DISPUTE, [ARBITRATED], cosine=0.1, agreement=0.0).refused(SAFETY_NET_FLOOR)
    # Only the common words missing: a much smaller loss than the specific one.
    common = _judge("Do disputes go to the courts?", [COURTS], cosine=0.1, agreement=0.0)
    assert common.probability > missing.probability


def test_the_cosine_moves_the_probability_only_on_a_fitted_embedder() -> None:
    lexical = _judge(TERM, [PK_HALF])
    close = _judge(TERM, [PK_HALF], cosine=0.8)
    far = _judge(TERM, [PK_HALF], cosine=0.0)
    reading = read_evidence(TERM, [PK_HALF], question_groups(TERM))
    assert lexical.probability == pytest.approx(LEXICAL_MODEL.probability(reading.features(None)))
    # No agreement read (the backend could not rank): the dense model with it fixed.
    unread = {**reading.features(0.8), "agreement": LEXICAL_AGREEMENT}
    assert close.probability == pytest.approx(DENSE_MODEL.probability(unread))
    assert far.probability < close.probability
    assert set(close.features()) == {"grounding", "answer_probability"}
    # A lexical index reads no agreement even when one is given: the lexical model.
    assert judge(
        TERM, [PK_HALF], cosine=None, groups=question_groups(TERM), agreement=1.0
    ).probability == pytest.approx(lexical.probability)


def test_the_rankings_agreeing_on_the_evidence_raise_the_probability() -> None:
    # The dense and BM25 rankings put the same passage first: more likely an answer than when the
    # embedder's first passage is not among BM25's (unanswerable questions scatter them).
    groups = question_groups(TERM)
    agree = judge(TERM, [PK_HALF], cosine=0.5, groups=groups, agreement=1.0)
    scatter = judge(TERM, [PK_HALF], cosine=0.5, groups=groups, agreement=0.0)
    assert agree.probability > scatter.probability
    assert agree.features()["agreement"] == 1.0
    assert DENSE_MODEL.coefficients["agreement"] > 0


def test_a_floor_of_zero_refuses_nothing() -> None:
    assert not _judge(TERM, [PK]).refused(0.0)


def test_evidence_exactly_at_the_floor_answers() -> None:
    # Where confidence lands on 0.5, `can_answer`'s bar: the floor itself is an answer.
    at = Verdict(SAFETY_NET_FLOOR, 0.5, None, ())
    assert not at.refused(SAFETY_NET_FLOOR)
    assert Verdict(SAFETY_NET_FLOOR - 1e-9, 0.5, None, ()).refused(SAFETY_NET_FLOOR)


def test_confidence_lands_on_half_exactly_at_the_floor() -> None:
    for floor in (REFUSAL_FLOOR, SAFETY_NET_FLOOR, HITS_REFUSAL_FLOOR):
        assert grounding_confidence(floor, floor) == pytest.approx(0.5)
        assert grounding_confidence(floor - 0.01, floor) < 0.5
        assert grounding_confidence(floor + 0.01, floor) > 0.5
        assert grounding_confidence(1.0, floor) == pytest.approx(1.0)


def _judge(
    question: str, texts: list[str], cosine: float | None = None, agreement: float | None = None
) -> Verdict:
    return judge(question, texts, cosine=cosine, groups=question_groups(question), agreement=agreement)


def _apply(text: str, floor: float = HITS_REFUSAL_FLOOR) -> AnswerSignal:
    hits = [cand(chunk("c0", text), 1.0)]
    before = AnswerSignal(0.9, True, "dense", {"cosine": 0.1, "coverage": 0.8})
    # The rankings disagree on where the answer is (a ranker reading agreement 0).
    return apply_grounding(DISPUTE, hits, before, floor, question_groups(DISPUTE), ranker=lambda _: 0.0)


def test_apply_grounding_refuses_hits_without_the_slot_and_the_verdicts_agree() -> None:
    refused = _apply(COURTS, floor=SAFETY_NET_FLOOR)
    assert not refused.can_answer and refused.confidence < 0.5
    assert refused.features["answer_probability"] < SAFETY_NET_FLOOR
    kept = _apply(ARBITRATED)
    assert kept.can_answer and kept.confidence == 0.9
    assert kept.features["answer_probability"] >= HITS_REFUSAL_FLOOR
    # Off: the features are reported, nothing is refused.
    off = _apply(COURTS, floor=0.0)
    assert off.can_answer and "grounding" in off.features


NAMED = "Is Zentrix approved for migraine?"


def _named_hit(cid: str, text: str, names: list[str]) -> Candidate:
    return cand(chunk(cid, text, meta={NAME_TERMS_KEY: names}), 1.0)


def test_the_hits_shared_document_name_is_no_concept() -> None:
    # Every hit comes from the document the question names: its name is in each hit's title, so it
    # grounds nothing; what is asked ("migraine") is all that counts, as in the verbatim cascade.
    hits = [_named_hit("a", "Zentrix lowers blood pressure.", ["zentrix", "tablets"])] * 3
    assert unnamed_groups(NAMED, question_groups(NAMED), hits) == [("approv",), ("migrain",)]
    refused = apply_grounding(
        NAMED, hits, AnswerSignal(0.9, True, "dense", {"cosine": 0.5}), 0.3, question_groups(NAMED)
    )
    assert refused.features["grounding"] == 0.0
    # A name only one hit's document has (a title among several abstracts) is content: kept.
    mixed = [hits[0], _named_hit("b", "Migraine prevention.", ["migraine", "prevention"])]
    assert ("zentrix",) in unnamed_groups(NAMED, question_groups(NAMED), mixed)


def test_the_lexical_model_is_the_dense_one_at_a_fixed_cosine_and_agreement() -> None:
    features = {"grounding": 0.4, "typed_key": 1.0}
    assert "cosine" not in LEXICAL_MODEL.coefficients and "agreement" not in LEXICAL_MODEL.coefficients
    assert LEXICAL_MODEL.probability(features) == pytest.approx(
        DENSE_MODEL.probability({**features, "cosine": LEXICAL_COSINE, "agreement": LEXICAL_AGREEMENT})
    )


def _at(cid: str, text: str, start: int, doc: str = "d") -> Chunk:
    return replace(chunk(cid, text, doc=doc), char_start=start, char_end=start + len(text))


def test_agreement_is_the_bm25_rank_of_the_embedders_first_passage() -> None:
    first = _at("a", "dose and half-life", 0)
    window = _at("a2", "half-life and the next window", 10)  # overlaps `first`: the same place
    other = _at("b", "storage", 200)
    elsewhere = _at("c", "dose and half-life", 0, doc="e")  # same offsets, another document
    assert agreement([first], [first, other]) == 1.0
    assert agreement([first], [other, window]) == pytest.approx(0.5)
    assert agreement([first], [elsewhere, other]) == 0.0
    assert agreement([], [first]) == 0.0
    assert agreement([first], [other] * AGREEMENT_DEPTH + [first]) == 0.0  # past the depth


def test_passage_agreement_reads_both_rankings_within_the_documents(tmp_path: Path) -> None:
    passages = [
        _at("p1", "The elimination half-life is about 9 hours.", 0),
        _at("p2", "Store below 25 degrees in the original package.", 100),
        _at("p3", "Peak plasma levels come after 2 hours.", 200),
        _at("q1", "The elimination half-life of another product.", 0, doc="other"),
    ]
    backend = new_backend(tmp_path / "s", passages)
    try:
        # The embedder's first passage (the query vector is p1's) is BM25's first too: 1.
        assert passage_agreement(backend, INDEX, TERM, vec(passages[0].text), ["d"]) == 1.0
        # The embedder points at the storage passage, BM25 at the half-life one: they disagree.
        assert passage_agreement(backend, INDEX, TERM, vec(passages[1].text), ["d"]) == 0.0
        # Another document only: its own passages, not `d`'s.
        assert passage_agreement(backend, INDEX, TERM, vec(passages[0].text), ["other"]) == 1.0
        # Nothing to rank: not read.
        assert passage_agreement(backend, INDEX, TERM, None, ["d"]) is None
        assert passage_agreement(backend, INDEX, TERM, vec(passages[0].text), []) is None
        assert passage_agreement(backend, "no-such-index", TERM, vec(passages[0].text), ["d"]) is None
    finally:
        backend.close()


def test_evidence_agreement_is_read_only_with_a_cosine_once_per_document() -> None:
    asked: list[list[str]] = []

    def ranker(documents: Sequence[str]) -> float:
        asked.append(list(documents))
        return 0.5

    assert evidence_agreement(0.4, ["b", "a", "b"], ranker) == 0.5
    assert asked == [["b", "a"]]
    # Without a cosine the lexical model reads no agreement: the rankings are not even run.
    assert evidence_agreement(None, ["a"], ranker) is None
    assert evidence_agreement(0.4, ["a"], None) is None
    assert asked == [["b", "a"]]


# The expected answer type (the lexicon, data/answer_types.json): general examples, none from the
# QA suite.
KINDS = [
    # (kind, question, a span that reads as that kind, a span on the topic that does not)
    (
        "money",
        "What is the price of a replacement filter?",
        "A replacement filter is $19.99.",
        "Filters are sold separately.",
    ),
    (
        "duration",
        "How long does the battery last?",
        "The battery lasts up to 12 hours.",
        "It lasts longer in eco mode.",
    ),
    (
        "frequency",
        "How often should the filter be replaced?",
        "Replace it every three months.",
        "Replace it when dirty.",
    ),
    (
        "dose",
        "What dose of amoxicillin treats otitis media?",
        "The usual dose is 500 mg.",
        "It treats otitis media.",
    ),
    (
        "count",
        "How many nodes does a quorum need?",
        "A quorum needs three nodes.",
        "A quorum needs a majority.",
    ),
    (
        "jurisdiction",
        "Which state's law governs this agreement?",
        "It is governed by the laws of the State of Delaware.",
        "It is governed by applicable law.",
    ),
    (
        "proportion",
        "What interest rate applies to overdue invoices?",
        "They bear 1.5% per month.",
        "They bear interest.",
    ),
    (
        "date",
        "What is the effective date of the policy?",
        "It is effective January 1, 2024.",
        "It is effective on signing.",
    ),
    (
        "limit",
        "What is the maximum upload size?",
        "The maximum upload size is 50 MB.",
        "Larger uploads are rejected.",
    ),
]


@pytest.mark.parametrize(("kind", "question", "reads", "does_not"), KINDS, ids=[k[0] for k in KINDS])
def test_the_lexicon_reads_each_kind_of_answer(kind: str, question: str, reads: str, does_not: str) -> None:
    assert kind in expected_answer_types(question)
    (wanted,) = (t for t in answer_types().types if t.name == kind)
    assert wanted.reads_in(reads) and not wanted.reads_in(does_not)


def test_a_yes_no_question_expects_no_kind_of_answer() -> None:
    assert set(expected_answer_types("What is the maximum upload size?")) == {"limit", "size"}
    assert expected_answer_types("Is the maximum upload size configurable?") == ()


def test_a_form_of_answer_is_not_a_value_the_evidence_must_hold() -> None:
    # "why" asks for a reason, a form marked by "because"/"due to": it ranks spans (the span
    # scorer) but most evidence carries such words, so the refusal signal does not expect it.
    assert [t.name for t in answer_types().asked("Why do uploads fail?")] == ["reason"]
    assert expected_answer_types("Why do uploads fail?") == ()


PRICE = "How much does the premium support plan cost?"
ELSEWHERE = [
    "The premium support plan includes phone support and on-site visits.",
    "Training costs $400 a seat.",
]
TOGETHER = [
    "The premium support plan costs $1,200 a year and includes phone support.",
    "Training costs $400 a seat.",
]


def test_a_price_is_an_answer_only_in_the_span_that_holds_the_key_concept() -> None:
    # Every concept of the question is carried, and a currency amount is there: but for another
    # thing. The typed key lowers the probability; the same evidence with the plan's own price
    # answers.
    elsewhere = _judge(PRICE, ELSEWHERE, cosine=0.3, agreement=0.0)
    together = _judge(PRICE, TOGETHER, cosine=0.3, agreement=0.0)
    groups = question_groups(PRICE)
    assert read_evidence(PRICE, ELSEWHERE, groups).grounding == 1.0
    assert read_evidence(PRICE, ELSEWHERE, groups).typed_key == 0.0
    assert read_evidence(PRICE, TOGETHER, groups).typed_key == 1.0
    assert elsewhere.probability < together.probability - 0.1
    assert not together.refused(SAFETY_NET_FLOOR) and not together.refused(HITS_REFUSAL_FLOOR)
    # Once the evidence reads further from the question, the safety net refuses the price
    # elsewhere and keeps the plan's own price. (Fitted on 19 families the typed key weighs 0.50,
    # not 0.91 + 0.32 with the typed rarest: the first hits' floor no longer refuses a fully
    # grounded price elsewhere on the typed key alone, docs/verbatim.md#refusal-nineteen.)
    far = _judge(PRICE, ELSEWHERE, cosine=0.1, agreement=0.0)
    far_together = _judge(PRICE, TOGETHER, cosine=0.1, agreement=0.0)
    assert far.refused(SAFETY_NET_FLOOR) and not far_together.refused(SAFETY_NET_FLOOR)
    assert not far_together.refused(HITS_REFUSAL_FLOOR) and far.probability < far_together.probability - 0.1
    assert "typed_key" in DENSE_MODEL.coefficients and "typed_key" in LEXICAL_MODEL.coefficients


def test_a_question_without_an_expected_kind_is_not_held_to_one() -> None:
    reading = read_evidence(DISPUTE, [ARBITRATED], question_groups(DISPUTE))
    assert reading.answer_type == 1.0 and reading.typed_key == 1.0


def test_a_heading_number_is_no_answer() -> None:
    # "4.2.1." numbers the section: read against the span's body, the count is missing.
    q = "How many replicas does the cluster keep?"
    text, body = (
        "4.2.1. Replicas The cluster keeps replicas on separate nodes.",
        "The cluster keeps replicas on separate nodes.",
    )
    groups = question_groups(q)
    assert read_evidence(q, [text], groups).typed_key == 1.0
    assert read_evidence(q, [text], groups, bodies=[body]).typed_key == 0.0
    assert (
        read_evidence(
            q, [text.replace("separate", "three separate")], groups, bodies=[body + " three"]
        ).typed_key
        == 1.0
    )


def test_a_concept_given_by_the_path_counts_in_every_span() -> None:
    # ATTRIBUTE_LOOKUP matched "half-life": the spans carry it even when their words do not.
    q = "What is the elimination half-life?"
    groups = question_groups(q)
    assert read_evidence(q, ["Mean value: 9 hours."], groups).typed_key == 0.0
    given = read_evidence(q, ["Elimination: mean value 9 hours."], groups, given=["half life"])
    assert given.typed_key == 1.0 and given.grounding == 1.0


def test_the_word_asking_for_the_kind_is_not_the_key_concept() -> None:
    # "royalty" asks for an amount (its heaviest word): the amount answers it, the word need not
    # be there; the key concept is the heaviest of the others.
    q = "What is the royalty on each unit sold?"
    reading = read_evidence(q, ["Each unit sold pays $2."], question_groups(q))
    assert reading.missing == ("royalti",) and reading.typed_key == 1.0
    assert read_evidence(q, ["Each unit sold is shipped."], question_groups(q)).typed_key == 0.0


def test_key_concepts_are_the_subjects_heaviest_in_english_and_rarest_in_the_index() -> None:
    """One reading of the key concepts (`key_concepts`) serves `read_evidence` and the bench's
    key-term ablation (bench/refusal_rows.py)."""
    q = "What is the maximum dose of naloxone?"
    groups = question_groups(q)
    concepts, weights = unique_concepts(groups), concept_weights(q, groups)
    types = answer_types().expected(q)
    (maximum,) = [c for c in concepts if c == tuple(terms("maximum"))]
    (naloxone,) = [c for c in concepts if c == tuple(terms("naloxone"))]
    (dose,) = [c for c in concepts if c not in (maximum, naloxone)]
    # "maximum" asks for the kind of answer (a limit): never a key, however rare.
    df = {maximum[0]: 0, naloxone[0]: 30, dose[0]: 1}
    keys = key_concepts(q, concepts, weights, types, df)
    assert keys.key == [naloxone] and keys.rarest == [dose]
    # Without passage counts the index-rarest concept is not read; ties keep every concept.
    assert key_concepts(q, concepts, weights, types).rarest is None
    tied = key_concepts(q, concepts, weights, types, {})
    assert tied.rarest == [naloxone, dose]
    # A question whose every concept asks for the kind of answer has no key.
    only = key_concepts(q, [maximum], weights, types, df)
    assert only.key == [] and only.rarest == []
    # read_evidence reads the same key: the figure must stand next to naloxone.
    assert read_evidence(q, ["The maximum dose of naloxone is 10 mg."], groups).typed_key == 1.0
    assert read_evidence(q, ["The maximum dose is 10 mg."], groups).typed_key == 0.0


def test_apply_grounding_reads_the_agreement_over_the_first_hits_documents() -> None:
    hits = [cand(chunk(f"c{i}", ARBITRATED, doc=f"d{i % 2}"), 1.0) for i in range(5)]
    asked: list[list[str]] = []

    def ranker(documents: Sequence[str]) -> float:
        asked.append(list(documents))
        return 0.0

    dense = AnswerSignal(0.9, True, "dense", {"cosine": 0.5, "coverage": 0.8})
    scattered = apply_grounding(DISPUTE, hits, dense, 0.0, question_groups(DISPUTE), ranker=ranker)
    agreed = apply_grounding(DISPUTE, hits, dense, 0.0, question_groups(DISPUTE), ranker=lambda _: 1.0)
    assert asked == [["d0", "d1"]]  # the first HEAD hits' documents, once each
    assert scattered.features["agreement"] == 0.0 and agreed.features["agreement"] == 1.0
    assert agreed.features["answer_probability"] > scattered.features["answer_probability"]
    # No calibrated cosine (a lexical basis): the agreement is not read.
    lexical = AnswerSignal(0.9, True, "lexical", {"coverage": 0.8})
    apply_grounding(DISPUTE, hits, lexical, 0.0, question_groups(DISPUTE), ranker=ranker)
    assert len(asked) == 1


# The index features: what the documents asked use of the question's words (`index_df`).
LIMIT_Q = "What is the maximum number of arguments ffi_call can pass?"
LIMIT_GROUPS = [("maximum",), ("number",), ("argument",), ("ffi_call",), ("pass",)]
#: ffi_call and arguments are everywhere in the manual; "maximum" nowhere, "number" rarely.
LIMIT_DF = {"maximum": 0, "number": 5, "argument": 60, "ffi_call": 50, "pass": 30}
ABOUT = "Use ffi_call to call a function; it passes the arguments you prepared."


def test_index_rarity_reads_how_few_passages_use_a_concept() -> None:
    assert index_rarity(("maximum",), LIMIT_DF) == 1.0  # no passage uses it
    assert index_rarity(("ffi_call",), LIMIT_DF) == 0.0  # DF_CAP passages or more
    assert index_rarity(("argument",), LIMIT_DF) == 0.0
    assert index_rarity(("number",), LIMIT_DF) == pytest.approx(1 - 5 / DF_CAP)
    # A concept of alternatives is as common as its most used term; an unknown term is unused.
    assert index_rarity(("number", "pass"), LIMIT_DF) == pytest.approx(1 - 30 / DF_CAP)
    assert index_rarity(("unseen",), LIMIT_DF) == 1.0


def test_the_qualifier_rare_in_the_index_weighs_more_than_the_subject() -> None:
    # The evidence carries the subject (ffi_call, arguments, pass) but not the qualifier.
    r = read_evidence(LIMIT_Q, [ABOUT], LIMIT_GROUPS, df=LIMIT_DF)
    # English rarity: ffi_call is the heaviest word and it is carried, so grounding stays high;
    # index rarity: "maximum" and "number" are the heavy ones and neither is carried.
    assert r.grounding > 0.6
    weights = {"maximum": 1.1, "number": 0.1 + 0.9, "argument": 0.1, "ffi_call": 0.1, "pass": 0.1 + 0.4}
    assert r.index_grounding == pytest.approx((0.1 + 0.1 + 0.5) / sum(weights.values()))
    assert r.index_absent == 1.0  # "maximum": no passage of the index uses it
    assert r.rarest_carried == 0.0
    # The same evidence stating the limit next to the word: every index feature reads it carried.
    stated = read_evidence(LIMIT_Q, [ABOUT + " The maximum number is 64."], LIMIT_GROUPS, df=LIMIT_DF)
    assert stated.index_grounding == 1.0
    assert stated.rarest_carried == 1.0
    assert stated.index_absent == 1.0  # the index still has no such passage: read from df alone


def test_without_passage_counts_the_index_features_read_nothing_missing() -> None:
    r = read_evidence(LIMIT_Q, [ABOUT], LIMIT_GROUPS)
    # Without counts the typed key is read as it is (the English-heaviest key concept).
    assert (r.index_grounding, r.index_absent, r.rarest_carried) == (1.0, 0.0, 1.0)
    assert r.typed_rarest == r.typed_key
    used = {t: DF_CAP for g in LIMIT_GROUPS for t in g}
    r = read_evidence(LIMIT_Q, [ABOUT], LIMIT_GROUPS, df=used)
    assert r.index_absent == 0.0


def test_the_typed_key_read_with_index_rarity_wants_the_qualifier_next_to_the_value() -> None:
    q = "How many days does a package with a release-critical bug have before it is autoremoved?"
    groups = question_groups(q)
    df = {t: DF_CAP for g in groups for t in g} | {"autoremov": 1}
    # A number next to the subject ("package", "bug"), none next to the rare "autoremoved".
    elsewhere = "A package with a release-critical bug is reviewed within 10 days."
    r = read_evidence(q, [elsewhere, "Packages are autoremoved from testing."], groups, df=df)
    assert r.typed_key == 1.0  # the English-heaviest subject word stands next to a figure
    assert r.typed_rarest == 0.0  # the index-rarest one does not
    r = read_evidence(q, ["Packages are autoremoved after 30 days."], groups, df=df)
    assert r.typed_rarest == 1.0
    # A question expecting no kind of value is not held to one.
    yes_no = "Is a package with a release-critical bug autoremoved?"
    g2 = question_groups(yes_no)
    assert read_evidence(yes_no, [elsewhere], g2, df={t: 1 for g in g2 for t in g}).typed_rarest == 1.0


def test_index_df_counts_passages_up_to_the_cap(tmp_path: Path) -> None:
    passages = [_at(f"p{i}", f"The elimination half-life is {i} hours.", 100 * i) for i in range(3)]
    passages.append(_at("s", "Store below 25 degrees.", 900))
    backend = new_backend(tmp_path / "s", passages)
    try:
        df = index_df(backend, INDEX, ["elimin", "store", "ketamin"])
        assert df == {"elimin": 3, "store": 1, "ketamin": 0}
        # A stem the analyser would cut again ("hour" is fine, "degre" → "degr") is asked as the
        # question's word that analyses to it.
        assert index_df(backend, INDEX, ["degre"], "Keep below 25 degrees?") == {"degre": 1}
        assert index_df(backend, "no-such-index", ["store"]) is None
        # The request's filters are the view's, never a parameter of its own to forget.
        assert index_df(bind_filters(backend, {"chunk_id": ["s", "p0"]}), INDEX, ["elimin", "store"]) == {
            "elimin": 1,
            "store": 1,
        }
        with pytest.raises(TypeError):
            index_df(backend, INDEX, ["store"], "", {"document_id": "s"})  # type: ignore[call-arg]
    finally:
        backend.close()


def test_index_df_asks_each_part_of_a_compound_word_as_its_own_word(tmp_path: Path) -> None:
    # "AGPL-licensed" analyses to two terms; the stem "licens" asked alone is cut again ("licen")
    # and read as used by no passage, so each part is asked as the question's own part.
    passages = [_at("a", "Code licensed under the Affero terms.", 0), _at("b", "A one-line summary.", 100)]
    backend = new_backend(tmp_path / "s", passages)
    try:
        q = "Can AGPL-licensed code have a one-line description?"
        assert index_df(backend, INDEX, ["agpl", "licens", "on", "line"], q) == {
            "agpl": 0,
            "licens": 1,
            "on": 1,
            "line": 1,
        }
    finally:
        backend.close()


def test_index_df_asks_a_term_by_a_word_the_backend_reads_as_that_term_alone(tmp_path: Path) -> None:
    # "in-house" analyses to "hous" alone (the stem asked alone is cut again: "hou"), but the
    # backend also asks a compound joined ("inhouse", `with_joined_compounds`): asked as the
    # question's word, the passage that writes "Inhouse" would count as one using "hous". Its
    # part "house" is asked instead.
    passages = [_at("a", "Our house rules.", 0), _at("b", "Inhouse counsel reviews it.", 100)]
    backend = new_backend(tmp_path / "s", passages)
    try:
        assert terms("in-house") == ("hous",) and terms("hous") != ("hous",)
        assert index_df(backend, INDEX, ["hous", "counsel"], "Is in-house counsel needed?") == {
            "hous": 1,
            "counsel": 1,
        }
    finally:
        backend.close()


def test_index_df_reads_words_and_compound_parts_in_any_script(tmp_path: Path) -> None:
    # "naïveBayes" is one term to the analyser ("naïvebay"), which it cuts again when asked alone
    # ("naïvebai"): it is asked as the question's own word, whole, not as "na" and "veBayes";
    # in a compound ("naïveBayes-style") as its own part.
    passages = [_at("a", "Train a naïveBayes model per class.", 0), _at("b", "A style guide.", 100)]
    backend = new_backend(tmp_path / "s", passages)
    try:
        assert terms("naïveBayes") == ("naïvebay",)
        assert index_df(backend, INDEX, ["naïvebay", "model"], "Is naïveBayes a model?") == {
            "naïvebay": 1,
            "model": 1,
        }
        q = "Which naïveBayes-style classifiers are there?"
        assert index_df(backend, INDEX, ["naïvebay", "style"], q) == {"naïvebay": 1, "style": 1}
    finally:
        backend.close()


def test_a_cascade_run_counts_each_term_in_the_index_once(tmp_path: Path) -> None:
    # The cascade judges several paths' evidence for one question: each term is asked of the
    # index once, and a backend that cannot rank leaves nothing half-read behind.
    passages = [_at(f"p{i}", f"The elimination half-life is {i} hours.", 100 * i) for i in range(3)]
    passages.append(_at("s", "Store below 25 degrees.", 900))
    backend = new_backend(tmp_path / "s", passages)
    asked: list[str] = []

    class Counting:
        def term_counts(self, index: str, texts: Sequence[str], **kw: Any) -> Any:
            asked.extend(texts)
            return backend.term_counts(index, texts, **kw)

    def run(index: str) -> RunState:
        question = "What is the elimination half-life?"
        return RunState(
            VerbatimCascade(),
            backend=Counting(),  # type: ignore[arg-type]
            index=index,
            question=question,
            plan=SimpleNamespace(search_phrases=[]),
            scope=None,
            q_groups=question_groups(question),
            query_vector=None,
        )

    try:
        state = run(INDEX)
        assert state.index_df(["elimin", "store"]) == {"elimin": 3, "store": 1}
        assert state.index_df(["store", "ketamin", "store"]) == {"store": 1, "ketamin": 0}
        assert asked == ["elimin", "store", "ketamin"]
        missing = run("no-such-index")
        assert missing.index_df(["store"]) is None and missing.index_df(["store"]) is None
        assert asked[3:] == ["store", "store"]
    finally:
        backend.close()


def test_apply_grounding_counts_the_questions_terms_in_the_index() -> None:
    asked: list[list[str]] = []
    q = "How many days does a package with a release-critical bug have before it is autoremoved?"
    groups = question_groups(q)

    def rare(words: Sequence[str]) -> dict[str, int]:
        asked.append(list(words))
        return {w: 1 if w == "autoremov" else DF_CAP for w in words}

    hits = [cand(chunk("a", "A package with a release-critical bug is reviewed within 10 days."), 1.0)]
    signal = AnswerSignal(0.9, True, "lexical", {})
    out = apply_grounding(q, hits, signal, 0.0, groups, counter=rare)
    assert asked and set(asked[0]) == {t for g in groups for t in g}
    # The counts reach the model: the figure stands next to the subject, not next to the word
    # the index uses least, so the typed key read with the index's rarity fails.
    common = apply_grounding(q, hits, signal, 0.0, groups, counter=lambda ws: dict.fromkeys(ws, DF_CAP))
    assert DENSE_MODEL.coefficients["typed_rarest"] > 0
    assert out.features["answer_probability"] < common.features["answer_probability"]


#: A question naming something the documents never talk about: "XPath" is rare in English and no
#: passage of the index uses it; the evidence is about the parser and its documents.
XPATH_Q = "Can the parser run XPath queries on a document?"
PARSER = "The parser reads a document and calls your handler for each element."


def test_absent_rare_is_the_rarest_concept_neither_the_evidence_nor_the_index_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A reading for bench/refusal_fit.py --features (measured in session 41, and in session 42 with
    # variants read as present, not in DENSE_MODEL: docs/verbatim.md#refusal-absent-rare,
    # #refusal-abbreviations; the presence test in test_variants.py).
    import evidence.verbatim.grounding as rg

    monkeypatch.setattr(rg, "READ_RARE", True)  # as the bench scripts read it
    groups = question_groups(XPATH_Q)
    weights = concept_weights(XPATH_Q, groups)
    used = {t: DF_CAP for g in groups for t in g}
    absent = used | {"xpath": 0}
    r = read_evidence(XPATH_Q, [PARSER], groups, df=absent)
    assert "xpath" in r.missing
    assert r.absent_rare == pytest.approx(weights["xpath"] - 0.1) and r.absent_rare > 0.9
    assert r.features(0.5)["absent_rare"] == r.absent_rare
    # The index uses it somewhere (a ranking miss, not an absent fact): nothing is read.
    assert read_evidence(XPATH_Q, [PARSER], groups, df=used | {"xpath": 3}).absent_rare == 0.0
    # Counts of 0 for a concept the evidence holds (an analyser mismatch, a heading) read nothing.
    held = read_evidence(XPATH_Q, [PARSER + " XPath is not supported."], groups, df=absent)
    assert held.absent_rare == 0.0
    # Without passage counts it is not read.
    assert read_evidence(XPATH_Q, [PARSER], groups).absent_rare == 0.0
    # A common word no passage writes (a paraphrase, most often) weighs little.
    plain = "Can the parser find a word in a document for me?"
    pg = question_groups(plain)
    common = read_evidence(plain, [PARSER], pg, df={t: DF_CAP for g in pg for t in g} | {"find": 0})
    assert "find" in common.missing and 0 < common.absent_rare < 0.2
    # Not in the shipped model: reading it changes no verdict.
    assert "absent_rare" not in DENSE_MODEL.coefficients


@pytest.mark.parametrize(
    ("word", "first", "named"),
    [
        ("XPath", False, True),  # a capital inside
        ("PKCE", False, True),
        ("RISC-V", False, True),
        ("ICD-10", False, True),
        ("fido2", False, True),  # a digit
        ("levorphanol", False, False),  # split by the WordPiece vocabulary: only NAMED_SPLIT_WORDS
        ("employ", False, False),  # ordinary English words, whatever the documents call them
        ("lowest", False, False),
        ("breach", False, False),
        ("Can", True, False),  # the question's first word: its capital is the sentence's
        ("Employ", True, False),
        ("XPath", True, True),
    ],
)
def test_a_word_written_as_a_name_or_a_code(word: str, first: bool, named: bool) -> None:
    assert named_word(word, first) is named


def test_a_split_word_is_a_name_only_with_named_split_words(monkeypatch: pytest.MonkeyPatch) -> None:
    # Candidate 6 of bench/data/session45/ref17.md read split words as names; it refused
    # "placeholders", "login", "statuses": ordinary words the vocabulary splits.
    import evidence.verbatim.grounding as rg

    assert not named_word("placeholders")
    monkeypatch.setattr(rg, "NAMED_SPLIT_WORDS", True)
    assert named_word("placeholders") and named_word("levorphanol")


def test_absent_named_is_an_absent_concept_the_question_writes_as_a_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `absent_named` (session 45, bench/data/session45/ref17.md): absent as `absent_rare` reads it
    # (no evidence text, no passage of the index, no variant) and written as a name or a code.
    import evidence.verbatim.grounding as rg

    monkeypatch.setattr(rg, "READ_NAMED", True)  # as the bench scripts read it
    monkeypatch.setattr(rg, "READ_RARE", True)
    groups = question_groups(XPATH_Q)
    used = {t: DF_CAP for g in groups for t in g}
    assert read_evidence(XPATH_Q, [PARSER], groups, df=used | {"xpath": 0}).absent_named == 1.0
    # The index uses it somewhere, or the evidence holds it: not absent.
    assert read_evidence(XPATH_Q, [PARSER], groups, df=used | {"xpath": 3}).absent_named == 0.0
    held = read_evidence(XPATH_Q, [PARSER + " XPath is not supported."], groups, df=used | {"xpath": 0})
    assert held.absent_named == 0.0
    # Without passage counts it is not read.
    assert read_evidence(XPATH_Q, [PARSER], groups).absent_named == 0.0
    # An ordinary English word no passage writes (a paraphrase, most often) is not a name.
    plain = "Can the parser employ a handler for each element?"
    pg = question_groups(plain)
    absent = {t: DF_CAP for g in pg for t in g} | dict.fromkeys(terms("employ"), 0)
    r = read_evidence(plain, [PARSER], pg, df=absent)
    assert r.absent_rare > 0 and r.absent_named == 0.0
    assert named_concepts(plain, [tuple(terms("employ"))]) == []
    assert named_concepts(XPATH_Q, [("xpath",)]) == [("xpath",)]
    # Measured, not in the shipped model (bench/data/session45/ref17.md): reading it changes no verdict.
    assert "absent_named" not in DENSE_MODEL.coefficients


def test_absent_named_costs_nothing_while_the_model_does_not_read_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shipped model has no `absent_named` coefficient: `read_evidence` must not look for absent
    # names on every question only to drop the reading (`READ_NAMED`).
    import evidence.verbatim.grounding as rg

    assert rg.READ_NAMED is ("absent_named" in DENSE_MODEL.coefficients)
    monkeypatch.setattr(rg, "READ_NAMED", False)
    monkeypatch.setattr(rg, "READ_RARE", True)

    def never(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("named_concepts read while the model does not read absent_named")

    monkeypatch.setattr(rg, "named_concepts", never)
    groups = question_groups(XPATH_Q)
    used = {t: DF_CAP for g in groups for t in g}
    r = read_evidence(XPATH_Q, [PARSER], groups, df=used | {"xpath": 0})
    assert r.absent_named == 0.0 and r.absent_rare > 0


def test_absent_rare_costs_nothing_while_the_model_does_not_read_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shipped model has no `absent_rare` coefficient either: while neither it nor `absent_named`
    # is read, `read_evidence` looks for no absent concept (`READ_RARE`), and the verdict is the same.
    import evidence.verbatim.grounding as rg

    assert rg.READ_RARE is ("absent_rare" in DENSE_MODEL.coefficients)
    groups = question_groups(XPATH_Q)
    df = {t: DF_CAP for g in groups for t in g} | {"xpath": 0}
    monkeypatch.setattr(rg, "READ_NAMED", False)
    monkeypatch.setattr(rg, "READ_RARE", True)
    read = read_evidence(XPATH_Q, [PARSER], groups, df=df)
    assert read.absent_rare > 0.9
    monkeypatch.setattr(rg, "READ_RARE", False)

    def never(*_a: Any, **_k: Any) -> Any:
        raise AssertionError(
            "absent concepts read while the model reads neither absent_rare nor absent_named"
        )

    monkeypatch.setattr(rg, "absent_concepts", never)
    unread = read_evidence(XPATH_Q, [PARSER], groups, df=df)
    assert unread.absent_rare == 0.0
    # every other reading, and so the model's probability, is the one read with it
    assert replace(unread, absent_rare=read.absent_rare) == read
    assert DENSE_MODEL.probability(unread.features(0.5, 0.5)) == DENSE_MODEL.probability(
        read.features(0.5, 0.5)
    )
