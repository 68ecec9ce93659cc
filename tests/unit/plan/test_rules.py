"""The rule planner's search phrases (`plan.rules`)."""

from __future__ import annotations

import pytest

from evidence.plan.rules import key_phrases


@pytest.mark.parametrize("hyphen", ["\u2010", "\u2011", "\u00ad"])
def test_a_compound_with_a_unicode_hyphen_is_one_phrase_as_with_a_hyphen_minus(hyphen: str) -> None:
    criterion = "Is data-at-rest encrypted by third-party vendors?"
    phrases = key_phrases(criterion.replace("-", hyphen))
    assert [p.replace(hyphen, "-") for p in phrases] == key_phrases(criterion)
    assert key_phrases(criterion) == ["data-at-rest", "encrypted", "third-party"]
