"""The refusal fit (`bench/refusal_fit.py`): its default floor keeps the rows it counts as kept
once the coefficients are rounded, and its lexical model reads neither the cosine nor the
dense/BM25 agreement (both fixed, so that one model and one set of floors ship)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from evidence.verbatim.scoring import grounding as lexical_grounding
from evidence.verbatim.scoring import terms
from tests.benchkit import load_bench
from tests.unit.verbatim.verbatimkit import refusal_row


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_bench("refusal_fit.py", "refusal_fit")


def three_families() -> list[dict[str, Any]]:
    """Three families, each with two answerable and two unanswerable questions in both profiles,
    told apart by their agreement and cosine."""
    return [
        refusal_row(f"f{k}", answerable, profile, agreement=a, cosine=c)
        for k in range(3)
        for profile in ("verbatim", "default")
        for answerable, a, c in ((True, 1.0, 0.7), (True, 0.5, 0.6), (False, 0.0, 0.3), (False, 0.25, 0.4))
    ]


def test_the_floor_sits_just_below_the_lowest_probability_it_keeps(fit: ModuleType) -> None:
    p = np.array([0.10, 0.20, 0.30, 0.31, 0.50, 0.60, 0.70, 0.80, 0.90, 0.95])
    kept = np.array([False, False, False, True, True, True, True, True, True, True])
    floor = fit.pick_floor(p, kept, max_loss=0.0)
    # Every kept row stays kept with room for rounding; the unkept rows below are refused.
    assert 0.30 < floor < 0.31 and floor == pytest.approx(0.31 - fit.ROUNDING_MARGIN)
    assert not (p[kept] < floor).any() and (p[~kept] < floor).all()
    # Two rows closer than the margin: halfway between them, never past the refused one.
    close = np.array([0.3, 0.3002, 0.9])
    assert fit.pick_floor(close, np.array([False, True, True]), max_loss=0.0) == pytest.approx(0.3001)


def test_the_lexical_model_fixes_the_cosine_and_the_agreement(fit: ModuleType) -> None:
    rows = three_families()
    columns = ["grounding", "cosine", "typed_key", "agreement"]
    dense = fit.run(rows, 0.0, columns, budget="answerable")
    assert set(dense["final"]["model"]["coefficients"]) == set(columns)
    lexical = fit.run(rows, 0.0, ["grounding", "typed_key"], budget="answerable", dense=dense)
    assert set(lexical["final"]["model"]["coefficients"]) == {"grounding", "typed_key"}
    # The agreement is fixed at its mean over the training rows: (1 + 0.5 + 0 + 0.25) / 4.
    assert lexical["final"]["agreement"] == pytest.approx(0.4375)
    assert 0.0 <= lexical["final"]["cosine"] <= 1.0


def test_fixed_coefficients_stay_and_only_the_others_are_fitted(fit: ModuleType) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = (1 / (1 + np.exp(-(1.5 * x[:, 0] - 2.0 * x[:, 1] + 0.5))) > rng.uniform(size=400)).astype(float)
    free = fit.fit_logistic(x, y)
    held = fit.fit_logistic(x, y, fixed=np.array([0.3, np.nan, -1.0]))
    # The first coefficient and the bias keep the given values; the second is fitted against them
    # (the likelihood's slope in it is zero with the others at their values, l2 = 1e-2), so it
    # differs from the fit that moves everything.
    assert held[0] == 0.3 and held[2] == -1.0
    p = fit.probability(x, held)
    assert float(x[:, 1] @ (p - y) + 1e-2 * held[1]) == pytest.approx(0.0, abs=1e-6)
    assert held[1] < 0 and abs(held[1] - free[1]) > 1e-3
    # Nothing to fit: the given model as it is.
    assert fit.fit_logistic(x, y, fixed=np.array([0.3, 0.2, -1.0])).tolist() == [0.3, 0.2, -1.0]


def test_run_holds_the_named_coefficients_in_every_fold(fit: ModuleType) -> None:
    rows = three_families()
    fixed = {"grounding": 1.25, "cosine": 2.0, "bias": -1.5}
    out = fit.run(rows, 0.0, ["grounding", "cosine", "agreement"], budget="answerable", fixed=fixed)
    for m in [out["final"], *out["families"].values()]:
        coef = m["model"]["coefficients"]
        assert coef["grounding"] == 1.25 and coef["cosine"] == 2.0 and m["model"]["bias"] == -1.5
        assert coef["agreement"] != 0.0


def test_token_features_are_read_from_the_rows_word_piece_matches(fit: ModuleType) -> None:
    from evidence.embed.tokenizer import token_offsets

    row = refusal_row("f0", True, "verbatim", agreement=1.0, cosine=0.7)
    assert not set(fit.TOKEN_FEATURES) & set(fit.features(row))
    pieces = len(token_offsets(row["question"]))
    row["_best"] = [[0.9] * pieces]
    got = fit.features(row)
    assert got["tok_share"] == got["tok_one"] == 1.0 and got["tok_mean"] == pytest.approx(0.9)
    # A long evidence text is read whole, in windows the model takes, cut between word pieces.
    text = "Disputes go to binding arbitration under the rules of the association. " * 40
    windows = fit.token_windows(text)
    assert len(windows) > 1
    assert all(len(token_offsets(w)) <= fit.TOKEN_WINDOW for w in windows)
    assert sum(len(token_offsets(w)) for w in windows) == len(token_offsets(text))


def _piece_scores(question: str, by_word: dict[str, float]) -> list[float]:
    """A `best` row for `question`: each word piece scores its word's value (0.2 otherwise)."""
    from evidence.embed.tokenizer import token_offsets

    out = []
    for s, _ in token_offsets(question):
        word = next((w for w in by_word if question.find(w) <= s < question.find(w) + len(w)), None)
        out.append(by_word[word] if word else 0.2)
    return out


