"""Leave-one-family-out tuning of a refusal threshold over QA-suite outcomes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from evidence.errors import RequestValidationError
from evidence.evaluation.suite import QaOutcome, qa_metrics

T = TypeVar("T")


def refuse_below(outcome: QaOutcome, threshold: float, feature: Callable[[QaOutcome], float]) -> QaOutcome:
    """The outcome as if the hits had been withheld when `feature` falls below `threshold` (what
    `withhold_below` does with `confidence`): a refusal, with no evidence left to find an answer in."""
    if outcome.refused or feature(outcome) >= threshold:
        return outcome
    return replace(
        outcome,
        refused=True,
        can_answer=False,
        first_rank=None,
        found_600=False,
        found_2000=False,
        evidence_chars=0,
        hits=0,
        right_document_first=None,
    )


def tune_refusal_threshold(
    train: Sequence[QaOutcome],
    feature: Callable[[QaOutcome], float] = lambda o: o.confidence,
    *,
    max_false_refusals: float = 0.03,
) -> float:
    """The threshold on `feature` that refuses the most unanswerable training questions while
    refusing at most `max_false_refusals` of the answerable ones (ties: the lowest such
    threshold, taken halfway between two observed values). 0.0 (refuse nothing more) when no
    threshold helps, or when the outcomes already refuse more answerable questions than allowed."""
    answerable = [o for o in train if o.answerable]
    values = sorted({feature(o) for o in train})
    # Midpoints between neighbouring values leave a margin on both sides for the held-out family.
    candidates = [0.0, *((lo + hi) / 2 for lo, hi in itertools.pairwise(values)), *values[-1:]]
    if values:
        candidates[-1] += 1e-6  # just above the largest value: refuse everything
    best, best_caught = 0.0, -1
    for t in candidates:
        tuned = [refuse_below(o, t, feature) for o in train]
        wrong = sum(o.refused for o in tuned if o.answerable)
        if answerable and wrong / len(answerable) > max_false_refusals:
            continue
        caught = sum(o.refused for o in tuned if not o.answerable)
        if caught > best_caught:
            best, best_caught = t, caught
    return best


def leave_one_family_out(
    outcomes: Sequence[QaOutcome],
    fit: Callable[[Sequence[QaOutcome]], T],
    apply: Callable[[QaOutcome, T], QaOutcome],
) -> dict[str, Any]:
    """Fit on every family but one, measure on that one, for each family in turn.

    `fit` sees only the training families' outcomes and returns a parameter (a threshold, a
    set of rules); `apply` turns one held-out outcome into what it would have been with it.
    Returns each held-out family's parameter and figures, and `held_out`: the figures over all
    held-out outcomes pooled (what the README reports)."""
    families = list(dict.fromkeys(o.family for o in outcomes))
    if len(families) < 2:
        raise RequestValidationError("leave-one-family-out needs at least two families", field="families")
    per_family: dict[str, Any] = {}
    pooled: list[QaOutcome] = []
    for held in families:
        param = fit([o for o in outcomes if o.family != held])
        tested = [apply(o, param) for o in outcomes if o.family == held]
        pooled.extend(tested)
        per_family[held] = {"parameter": param, **qa_metrics(tested)}
    return {"families": per_family, "held_out": qa_metrics(pooled)}
