"""Choose `grounding.PARAPHRASE_CONTEXT_COSINE` leave-one-family-out, with the refusal model refitted
at each candidate (docs/verbatim.md#refusal-context; bench/data/session44/refuse16.md).

Usage: python bench/refusal_context_fit.py rows.json [--grid 0.40,0.45,...] [--json]
       (the fit's settings are `make refusal-fit`'s: --budget answerable --max-loss 0.03
       --default-cap 0.30 --min-confidence 0.3; --features as REFUSAL_FEATURES + absent_rare)

For each threshold t of the grid, `absent_rare` reads an absent concept as said in other words when
its question word's contextual vector has cosine >= t with a content word of the evidence
(`grounding.paraphrased_in_context`; the similarities from `refusal_fit.read_context`, cached in
context_sims.json next to the rows). Then, for each held-out family: on the other families the
model and floors are fitted at every t (`refusal_fit.Fitter`, as `refusal_fit.run` fits them), the
t whose in-sample fit refuses the most unanswerable training questions (both profiles pooled;
ties: the lowest t) is kept, and the held-out family is scored with that t's model and floors.
The pooled held-out figures are those of a threshold never chosen on the family scored. `chosen`:
the same choice on every family (what would ship, with `refusal_fit.py --paraphrase-context t`'s
`final` constants). Also printed: each t's ordinary held-out figures (t fixed for every fold), and
a diagnostic: the AUC with which the contextual similarity of the absent concepts separates
answerable from unanswerable questions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "shared"))

import refusal_fit as rf  # noqa: E402

import evidence.verbatim.grounding as rg  # noqa: E402

FEATURES = "grounding,cosine,typed_key,agreement,typed_rarest,absent_rare"
GRID = tuple(round(0.40 + 0.05 * i, 2) for i in range(11))


def columns_at(rows: list[dict[str, Any]], columns: list[str], t: float) -> np.ndarray:
    """The feature matrix with `absent_rare` read at threshold `t`."""
    rg.PARAPHRASE_CONTEXT_COSINE = t
    for r in rows:
        r.pop("_features", None)
    read = [r.setdefault("_features", rf.features(r)) for r in rows]
    return np.array([[f.get(c, 0.0) for c in columns] for f in read])


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a value of `pos` > one of `neg`), ties half."""
    if not pos or not neg:
        return None
    a, b = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return round(float((a > b).mean() + 0.5 * (a == b).mean()), 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--grid", default=",".join(str(t) for t in GRID))
    ap.add_argument("--features", default=FEATURES)
    ap.add_argument("--max-loss", type=float, default=0.03)
    ap.add_argument("--default-cap", type=float, default=0.30)
    ap.add_argument("--min-confidence", type=float, default=0.3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    grid = [float(x) for x in args.grid.split(",")]
    rows = json.loads(args.rows.read_text())
    rf.read_paraphrases(None, whole_words=False)  # READ_VARIANTS on
    cost = rf.read_context(rows, args.rows.with_name("context_sims.json"))
    rf.at_bar(rows, args.min_confidence)
    columns = [c for c in args.features.split(",") if c]

    # Diagnostic: each row's lowest contextual similarity among its absent concepts (the one
    # `absent_rare` would still count at the highest threshold), answerable vs unanswerable.
    sims: dict[str, dict[str, list[float]]] = {p: {"answerable": [], "unanswerable": []} for p in rf.PROFILES}
    for r in rows:
        read = rf.evidence_of(r)
        if read is None or read[4] is None:
            continue
        groups, texts, given, _, df = read
        ev = [*texts, *given]
        w = rg.concept_weights(r["question"], groups)
        from evidence.verbatim.scoring import grounding

        _, missing = grounding(groups, ev, w)
        unsaid = rg.absent_concepts(rg.unique_concepts(groups), set(missing), w, df)
        got = rg.context_similarity(r["question"], unsaid, ev, None)
        if got:
            sims[r["profile"]]["answerable" if r["answerable"] else "unanswerable"].append(min(got.values()))

    fam = np.array([r["family"] for r in rows])
    prof = np.array([r["profile"] for r in rows])
    found = np.array([bool(r["found"]) for r in rows])
    answerable = np.array([bool(r["answerable"]) for r in rows])
    net = np.array([r["profile"] == "verbatim" and r.get("path") == rf.SAFETY_NET for r in rows])
    already = np.array([r["profile"] == "default" and not r.get("can_answer", True) for r in rows])
    losses = dict.fromkeys(rf.PROFILES, args.max_loss)
    families = sorted(set(fam))

    train_score: dict[float, dict[str, int]] = {}
    held: dict[float, np.ndarray] = {}
    fixed: dict[str, Any] = {}
    for t in grid:
        x = columns_at(rows, columns, t)
        fitter = rf.Fitter(x, found, prof, answerable, net, found, already, args.default_cap)
        train_score[t] = {}
        held[t] = np.zeros(len(rows), dtype=bool)
        for f in [*families, "final"]:
            train = fam != f
            refused = fitter.refuse_at(train, losses)
            train_score[t][f] = int((refused & train & ~answerable).sum())
            if f != "final":
                held[t][fam == f] = refused[fam == f]
        fixed[str(t)] = {
            pr: rf.score(
                np.where(held[t][prof == pr], 0.0, 1.0), 0.5, answerable[prof == pr], found[prof == pr]
            )
            for pr in rf.PROFILES
        }

    def choose(f: str) -> float:
        return max(grid, key=lambda t: (train_score[t][f], -t))

    chosen = {f: choose(f) for f in families}
    nested = np.zeros(len(rows), dtype=bool)
    for f in families:
        nested[fam == f] = held[chosen[f]][fam == f]
    report = {
        "cost": cost,
        "auc_answerable_above": {
            p: {"auc": auc(v["answerable"], v["unanswerable"]), **{k: len(x) for k, x in v.items()}}
            for p, v in sims.items()
        },
        "chosen_per_family": chosen,
        "held_out_nested": {
            pr: rf.score(
                np.where(nested[prof == pr], 0.0, 1.0), 0.5, answerable[prof == pr], found[prof == pr]
            )
            for pr in rf.PROFILES
        },
        "chosen_final": choose("final"),
        "train_score_final": {str(t): train_score[t]["final"] for t in grid},
        "held_out_fixed_t": fixed,
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"cost of the contextual reading per judgement newly read: {cost}")
    print(
        f"AUC (answerable's lowest absent similarity above unanswerable's): {report['auc_answerable_above']}"
    )
    for t in grid:
        f = fixed[str(t)]
        print(
            f"t={t:.2f} fixed: verbatim {f['verbatim']['unanswerable_refused']} at "
            f"{f['verbatim']['false_refusals']:.3f}, default {f['default']['unanswerable_refused']} at "
            f"{f['default']['false_refusals']:.3f}; in-sample (all families) unanswerable refused "
            f"{train_score[t]['final']}"
        )
    print(f"chosen per held-out family: {chosen}")
    for pr in rf.PROFILES:
        print(f"held out, t chosen on the other families, {pr}: {report['held_out_nested'][pr]}")
    print(f"chosen on every family (would ship): t = {report['chosen_final']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
