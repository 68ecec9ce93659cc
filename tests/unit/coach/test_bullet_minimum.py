"""Seed 004's floor of 3 bullets, in compression itself: below `min_bullets` a sentence is taken
however weakly it matches the query; past it, weak sentences stop the fill (issue 24 item 5:
this was caught by slow tests only)."""

from __future__ import annotations

import pytest

from evidence.coach.budget import TokenCounter
from evidence.coach.compress import Plan, Source, compress, split_node
from evidence.coach.contract import Intent
from evidence.graph.documents import NodeView
from evidence.search.analysis import get_analyzer

#: Five distinct sentences, none about the query below: every one scores under the fill's floor.
TEXT = (
    "Fractions name parts of a whole. "
    "A denominator counts the equal parts. "
    "Mixed numbers join a whole number and a fraction. "
    "Equivalent fractions scale both terms alike. "
    "Improper fractions have a larger numerator."
)
QUERY = "derivative of a composition"


def _bullets(plan: Plan) -> list[str]:
    view = NodeView(
        id="LO-F", graph="g", type="LO", title="Fractions", text=TEXT, chunk_id="LO-F#p", document_id="g#LO-F"
    )
    analyzer = get_analyzer()
    out = compress(
        [Source(view, "matched", 1.0, 0)],
        {view.id: split_node(view)},
        query_terms=frozenset(analyzer.analyze(QUERY)),
        query_vector=None,
        plan=plan,
        tokens=TokenCounter(),
        analyze=analyzer.analyze,
    )
    return [b.text for b in out]


@pytest.mark.parametrize("minimum", [1, 2, 3, 4])
def test_weak_sentences_fill_up_to_the_minimum_and_no_further(minimum: int) -> None:
    bullets = _bullets(Plan(max_bullets=5, min_bullets=minimum, per_node=5))
    assert len(bullets) == minimum
    assert all(b in TEXT for b in bullets)


def test_the_plans_compression_receives_ask_for_three() -> None:
    """The default and every playbook's plan (tests/unit/coach/test_plan_caps.py checks them all)
    yield 3 bullets from a node that matches the query weakly."""
    from types import SimpleNamespace

    from evidence.coach.selection import Selection

    assert Plan().min_bullets == 3
    for intent in Intent:
        run = SimpleNamespace(intent=SimpleNamespace(intent=intent), followup=None)
        plan = Selection._plan(run, 1, 0)  # type: ignore[arg-type]
        assert (
            len(_bullets(Plan(max_bullets=plan.max_bullets, min_bullets=plan.min_bullets, per_node=5))) == 3
        )
