"""The fitting script's budget step (`bench/span_rank_fit.py`, `budgeted`): the dense model's
length weight is lowered only as far as finding answers within 600 characters asks."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from evidence.verbatim.span_rank import LEXICAL_FEATURES, LinearModel, SpanModel
from tests.benchkit import load_bench


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_bench("span_rank_fit.py", "span_rank_fit")


def _row(fit: ModuleType, texts: list[str], cosines: list[float], answer: str) -> Any:
    n = len(texts)
    lexical = {f: np.zeros(n) for f in LEXICAL_FEATURES}
    lexical["length"] = np.asarray([math.log(len(t) / 150) for t in texts])
    return fit.Row(
        family="f",
        question="q",
        answers=(answer,),
        path_used="HYBRID_FACTSPAN",
        texts=texts,
        lexical=lexical,
        candidates=np.arange(n),
        positive=np.asarray([answer in t for t in texts]),
        span_cosine=np.asarray(cosines),
        heading_cosine=np.zeros(n),
    )


def _model(length: float) -> SpanModel:
    flat = LinearModel({})
    return SpanModel(flat, LinearModel({"span_cosine": 5.0, "length": length}), top_n=40)


def test_two_long_spans_ahead_of_a_short_answer_lower_the_length_weight(fit: ModuleType) -> None:
    answer = "The answer is 14 days."
    row = _row(fit, ["a" * 500, "b" * 400, answer + " c" * 30], [0.6, 0.6, 0.5], answer)
    model = _model(0.0)
    assert not fit.found(row, model)  # 500 + 400 characters come first: the answer is past 600
    tuned = fit.budgeted(model, [row])
    # the smallest step that brings the answer first: z = 5 * cosine - step * log(chars / 150)
    assert tuned.dense.weights["length"] == -0.5
    assert fit.found(row, tuned)
    assert "lowered by 0.5" in tuned.fitted_on


def test_an_answer_already_in_the_budget_keeps_the_fitted_weight(fit: ModuleType) -> None:
    answer = "The answer is 14 days."
    row = _row(fit, [answer + " c" * 200, "b" * 100], [0.7, 0.5], answer)
    tuned = fit.budgeted(_model(0.3), [row])
    assert tuned.dense.weights["length"] == 0.3 and fit.found(row, tuned)


def test_tied_steps_are_named_and_the_middle_rule_takes_the_middle_one(fit: ModuleType) -> None:
    answer = "The answer is 14 days."
    row = _row(fit, ["a" * 500, "b" * 400, answer + " c" * 30], [0.6, 0.6, 0.5], answer)
    smallest = fit.budgeted(_model(0.0), [row])
    middle = fit.budgeted(_model(0.0), [row], "middle")
    # every step from 0.5 up finds the answer: six steps tie, the lower of the two middles is 1.0
    assert "tied steps 0.5, 0.75, 1.0, 1.25, 1.5, 2.0" in smallest.fitted_on
    assert smallest.dense.weights["length"] == -0.5
    assert middle.dense.weights["length"] == -1.0 and fit.found(row, middle)
    assert "the middle taken" in middle.fitted_on
