"""Candidate refusal features, each added to the shipped ones, measured leave-one-family-out,
then with the form chosen inside each fold (docs/verbatim.md#refusal-key-ablation).

Usage: python bench/refusal_select.py ROWS_JSON CANDIDATES [--max-loss 0.03] [--nested]

ROWS_JSON: `bench/refusal_rows.py --ablation` rows (the key-term ablation's rankings recorded);
CANDIDATES: comma-separated features of `bench/refusal_fit.py` (`kab_…`, `rab_…`: `key_ablation`;
`ctr_…`: `index_contrast`). Prints each candidate's alone AUC (answerable vs unanswerable, per
profile) and its held-out figures as `make refusal-fit` reads them (default profile at the bar
0.3, floor capped at 0.30). `--nested`: for each held-out family, the candidate (or none) whose
own leave-one-family-out on the other six refuses the most unanswerable questions within the
budget in both profiles is chosen, and the held-out family scored with it: what picking the best
of many forms is worth on a family the choice has not seen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import refusal_fit as rf

SHIPPED = ["grounding", "cosine", "typed_key", "agreement", "typed_rarest"]


def auc(x: np.ndarray, y: np.ndarray) -> float:
    pos, neg = x[y][:, None], x[~y][None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def gain(held: dict[str, Any], max_loss: float) -> int:
    """Unanswerable questions refused over both profiles; a profile over the budget disqualifies."""
    total = 0
    for pr in rf.PROFILES:
        n = int(held[pr]["unanswerable_refused"].split("/")[0])
        total += n if held[pr]["false_refusals"] <= max_loss + 1e-9 else -1000
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("candidates")
    ap.add_argument("--max-loss", type=float, default=0.03)
    ap.add_argument("--nested", action="store_true")
    args = ap.parse_args()
    rows = json.loads(args.rows.read_text())
    for r in rows:
        if r["profile"] == "default":
            r["can_answer"] = r["confidence"] >= 0.3
    candidates = [c for c in args.candidates.split(",") if c]
    if any(c in rf.CONTRAST_FEATURES for c in candidates):
        rf.index_contrast(rows)
    read = [r.setdefault("_features", rf.features(r)) for r in rows]
    answerable = np.array([bool(r["answerable"]) for r in rows])
    prof = np.array([r["profile"] for r in rows])
    for pr in rf.PROFILES:
        sel = prof == pr
        aucs = {
            c: auc(np.array([f.get(c, 0.0) for f in read])[sel], answerable[sel])
            for c in SHIPPED + candidates
        }
        print(f"AUC {pr}: " + " ".join(f"{c} {a:.3f}" for c, a in aucs.items()))
    forms: list[list[str]] = [[], *([c] for c in candidates)]
    for form in forms:
        held = rf.run(rows, args.max_loss, SHIPPED + form, 0.30, budget="answerable")["held_out"]
        print(
            f"+{'+'.join(form) or 'none':<16} verbatim {held['verbatim']['unanswerable_refused']} at "
            f"{held['verbatim']['false_refusals']:.3f}, default {held['default']['unanswerable_refused']} at "
            f"{held['default']['false_refusals']:.3f}",
            flush=True,
        )
    if not args.nested:
        return 0
    fam = np.array([r["family"] for r in rows])
    refused = np.zeros(len(rows), dtype=bool)
    for f in sorted(set(fam)):
        inner = [r for r in rows if r["family"] != f]
        scored = [
            (
                gain(
                    rf.run(inner, args.max_loss, SHIPPED + form, 0.30, budget="answerable")["held_out"],
                    args.max_loss,
                ),
                -k,
            )
            for k, form in enumerate(forms)
        ]
        chosen = forms[-max(scored)[1]]
        detail: dict[str, np.ndarray] = {}
        rf.run(rows, args.max_loss, SHIPPED + chosen, 0.30, budget="answerable", detail=detail)
        refused[fam == f] = detail["refused"][fam == f]
        print(f"nested: {f} chose {'+'.join(chosen) or 'none'}", flush=True)
    for pr in rf.PROFILES:
        sel = prof == pr
        got, asked = int((refused & sel & ~answerable).sum()), int((sel & ~answerable).sum())
        false = (refused & sel & answerable).sum() / (sel & answerable).sum()
        print(f"nested held out {pr}: {got}/{asked} at {false:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
