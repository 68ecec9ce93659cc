"""The fitting script's conservative choice (`bench/span_rank_fit.py select`): the candidates, the
paired 1-SE rule, and the structure-feature cache that holds rows by identity, not by `id(row)`."""

from __future__ import annotations

import gc
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from evidence.verbatim.span_rank import LEXICAL_FEATURES, STRUCTURE_FEATURES
from tests.benchkit import load_bench


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_bench("span_rank_fit.py", "span_rank_fit")


def _row(fit: ModuleType, sections: tuple[str, ...]) -> Any:
    n = len(sections)
    return fit.Row(
        family="f",
        question="q",
        answers=("a",),
        path_used="HYBRID_FACTSPAN",
        texts=["t"] * n,
        lexical={f: np.zeros(n) for f in LEXICAL_FEATURES},
        candidates=np.arange(n),
        positive=np.zeros(n, dtype=bool),
        span_cosine=np.zeros(n),
        heading_cosine=np.zeros(n),
        sections=sections,
        documents=("d",) * n,
    )


def _table(fit: ModuleType, scores: dict[Any, list[float]]) -> dict[Any, dict[str, dict[str, float]]]:
    return {c: {f"fam{i}": {"score": s} for i, s in enumerate(v)} for c, v in scores.items()}


def test_candidates_are_the_set_without_structure_and_each_ablation_at_every_l2(fit: ModuleType) -> None:
    dense = ("passage", "span_cosine", *STRUCTURE_FEATURES)
    cands = fit.select_candidates(dense, [0.01, 1.0])
    names = {c.name for c in cands}
    assert names == {"all", "no_structure"} | {f"no_{s}" for s in STRUCTURE_FEATURES}
    assert len(cands) == 2 * len(names)
    (plain,) = [c for c in cands if c.name == "no_structure" and c.l2 == 1.0]
    assert plain.dense == ("passage", "span_cosine")
    assert plain.label == "no_structure@1"
    # fewer features is simpler; at one feature set, the stronger penalty
    assert plain.simplicity < next(c for c in cands if c.name == "all" and c.l2 == 1.0).simplicity
    assert fit.Candidate("a", ("x",), 1.0).simplicity < fit.Candidate("a", ("x",), 0.01).simplicity


def test_one_se_takes_the_simplest_candidate_the_families_cannot_tell_from_the_best(fit: ModuleType) -> None:
    big = fit.Candidate("all", ("a", "b", "c"), 0.01)
    small = fit.Candidate("few", ("a",), 0.01)
    # `small` is behind on average but ahead on two families of four: within one SE
    chosen, why = fit.one_se(_table(fit, {big: [0.8, 0.6, 0.7, 0.9], small: [0.7, 0.65, 0.6, 0.92]}))
    assert why["best"] == "all@0.01"
    assert chosen is small


def test_one_se_keeps_the_best_when_a_simpler_one_loses_on_every_family(fit: ModuleType) -> None:
    big = fit.Candidate("all", ("a", "b", "c"), 0.01)
    small = fit.Candidate("few", ("a",), 0.01)
    # paired by family: a steady small loss has a small standard error, so it counts
    chosen, why = fit.one_se(_table(fit, {big: [0.8, 0.6, 0.7, 0.9], small: [0.78, 0.58, 0.69, 0.88]}))
    assert chosen is big
    assert "few@0.01" not in why["within_1se"]


def test_the_structure_cache_is_per_row_and_lets_go_of_a_dropped_row(fit: ModuleType) -> None:
    first = _row(fit, ("A", "A", "B"))
    assert fit.positions(first)["section_first"].tolist() == [1, 0, 1]
    held = len(fit._POSITIONS)
    del first
    gc.collect()
    assert len(fit._POSITIONS) == held - 1
    # a later row (which may well get the dropped one's id) is computed from its own spans
    second = _row(fit, ("A", "B", "B"))
    assert fit.positions(second)["section_first"].tolist() == [1, 1, 0]
