"""The verbatim rule planner: entity, query mode, attribute synonyms, sections, phrases, configuration."""

from __future__ import annotations

import pytest

from evidence.ingest.entities import entity_aliases, subject_names
from evidence.plan.verbatim import (
    VerbatimRules,
    content_words,
    default_rules,
    find_entity,
    plan_question,
)

KNOWN = ["LIPRAVEX", "ferlostatin calcium", "ferlostatin"]


@pytest.mark.parametrize(
    "question",
    [
        "What is the half-life of Lipravex?",
        "ferlostatin t1/2",
        "What is the t½ of ferlostatin?",
        "elimination half life of lipravex",
        "How long does Lipravex stay in the body?",
    ],
)
def test_half_life_synonyms_are_one_attribute(question: str) -> None:
    plan = plan_question(question, known_entities=KNOWN)
    assert plan.query_mode == "ATTRIBUTE"
    assert plan.attribute == "half_life"
    assert plan.candidate_sections[0] == "pharmacokinetics"
    assert "half-life" in plan.search_phrases and plan.extraction_level == "sentence"


@pytest.mark.parametrize(
    ("question", "mode", "sections"),
    [
        ("What are the contraindications for Lipravex?", "SECTION", ("contraindications",)),
        ("Lipravex side effects", "SECTION", ("adverse_reactions",)),
        ("Does Lipravex interact with warfarin?", "SECTION", ("interactions",)),
        ("What is the pediatric dose of Lipravex?", "MULTI_SECTION", ("pediatric", "dosage")),
        (
            "Why is the Lipravex dose reduced in severe renal impairment?",
            "MULTI_SECTION",
            ("dosage", "renal_impairment"),
        ),
        ("What is Lipravex?", "GENERIC", ("indications", "composition", "mechanism_of_action")),
        ("Has tendon rupture been reported with Lipravex?", "GLOBAL", ()),
    ],
)
def test_modes_and_sections(question: str, mode: str, sections: tuple[str, ...]) -> None:
    plan = plan_question(question, known_entities=KNOWN)
    assert plan.query_mode == mode
    assert plan.candidate_sections[: len(sections)] == sections
    assert plan.entity == "LIPRAVEX"


def test_a_section_named_alone_is_a_block_with_more_words_a_sentence() -> None:
    assert plan_question("Lipravex contraindications", known_entities=KNOWN).extraction_level == "block"
    assert (
        plan_question("Does Lipravex interact with warfarin?", known_entities=KNOWN).extraction_level
        == "sentence"
    )


def test_lay_words_are_translated_into_label_words() -> None:
    plan = plan_question("Lipravex kidney problems and breastfeeding", known_entities=KNOWN)
    assert "renal" in plan.search_phrases and "lactation" in plan.search_phrases
    why = plan_question("Why is Lipravex harmful in pregnancy?", known_entities=KNOWN)
    assert why.query_mode == "MULTI_SECTION" and "because" in why.search_phrases


def test_entity_known_names_win_and_unknown_names_are_guessed_only_without_a_list() -> None:
    assert find_entity("what about FERLOSTATIN calcium dosing", KNOWN) == "ferlostatin calcium"
    assert find_entity("What is the dose for Asian patients?", KNOWN) is None
    assert find_entity("What is the dose of Zorvex for adults?") == "Zorvex"
    assert find_entity("what is the dose") is None


def test_entity_words_are_not_search_words() -> None:
    plan = plan_question("What is the bioavailability of Lipravex?", known_entities=KNOWN)
    assert all("lipravex" not in p.lower() for p in plan.search_phrases)
    assert content_words("What is the price of the drug?") == ["price"]


def test_a_known_name_with_punctuation_or_quotes_is_the_entity_said_by_its_words() -> None:
    """The plan's entity reads a known subject as the cascade reads the passages' subjects
    (`says_name`): "zentrax®" and 'the "widget license"' are said by their words, a name's
    numbers must be said too, a name said as written comes first, and the words that said it
    leave the search words as a name said as written does (synthetic subjects)."""
    known = ["zentrax®", 'the "widget license"', "frob public license version 2.0"]
    assert find_entity("How much Zentrax should a child take?", known) == "zentrax®"
    assert find_entity("Does the Widget License allow resale?", known) == known[1]
    assert find_entity("Is the Frob Public License 2.0 viral?", known) == known[2]
    assert find_entity("Is the Frob Public License 1.1 viral?", known) is None
    assert find_entity("Is a license for a widget needed?", known) is None
    assert find_entity("Are zentrax tablets coated?", [*known, "zentrax tablets"]) == "zentrax tablets"
    plan = plan_question("What is the dose of Zentrax for children?", known_entities=known)
    assert plan.entity == "zentrax®"
    assert all("zentrax" not in p.lower() for p in plan.search_phrases)
    generic = plan_question("What is Zentrax?", known_entities=known)
    assert (generic.entity, generic.query_mode) == ("zentrax®", "GENERIC")


def test_subject_names_from_titles() -> None:
    assert subject_names("LIPRAVEX (ferlostatin calcium) tablets, for oral use") == KNOWN
    assert subject_names("Metformin Hydrochloride Extended-Release Tablets") == [
        "Metformin Hydrochloride",
        "Metformin",
    ]
    assert entity_aliases(["A", "a", " "]) == ["A"]


def test_rules_extend_by_configuration_and_refuse_bad_patterns() -> None:
    rules = VerbatimRules.from_config(
        {
            "attributes": [
                {
                    "name": "shelf_life",
                    "triggers": [r"shelf[- ]life", r"how long .* keep"],
                    "phrases": ["shelf life", "expiry"],
                    "sections": ["storage"],
                    "evidence": r"month|year|expir",
                }
            ]
        }
    )
    assert rules.attribute("half_life") is not None  # defaults kept
    plan = plan_question("What is the shelf life of Lipravex?", known_entities=KNOWN, rules=rules)
    assert plan.attribute == "shelf_life" and plan.candidate_sections[0] == "storage"
    with pytest.raises(ValueError, match="regular expression"):
        VerbatimRules.from_config({"lay_terms": {"(unclosed": ["x"]}})
    with pytest.raises(ValueError, match="malformed"):
        VerbatimRules.from_config({"attributes": [{"name": "x"}]})
    assert default_rules().why_terms


@pytest.mark.parametrize("hyphen", ["\u2010", "\u2011", "\u00ad"])
def test_a_compound_with_a_unicode_hyphen_is_one_word_as_with_a_hyphen_minus(hyphen: str) -> None:
    question = "Is a non-opioid co-analgesic enough?"
    words = content_words(question.replace("-", hyphen))
    assert (
        [w.replace(hyphen, "-") for w in words]
        == content_words(question)
        == ["non-opioid", "co-analgesic", "enough"]
    )


def test_run_at_finds_the_first_run_of_consecutive_words_that_say_the_name() -> None:
    """The one loop of `says_name` and the cascade's `abbreviates`: equal words unless told."""
    from evidence.plan.verbatim import run_at

    asked = ["what", "is", "the", "zorblat", "size", "the", "zorblat", "size"]
    assert run_at(asked, ["zorblat", "size"]) == 3
    assert run_at(asked, ["size", "zorblat"]) is None
    assert run_at(asked, []) is None and run_at([], ["x"]) is None
    assert run_at(asked, ["zorb", "size"]) is None
    assert run_at(asked, ["zorb", "size"], lambda q, w: q.startswith(w)) == 3