def test_token_cover_credits_a_concept_worded_otherwise_and_reads_each_text_alone(fit: ModuleType) -> None:
    question = "Does the drug harm the kidney?"
    groups = [g for w in ("drug", "harm", "kidney") for g in [terms(w)]]
    texts = ["The drug may harm renal function.", "Store the drug below 25 C."]
    # "kidney" matches "renal" closely in the first text, not at all in the second.
    best = [
        _piece_scores(question, {"drug": 0.9, "harm": 0.8, "kidney": 0.75}),
        _piece_scores(question, {"drug": 0.9, "harm": 0.3, "kidney": 0.3}),
    ]
    got = fit.token_cover(question, groups, best, texts)
    lexical, missing = lexical_grounding(groups, texts, fit.concept_weights(question, groups))
    assert missing == [terms("kidney")[0]] and lexical < 1.0
    assert got["tok_share"] == got["tok_one"] == got["tok_soft"] == 1.0
    assert got["tok_key"] == pytest.approx(0.75) and got["tok_mean"] > fit.TOKEN_MATCH
    # Spread over two texts, the concepts are carried together by neither: tok_one drops.
    split = [
        _piece_scores(question, {"drug": 0.9, "harm": 0.8, "kidney": 0.3}),
        _piece_scores(question, {"drug": 0.9, "harm": 0.3, "kidney": 0.75}),
    ]
    spread = fit.token_cover(question, groups, split, texts)
    assert spread["tok_share"] == 1.0 and spread["tok_one"] < 1.0
    # A concept no piece matches is missing in every reading; a concept given counts as carried.
    absent = [_piece_scores(question, {"drug": 0.9, "harm": 0.8, "kidney": 0.35})]
    low = fit.token_cover(question, groups, absent, texts[:1])
    assert low["tok_share"] < 1.0 and low["tok_soft"] < 1.0 and low["tok_key"] == pytest.approx(0.35)
    assert fit.token_cover(question, groups, absent, texts[:1], given=["kidney"])["tok_share"] == 1.0


