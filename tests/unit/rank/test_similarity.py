"""The one cosine and the one MMR every caller shares (rank/similarity.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from evidence.rank.similarity import MarginalRelevance, cosine, cosine_rows, cosines, mmr, unit_rows


def test_cosine_is_defined_for_zero_and_nonfinite_norms() -> None:
    assert cosine([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.0)
    assert cosine([1.0, 1.0], [2.0, 2.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [-3.0, 0.0]) == pytest.approx(-1.0)
    assert cosine(None, [1.0]) is None
    assert cosine([0.0, 0.0], [1.0, 0.0]) is None
    assert cosine([math.inf, 0.0], [1.0, 0.0]) is None
    assert cosine([math.nan, 0.0], [1.0, 0.0]) is None


def test_cosines_by_key_leave_undefined_ones_out() -> None:
    stored = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 0.0]), "c": np.array([0.0, 1.0])}
    assert cosines([1.0, 0.0], stored) == pytest.approx({"a": 1.0, "c": 0.0})
    assert cosines(None, stored) == {}


def test_cosine_rows_are_cosine_row_by_row_and_zero_without_a_direction() -> None:
    rng = np.random.default_rng(7)
    mat = rng.normal(size=(6, 5)).astype(np.float32)
    mat[2] = 0.0
    mat[4, 1] = math.nan
    mat[5, 0] = math.inf
    q = rng.normal(size=5).astype(np.float32)
    got = cosine_rows(mat, q)
    assert got.dtype == np.float64 and got.shape == (6,)
    assert got.tolist() == pytest.approx([cosine(row, q) or 0.0 for row in mat], abs=1e-6)
    assert got[[2, 4, 5]].tolist() == [0.0, 0.0, 0.0]
    assert not cosine_rows(mat, np.zeros(5)).any()
    assert not cosine_rows(mat, None).any()
    assert cosine_rows(np.empty((0, 5)), q).shape == (0,)


def test_unit_rows_zero_what_has_no_direction() -> None:
    mat = unit_rows([[3.0, 4.0], None, [0.0, 0.0], [1.0], [math.nan, 1.0]], 2)
    assert mat.shape == (5, 2)
    assert mat[0] == pytest.approx([0.6, 0.8])
    assert not mat[1:].any()


def _rows(mat: np.ndarray) -> Callable[[int], np.ndarray]:
    unit = unit_rows(list(mat), mat.shape[1])
    return lambda j: unit @ unit[j]


def test_mmr_demotes_the_near_duplicate() -> None:
    vecs = np.array([[1.0, 0.0], [0.99, 0.01], [0.0, 1.0]])
    picks = mmr([1.0, 0.9, 0.5], _rows(vecs), lam=0.5, k=3)
    assert [i for i, _ in picks] == [0, 2, 1]
    assert picks[0][1] == pytest.approx(0.5)  # no redundancy yet: lam x relevance
    assert picks[1][1] == pytest.approx(0.25)  # orthogonal to the first pick


def test_mmr_with_lambda_one_keeps_the_relevance_order_and_k_bounds_it() -> None:
    vecs = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    assert [i for i, _ in mmr([0.2, 0.9, 0.5], _rows(vecs), lam=1.0, k=2)] == [1, 2]


def test_ties_go_to_the_tie_break_then_to_the_earlier_item() -> None:
    same = lambda j: np.zeros(3)  # noqa: E731
    assert [i for i, _ in mmr([0.5, 0.5, 0.5], same, lam=0.7, k=3)] == [0, 1, 2]
    later_wins = mmr([0.5, 0.5, 0.5], same, lam=0.7, k=1, tie_break=lambda i: (float(i),))
    assert later_wins[0][0] == 2


def test_initial_redundancy_zero_floors_negative_similarity() -> None:
    anti = lambda j: np.array([-1.0, -1.0])  # noqa: E731
    unset = MarginalRelevance([1.0, 1.0], anti, w_rel=1.0, w_red=0.5)
    floored = MarginalRelevance([1.0, 1.0], anti, w_rel=1.0, w_red=0.5, initial=0.0)
    for state in (unset, floored):
        state.choose(0)
    assert unset.values()[1] == pytest.approx(1.5)  # a dissimilar item gains
    assert floored.values()[1] == pytest.approx(1.0)  # redundancy never goes below 0
    assert unset.values()[0] == -math.inf


def test_best_respects_eligibility() -> None:
    state = MarginalRelevance([0.9, 0.1], lambda j: np.zeros(2), w_rel=1.0, w_red=1.0)
    assert state.best(np.array([False, True])) == 1
    assert state.best(np.array([False, False])) is None
