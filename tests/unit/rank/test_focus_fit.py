"""bench/qa/focus_fit.py: held-out misses are located under each fold's own rule, and the ones the
shipped rule finds in-sample are marked as lost to the fold's choice (docs/ranking.md#focus-heldout)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from evidence.rank.candidate import Candidate
from evidence.rank.context import RankContext
from tests.benchkit import load_bench
from tests.unit.rank.rankkit import cand, chunk, ctx

fit: Any = load_bench("qa/focus_fit.py", "qa_focus_fit")

_TEXT = "Intro sentence here. The limit is 42 rows. Closing remark."


def _asked(family: str, question: str, answer: str) -> Any:
    hit = cand(chunk(f"{family}-1", _TEXT, doc=family), 1.0)
    run = ctx(None, query=question)
    return fit.Asked(family, question, (answer,), run, [hit], None, None, (("top_k", (hit,)),))


def _keep(start: int, end: int) -> Any:
    """A rule keeping `[start, end)` of every hit (a slice of its document, as focus keeps)."""
    from evidence.rank.dedup import _slice

    def rule(hits: Sequence[Candidate], _: RankContext) -> list[Candidate]:
        return [_slice(h, h.chunk.char_start + start, h.chunk.char_start + end) for h in hits]

    return lambda **_: rule


def test_held_out_misses_use_each_folds_rule_and_mark_the_folds_loss() -> None:
    asked = [_asked("a", "what is the limit", "limit is 42"), _asked("b", "what is the limit", "limit is 42")]
    answer_at = _TEXT.index("The limit")
    keeps_answer = {"parameter": {"keep": True}}
    cuts_answer = {"parameter": {"keep": False}}

    def build(keep: bool) -> Any:
        return _keep(answer_at, len(_TEXT))() if keep else _keep(0, answer_at)()

    lofo = {"families": {"a": keeps_answer, "b": cuts_answer}}
    rows = fit.held_out_misses(asked, lofo, build, shipped_misses=set())
    assert [(r["family"], r["class"], r["fold_choice"]) for r in rows] == [("b", "cut", True)]
    # a miss the shipped rule misses too is focus's own, not the fold's
    rows = fit.held_out_misses(asked, lofo, build, shipped_misses={("b", "what is the limit")})
    assert [r["fold_choice"] for r in rows] == [False]
    counts = fit.miss_classes(rows)["all"]
    assert counts["cut_first"] == 1 and counts["fold_choice"] == 0


def test_in_sample_miss_classes_have_no_fold_count() -> None:
    asked = [_asked("a", "what is the limit", "limit is 42")]
    rows = fit.misses(asked, _keep(0, 5)())
    assert fit.miss_classes(rows)["a"] == {"not_in_hits": 0, "past_budget": 0, "cut_first": 1, "cut_later": 0}


def test_static_pieces_credit_a_paraphrase_and_only_terms_the_hit_lacks() -> None:
    """bench/static_pieces.py's `StaticPieces` (the focus paraphrase lever, docs/ranking.md#focus-static):
    a question term is credited in the sentence whose word's static vector is near its own, rescaled
    above the floor; with `absent_only`, a term the hit says anywhere is not credited at all."""
    import numpy as np

    from evidence.embed.tokenizer import get_tokenizer

    static: Any = load_bench("static_pieces.py", "static_pieces")
    tok = get_tokenizer()
    size = tok.get_vocab_size()
    table = np.zeros((size, 3), dtype=np.float32)
    table[:, 2] = 1.0  # every piece alike, far from the two below
    table[tok.token_to_id("charge")] = table[tok.token_to_id("fee")] = [1.0, 0.0, 0.0]
    table[tok.token_to_id("copies")] = [0.0, 1.0, 0.0]
    text = "You may distribute copies. A fee may be asked."
    spans = [(0, 26), (27, len(text))]
    query = "Can I charge for copies?"
    terms = {"charg", "copi"}
    lacking = static.StaticPieces(table, floor=0.5, absent_only=True).credit(query, terms, text, spans)
    assert lacking == [{}, {"charg": 1.0}]  # "copi" is in the hit: no credit for it anywhere
    every = static.StaticPieces(table, floor=0.5, absent_only=False).credit(query, terms, text, spans)
    assert every == [{"copi": 1.0}, {"charg": 1.0}]
    table[tok.token_to_id("fee")] = [0.75, (1 - 0.75**2) ** 0.5, 0.0]  # cosine 0.75 with "charge"
    near = static.StaticPieces(table, floor=0.5).credit(query, terms, text, spans)
    assert near[1]["charg"] == pytest.approx(0.5)  # (0.75 - floor) / (1 - floor)
    assert static.StaticPieces(table, floor=0.8).credit(query, terms, text, spans) == [{}, {}]


def test_the_size_grid_is_every_combination_in_the_axes_order() -> None:
    # The fits break ties by grid order, so the last axis varies fastest, as itertools.product.
    grid = fit.size_grid(window=(150, 200), lead=(400,), collapse_space=(False, True))
    assert grid == [
        {"window": 150, "lead": 400, "collapse_space": False},
        {"window": 150, "lead": 400, "collapse_space": True},
        {"window": 200, "lead": 400, "collapse_space": False},
        {"window": 200, "lead": 400, "collapse_space": True},
    ]
    assert [list(p) for p in grid] == [["window", "lead", "collapse_space"]] * 4