def test_a_lower_bound_holds_a_coefficient_the_fit_puts_below_it(fit: ModuleType) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 2))
    y = (1 / (1 + np.exp(-(0.5 * x[:, 0] + 2.0 * x[:, 1]))) > rng.uniform(size=400)).astype(float)
    free = fit.fit_logistic(x, y)
    assert free[0] < 1.0
    bounded = fit.fit_logistic(x, y, lower=np.array([1.0, np.nan, np.nan]))
    # Held at its bound; the other weight and the bias are fitted against it (zero slope, l2 1e-2).
    assert bounded[0] == 1.0
    p = fit.probability(x, bounded)
    a = np.c_[x, np.ones(len(x))]
    assert (a[:, 1:].T @ (p - y) + 1e-2 * bounded[1:]) == pytest.approx(np.zeros(2), abs=1e-6)
    # A bound the fit stays above changes nothing.
    assert fit.fit_logistic(x, y, lower=np.array([-5.0, np.nan, np.nan])).tolist() == free.tolist()


def test_the_prior_pulls_toward_the_shipped_weights_not_toward_zero(fit: ModuleType) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 2))
    y = (1 / (1 + np.exp(-(1.5 * x[:, 0] - 2.0 * x[:, 1] + 0.5))) > rng.uniform(size=400)).astype(float)
    shipped = np.array([3.0, 0.0, -1.0])
    strength = np.array([30.0, 30.0, 1e-2])
    w = fit.fit_logistic(x, y, strength, prior=shipped)
    # The penalised likelihood's slope is zero: each weight's pull is toward the shipped one.
    p = fit.probability(x, w)
    a = np.c_[x, np.ones(len(x))]
    assert a.T @ (p - y) + strength * (w - shipped) == pytest.approx(np.zeros(3), abs=1e-6)
    free = fit.fit_logistic(x, y)
    assert free[0] < w[0] < 3.0 and free[1] < w[1] < 0.0
    # A pull strong enough keeps the shipped weights.
    assert fit.fit_logistic(x, y, np.array([1e7, 1e7, 1e-2]), prior=shipped)[:2] == pytest.approx(
        shipped[:2], abs=1e-3
    )


def test_the_prior_strength_is_the_one_refusing_most_within_the_budget_held_out(fit: ModuleType) -> None:
    # Two families of 100 rows, the first 80 of each to keep. A strength s refuses the rows placed
    # below 1/s: 1 refuses all (over the budget), 4 refuses the 20 not to keep and 5 kept rows
    # (within 0.1), 10 only 10 rows not to keep, 1000 none.
    fam = np.repeat(np.array(["a", "b"]), 100)
    prof = np.tile(np.array(["verbatim", "default"]), 100)
    place = np.tile(np.r_[np.linspace(0.0, 0.249, 20), np.linspace(0.25, 1.0, 80)], 2)
    kept = np.tile(np.arange(100) >= 20, 2)
    left_out: list[set[str]] = []

    def refuse_at(strength: float, rows: np.ndarray) -> np.ndarray:
        left_out.append({"a", "b"} - set(fam[rows]))
        return place < (1.0 / strength if strength < 5 else 0.1 if strength < 100 else 0.0) + (
            0.05 if strength == 4 else 0.0
        )

    everything = np.ones(len(fam), dtype=bool)
    losses = {"verbatim": 0.1, "default": 0.1}
    strength, seen = fit.pick_strength(
        everything, fam, prof, kept, losses, strengths=[1, 4, 10, 1000], refuse_at=refuse_at
    )
    assert strength == 4 and seen["4"]["refused"] == 40 and seen["1"]["overshoot"] > 0
    assert all(len(s) == 1 for s in left_out)
    # Tied refusals: the stronger pull.
    tied, _ = fit.pick_strength(
        everything, fam, prof, kept, losses, strengths=[1, 10, 30], refuse_at=lambda s, _: place < 0.1
    )
    assert tied == 30
    # None within the budget: the least overshoot.
    over, _ = fit.pick_strength(
        everything, fam, prof, kept, {"verbatim": 0.0, "default": 0.0}, strengths=[1, 4], refuse_at=refuse_at
    )
    assert over == 4


