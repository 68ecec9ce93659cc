"""Seed 004's bullet bounds, per playbook, on the plan that compression receives: 3 to 7
bullets whatever the graph offers (a chain of many prerequisites must not lift the cap past 7)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evidence.coach.contract import Intent
from evidence.coach.selection import Selection


def _run(intent: Intent, followup: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(intent=SimpleNamespace(intent=intent), followup=followup)


@pytest.mark.parametrize("intent", list(Intent))
@pytest.mark.parametrize(("matched", "supporting"), [(1, 0), (1, 2), (3, 3), (6, 9), (20, 20)])
def test_every_plan_asks_for_three_to_seven_bullets(intent: Intent, matched: int, supporting: int) -> None:
    for followup in (None, "LO-1"):
        plan = Selection._plan(_run(intent, followup), matched, supporting)  # type: ignore[arg-type]
        assert plan.min_bullets == 3
        assert 3 <= plan.max_bullets <= 7


def test_a_long_chain_reaches_the_cap_of_seven_and_no_more() -> None:
    assert Selection._plan(_run(Intent.TUTORING), 2, 3).max_bullets == 7  # type: ignore[arg-type]
    assert Selection._plan(_run(Intent.TUTORING), 10, 10).max_bullets == 7  # type: ignore[arg-type]
    assert Selection._plan(_run(Intent.TUTORING), 1, 2).max_bullets == 5  # type: ignore[arg-type]
