"""An absent question word whose WordNet synonym the evidence writes is no absent fact
(`verbatim.grounding.synonymous`, docs/verbatim.md#refusal-wordnet)."""

from __future__ import annotations

import pytest

from evidence.embed import static
from evidence.verbatim import grounding
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.grounding import (
    DF_CAP,
    TermCounts,
    concept_weights,
    read_evidence,
    said_otherwise,
    synonymous,
)

#: "breach" is in no passage of the index; the evidence says "violation" (WordNet: breach / violate).
Q = "What happens to my licence if I breach the terms?"
SAYS_VIOLATE = "Any violation of these terms ends your licence."
#: A question naming something the documents never talk about ("XPath"), evidence about the parser.
XPATH_Q = "Can the parser run XPath queries on a document?"
PARSER = "The parser reads a document and calls your handler for each element."


@pytest.fixture(autouse=True)
def _read_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Synonyms are read only when the model reads `absent_rare`, from `PARAPHRASE_SOURCE`; no static
    table, so that only WordNet can say a word otherwise."""
    monkeypatch.setattr(grounding, "READ_VARIANTS", True)
    monkeypatch.setattr(grounding, "READ_PARAPHRASES", True)
    monkeypatch.setattr(grounding, "READ_RARE", True)
    monkeypatch.setattr(grounding, "PARAPHRASE_SOURCE", "wordnet")
    static.clear_cache()
    monkeypatch.setattr(static, "piece_table", lambda: None)


def test_a_synonym_in_the_evidence_says_the_absent_word() -> None:
    assert synonymous(Q, [("breach",)], [SAYS_VIOLATE]) == {"breach"}  # "violation": the term "violat"
    # Base forms: "permitted" -> "permit" -> "allow", written "allows".
    q = "How many connections are permitted per user?"
    assert synonymous(q, [("permit",)], ["The server allows ten connections per user."]) == {"permit"}
    # Nothing of the kind in the evidence, or nothing asked: not said.
    assert synonymous(Q, [("breach",)], [PARSER]) == frozenset()
    assert synonymous(XPATH_Q, [("xpath",)], [PARSER]) == frozenset()
    assert synonymous(Q, [], [SAYS_VIOLATE]) == frozenset()


def test_a_stop_word_synonym_says_nothing() -> None:
    # WordNet puts "be" with "exist"; the analyser keeps no term of it, so no text says it.
    assert synonymous("Does the file exist?", [("exist",)], ["It may be so."]) == frozenset()


def test_absent_rare_reads_the_source_it_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = question_groups(Q)
    df = TermCounts({t: DF_CAP for g in groups for t in g} | {"breach": 0})
    weights = concept_weights(Q, groups)
    assert weights["breach"] > grounding._BASE_WEIGHT
    assert read_evidence(Q, [SAYS_VIOLATE], groups, df=df).absent_rare == 0.0
    # The static vectors (no table here) read no synonym: the absence counts.
    monkeypatch.setattr(grounding, "PARAPHRASE_SOURCE", "static")
    absent = weights["breach"] - grounding._BASE_WEIGHT
    assert read_evidence(Q, [SAYS_VIOLATE], groups, df=df).absent_rare == pytest.approx(absent)
    monkeypatch.setattr(grounding, "PARAPHRASE_SOURCE", "both")
    assert read_evidence(Q, [SAYS_VIOLATE], groups, df=df).absent_rare == 0.0
    # A thing the documents never name keeps its absence.
    xg = question_groups(XPATH_Q)
    xdf = TermCounts({t: DF_CAP for g in xg for t in g} | {"xpath": 0})
    assert read_evidence(XPATH_Q, [PARSER], xg, df=xdf).absent_rare > 0.9


def test_both_sources_read_the_union(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grounding, "paraphrased", lambda q, c, t: frozenset({"xpath"}))
    concepts = [("breach",), ("xpath",)]
    monkeypatch.setattr(grounding, "PARAPHRASE_SOURCE", "both")
    assert said_otherwise(Q, concepts, [SAYS_VIOLATE], None) == {"breach", "xpath"}
    monkeypatch.setattr(grounding, "PARAPHRASE_SOURCE", "wordnet")
    assert said_otherwise(Q, concepts, [SAYS_VIOLATE], None) == {"breach"}
    monkeypatch.setattr(grounding, "PARAPHRASE_SOURCE", "static")
    assert said_otherwise(Q, concepts, [SAYS_VIOLATE], None) == {"xpath"}