def test_with_a_base_the_strongest_pull_passing_the_gate_is_taken(fit: ModuleType) -> None:
    # Two families, one per profile, 20 rows not to keep and 80 to keep each. The base (the shipped
    # constants) refuses 10 not to keep and 1 to keep in each. Strength 1 refuses 20 and 6 (5 more
    # kept rows than the base: fails); 10 refuses 18 and 2 and 100 refuses 13 and 2 (both pass:
    # +3 or more not to keep, +1 kept); 1000 is the base (no gain). Taken: 100.
    fam = np.repeat(np.array(["a", "b"]), 100)
    prof = np.repeat(np.array(["verbatim", "default"]), 100)
    kept = np.tile(np.arange(100) >= 20, 2)
    idx = np.tile(np.arange(100), 2)

    def refusing(unkept: int, kept_rows: int) -> np.ndarray:
        return (idx < unkept) | ((idx >= 20) & (idx < 20 + kept_rows))

    base = refusing(10, 1)
    by_strength = {1.0: refusing(20, 6), 10.0: refusing(18, 2), 100.0: refusing(13, 2), 1000.0: base}
    everything = np.ones(len(fam), dtype=bool)
    losses = {"verbatim": 1.0, "default": 1.0}
    strength, seen = fit.pick_strength(
        everything,
        fam,
        prof,
        kept,
        losses,
        strengths=list(by_strength),
        refuse_at=lambda s, _: by_strength[s],
        base=base,
    )
    assert strength == 100.0 and seen["100.0"]["passes"] and "passes" not in seen["1.0"]
    assert not fit.passes_gate(base, base, everything, prof, kept)
    # Without a base: the most refused within the budget.
    most, _ = fit.pick_strength(
        everything,
        fam,
        prof,
        kept,
        losses,
        strengths=list(by_strength),
        refuse_at=lambda s, _: by_strength[s],
    )
    assert most == 1.0
    # None passes: as without a base.
    none, _ = fit.pick_strength(
        everything,
        fam,
        prof,
        kept,
        losses,
        strengths=[1.0, 1000.0],
        refuse_at=lambda s, _: by_strength[s],
        base=base,
    )
    assert none == 1.0


def test_run_with_a_prior_chooses_a_strength_in_every_fold(fit: ModuleType) -> None:
    rows = three_families()
    prior = {"grounding": 1.25, "cosine": 2.0, "bias": -1.5}
    out = fit.run(
        rows,
        0.0,
        ["grounding", "cosine", "agreement"],
        budget="answerable",
        prior=prior,
        strengths=[1.0, 1e6],
    )
    for m in [out["final"], *out["families"].values()]:
        assert m["floors"]["strength"] in (1.0, 1e6) and set(m["floors"]["inner"]) == {"1.0", "1000000.0"}
        if m["floors"]["strength"] == 1e6:
            coef = m["model"]["coefficients"]
            assert coef["grounding"] == pytest.approx(1.25, abs=1e-3) and abs(coef["agreement"]) < 1e-3


