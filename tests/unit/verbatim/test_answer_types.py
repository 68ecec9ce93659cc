"""The one answer-type lexicon (`verbatim.answer_types`, `data/answer_types.json`) that the span
scorer and the refusal signal both read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence.verbatim import grounding, span_rank
from evidence.verbatim.answer_types import ANSWER_TYPES_FILE, AnswerTypes, answer_types


def test_one_lexicon_file_in_the_package() -> None:
    data = ANSWER_TYPES_FILE.parent
    assert sorted(p.name for p in data.glob("*answer_types*.json")) == ["answer_types.json"]


def test_each_kind_is_listed_once_with_its_flags() -> None:
    kinds = {t.name: t for t in answer_types().types}
    assert len(kinds) == len(answer_types().types)
    # Kinds the two former lexicons named twice are one entry each.
    assert "percentage" not in kinds
    assert {n for n, t in kinds.items() if t.quantity} >= {"duration", "dose", "money", "proportion"}
    assert {n for n, t in kinds.items() if t.form} == {
        "definition",
        "reason",
        "condition",
        "procedure",
        "moment",
    }
    assert not any(t.quantity and t.form for t in kinds.values())


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        # a phrasing each former lexicon had on its own, now one kind
        ("What percentage of patients relapse?", "proportion"),
        ("When was the standard published?", "date"),
        ("Which courts hear disputes?", "jurisdiction"),
        ("What is the minimum password length?", "limit"),
    ],
)
def test_the_span_scorer_and_the_refusal_signal_read_the_same_kinds(question: str, kind: str) -> None:
    assert kind in {t.name for t in span_rank.asked_types(question)}
    assert kind in grounding.expected_answer_types(question)


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How common is a rash?", "proportion"),  # a hint: "how common" may want "rare", a word
        ("How much sodium is in one tablet?", "dose"),  # a hint: "how much" of anything
        ("By when must the notice be sent?", "moment"),  # a form: "before", "within" are everywhere
    ],
)
def test_hints_and_forms_rank_spans_but_demand_no_answer(question: str, kind: str) -> None:
    assert kind in {t.name for t in span_rank.asked_types(question)}
    assert kind not in grounding.expected_answer_types(question)


def test_how_much_with_a_price_asks_for_money_not_a_dose() -> None:
    asked = {t.name for t in span_rank.asked_types("How much does a replacement filter cost?")}
    assert "money" in asked and "dose" not in asked


def test_a_yes_no_question_expects_no_value_but_its_form_still_ranks_spans() -> None:
    question = "Can I sublicense the software?"
    assert grounding.expected_answer_types(question) == ()
    assert "condition" in {t.name for t in span_rank.asked_types(question)}


def test_a_kind_listed_twice_is_an_error(tmp_path: Path) -> None:
    raw = json.loads(ANSWER_TYPES_FILE.read_text(encoding="utf-8"))
    raw["types"].append(raw["types"][0])
    bad = tmp_path / "answer_types.json"
    bad.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValueError, match="listed twice"):
        AnswerTypes.load(bad)


def test_remembered_reads_are_each_lexicons_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `reads_in` remembers its answers per kind and text: a lexicon loaded from another file
    # with the same kind's name but other patterns answers by its own patterns.
    from evidence.verbatim import answer_types as module

    raw = json.loads(ANSWER_TYPES_FILE.read_text(encoding="utf-8"))
    raw["types"][0]["states"] = [r"\bzebra\b"]
    other_file = tmp_path / "types.json"
    other_file.write_text(json.dumps(raw), encoding="utf-8")
    shipped, other = AnswerTypes.load(), AnswerTypes.load(other_file)
    texts = ["Take 20 mg twice daily for 14 days.", "A zebra crossing.", "", "Costs $5 per month."]
    monkeypatch.setattr(module, "KEPT_READS", 5)  # full now and then: emptied, answers unchanged
    for _ in range(3):
        for lexicon in (shipped, other, answer_types()):
            for t in lexicon.types:
                for text in texts:
                    assert t.reads_in(text) == any(p.search(text) for p in t.states)
    assert other.types[0].reads_in("A zebra crossing.")
    assert all(len(t._reads) <= 5 for lexicon in (shipped, other) for t in lexicon.types)
    # The memory is no part of what a kind is: equal kinds stay equal (and hash alike) whatever
    # each has read.
    again = AnswerTypes.load()
    assert again.types == shipped.types and hash(again.types) == hash(shipped.types)
    assert "_reads" not in repr(shipped.types[0])