def test_the_paraphrase_source_stops_without_the_wordnet_reading(fit: ModuleType) -> None:
    # refit52's WordNet reading is not in the package (bench/data/session52/refit52-wordnet.patch.txt):
    # asking for it stops before the fit, and before any reading constant is set.
    import evidence.verbatim.grounding as rg

    if hasattr(rg, "PARAPHRASE_SOURCE"):
        pytest.skip("refit52-wordnet.patch.txt applied: the option sets PARAPHRASE_SOURCE")
    before = (rg.READ_VARIANTS, rg.READ_RARE, rg.READ_PARAPHRASES, rg.READ_NAMED)
    with pytest.raises(SystemExit, match=r"refit52-wordnet\.patch\.txt"):
        fit.read_paraphrases(None, whole_words=False, source="wordnet")
    assert before == (rg.READ_VARIANTS, rg.READ_RARE, rg.READ_PARAPHRASES, rg.READ_NAMED)
    assert not hasattr(rg, "PARAPHRASE_SOURCE")


def test_nested_budgets_are_the_largest_whose_inner_held_out_refusals_fit(fit: ModuleType) -> None:
    # Three families of 200 rows, half of each verbatim's. What a fold refuses of its held-out
    # family grows with the budget it was fitted within: twice the budget for verbatim, the
    # budget itself for default. Within --max-loss 0.03, verbatim can afford 0.015, default 0.03.
    fam = np.repeat(np.array(["a", "b", "c"]), 200)
    verbatim = np.tile(np.arange(200) < 100, 3)
    place = (np.tile(np.arange(200) % 100, 3) + 0.5) / 100
    left_out: list[set[str]] = []

    def refuse_at(train: np.ndarray, losses: dict[str, float]) -> np.ndarray:
        left_out.append({"a", "b", "c"} - set(fam[train]))
        (b,) = set(losses.values())
        return place < np.where(verbatim, 2 * b, b)

    everything = np.ones(len(fam), dtype=bool)
    out = fit.inner_budgets(everything, fam, verbatim, everything, 0.03, refuse_at=refuse_at)
    assert out == {"verbatim": 0.015, "default": 0.03}
    assert all(len(s) == 1 for s in left_out) and {min(s) for s in left_out} == {"a", "b", "c"}
    # No budget fits: the tightest is taken.
    tight = fit.inner_budgets(everything, fam, verbatim, everything, 0.0, refuse_at=lambda t, _: everything)
    assert tight == {"verbatim": 0.0, "default": 0.0}


def test_concept_ablation_reads_how_the_fit_moves_without_each_missing_concept(fit: ModuleType) -> None:
    question = "What oxycodone dose after a tonsillectomy?"
    groups = [("oxycodon",), ("dose",), ("tonsillectomi",)]
    ablated = dict(fit.ablated(question, groups))
    assert ablated[("tonsillectomi",)] == "What oxycodone dose after a ?"
    assert ablated[("oxycodon",)] == "What dose after a tonsillectomy?"
    texts = ["Oxycodone 5 mg every 4 hours."]
    unit = np.eye(4)
    # The evidence fits the question without "tonsillectomy" better (a drop < 0): it lacks it.
    vectors = {
        question: unit[0] * 0.8 + unit[1] * 0.6,
        ablated[("tonsillectomi",)]: unit[0],
        ablated[("oxycodon",)]: unit[1],
        ablated[("dose",)]: unit[1],
        texts[0]: unit[0],
    }
    out = fit.ablation(question, groups, texts, [], vectors)
    assert out["abl_missing"] == pytest.approx(0.8 - 1.0)  # only "tonsillectomi" is missing
    assert out["abl_min"] == pytest.approx(-0.2)
    # Every concept held: no missing concept, no drop read.
    held = fit.ablation(
        question,
        groups,
        ["oxycodone dose after a tonsillectomy"],
        [],
        {**vectors, "oxycodone dose after a tonsillectomy": unit[0]},
    )
    assert held["abl_missing"] == 0.0


def test_key_ablation_reads_whether_the_key_term_moves_the_ranking(fit: ModuleType) -> None:
    full = {"dense": [["d", 0, 100, 0.70], ["d", 200, 300, 0.50]], "lexical": [["d", 0, 100, 8.0]]}
    # Without its index-rarest concept the question still ranks the same place first (dense,
    # overlapping windows count as one place) and BM25 keeps three quarters of its score;
    # without the key concept another passage wins.
    rankings = {
        "full": full,
        "rarest": {"dense": [["d", 50, 150, 0.68]], "lexical": [["d", 0, 100, 6.0]]},
        "key": {"dense": [["d", 200, 300, 0.55], ["d", 0, 100, 0.52]], "lexical": [["d", 400, 500, 2.0]]},
    }
    read = fit.key_ablation(rankings)
    assert read["rab_dense_same"] == 1.0 and read["rab_dense_rr"] == 1.0
    assert read["rab_dense_drop"] == pytest.approx(0.02) and read["rab_lex_share"] == pytest.approx(0.25)
    assert read["rab_lex_same"] == 1.0
    assert read["kab_dense_same"] == 0.0 and read["kab_dense_rr"] == pytest.approx(0.5)
    assert read["kab_lex_same"] == 0.0 and read["kab_lex_share"] == pytest.approx(0.75)
    # Nothing to ablate: as if the key term moved nothing.
    assert fit.key_ablation({"full": full})["kab_dense_same"] == 1.0


def test_key_ablation_reads_nothing_to_read_one_way(fit: ModuleType) -> None:
    """No rankings recorded, no key concept to ablate, and a leg without a full ranking all read
    as if the key term moved nothing: a missing reading is not a reading that it moved all."""
    unmoved = {p + k: v for p in ("kab", "rab") for k, v in fit.UNMOVED.items()}
    full = {"dense": [["d", 0, 100, 0.70]], "lexical": [["d", 0, 100, 8.0]]}
    assert fit.key_ablation(None) == unmoved
    assert fit.key_ablation({"full": full}) == unmoved
    moved = {"dense": [["d", 200, 300, 0.50]], "lexical": [["d", 400, 500, 2.0]]}
    no_lexical = fit.key_ablation({"full": {**full, "lexical": []}, "key": moved})
    assert no_lexical["kab_lex_same"] == 1.0 and no_lexical["kab_lex_share"] == 0.0
    assert no_lexical["kab_dense_same"] == 0.0  # the dense leg still reads
    no_dense = fit.key_ablation({"full": {**full, "dense": []}, "key": moved})
    assert no_dense["kab_dense_same"] == 1.0 and no_dense["kab_lex_same"] == 0.0
    # An ablated ranking that comes back empty is a reading: the key term carried it all.
    emptied = fit.key_ablation({"full": full, "key": {"dense": [], "lexical": []}})
    assert emptied["kab_dense_same"] == 0.0 and emptied["kab_lex_share"] == 1.0
    # A row whose judgement recorded no rankings reads the same as one with nothing to ablate.
    row = refusal_row("f", True, "verbatim", cosine=0.5, agreement=0.5)
    assert fit.features(row)["rab_dense_same"] == 1.0


def test_index_contrast_compares_own_evidence_with_the_index_others(fit: ModuleType) -> None:
    rows = [
        refusal_row("f", answerable, "verbatim", cosine=0.5, agreement=0.5) for answerable in (True, False)
    ]
    for r in rows:
        r["judged"]["df"] = {"disput": 3, "bind": 10, "arbitr": 2}
    fit.index_contrast(rows)
    answered, unanswered = (r["_contrast"] for r in rows)
    # The answerable row's evidence holds every concept, the other row's none: its own evidence
    # beats the index's other evidence; the unanswerable row's is beaten by it.
    assert answered["ctr_idx"] == pytest.approx(1.0) and answered["ctr_pct"] == 0.0
    assert unanswered["ctr_idx"] == pytest.approx(-1.0) and unanswered["ctr_pct"] == 1.0
    assert answered["ctr_eng"] == pytest.approx(1.0)


def test_the_lexical_model_fixes_key_ablations_dense_readings_at_their_mean(fit: ModuleType) -> None:
    read = [{"rab_dense_same": 1.0, "rab_lex_share": 0.5}, {"rab_dense_same": 0.0}, {"rab_dense_same": 1.0}]
    coef = {"grounding": 1.0, "agreement": 2.0, "rab_dense_same": 0.3, "rab_lex_share": 1.0}
    # A dense reading needs the query vector: fixed at its mean over the training rows (the first
    # two: 0.5); the lexical reading and the agreement (fixed apart) are not folded in here.
    assert "rab_dense_same" in fit.DENSE_ONLY and "rab_lex_share" not in fit.DENSE_ONLY
    assert fit.other_dense(coef, read, np.array([True, True, False])) == pytest.approx(0.15)


def test_static_token_reading_gives_each_question_piece_its_best_cosine_per_text(
    fit: ModuleType, tmp_path: Path
) -> None:
    """`--static TABLE`: `_best` (what the `tok_` features read) from static word-piece vectors, one
    row per evidence text, one column per question word piece (docs/ranking.md#focus-static)."""
    from evidence.embed.tokenizer import get_tokenizer

    tok = get_tokenizer()
    table = np.zeros((tok.get_vocab_size(), 2), dtype=np.float16)
    table[:, 1] = 1.0
    table[tok.token_to_id("fee")] = table[tok.token_to_id("charge")] = [1.0, 0.0]
    np.savez(tmp_path / "t.npz", vectors=table)
    rows: list[dict[str, Any]] = [
        {"question": "charge", "judged": {"texts": ["a fee", "a cat"]}},
        {"question": "x", "judged": None},
    ]
    fit.read_static_tokens(rows, tmp_path / "t.npz")
    assert rows[0]["_best"] == [[1.0], [0.0]]
    assert "_best" not in rows[1]


def test_key_term_ablation_drops_the_key_concepts_the_signal_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """`refusal_rows.key_concepts` is `grounding.key_concepts` (what `typed_key` and
    `typed_rarest` read), not a copy of it: change the shared reading and the bench follows."""
    import evidence.verbatim.grounding as rg
    from evidence.verbatim.answer_types import answer_types
    from evidence.verbatim.cascade import question_groups

    rows = load_bench("refusal_rows.py", "refusal_rows")
    q = "What is the maximum dose of naloxone?"
    groups = question_groups(q)
    df = {t: 1 for g in groups for t in g} | {"naloxon": 40}
    shared = rg.key_concepts(
        q, rg.unique_concepts(groups), rg.concept_weights(q, groups), answer_types().expected(q), df
    )
    assert shared.key and shared.rarest
    assert rows.key_concepts(q, groups, df) == {"key": shared.key, "rarest": shared.rarest}
    assert rows.key_concepts(q, groups, None) == {"key": shared.key}
    monkeypatch.setattr(rg, "key_concepts", lambda *a, **k: rg.KeyConcepts(key=[("x",)], rarest=[]))
    assert rows.key_concepts(q, groups, df) == {"key": [("x",)]}


def test_one_question_without_a_concept_for_both_ablations(fit: ModuleType) -> None:
    """`refusal_rows` (key-term ablation) drops a concept's words with `refusal_fit.without`, the
    code the text ablation (`ablated`) uses, not a copy of it."""
    rows = load_bench("refusal_rows.py", "refusal_rows")
    assert rows.without.__module__ == "refusal_fit"
    q = "What is the maximum  dose of naloxone?"
    assert fit.without(q, [("naloxon",)]) == "What is the maximum dose of ?"
    assert fit.without(q, [("nowher",)]) == "What is the maximum dose of naloxone?"
    read = dict(fit.ablated(q, [["maximum"], ["naloxon"], ["dosag", "dose"], ["label"]]))
    assert read[("naloxon",)] == fit.without(q, [("naloxon",)]) and ("label",) not in read
    assert read[("dosag", "dose")] == "What is the maximum of naloxone?"
