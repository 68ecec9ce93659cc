"""The refusal signal's held-out misses, question by question (issue 22 item 5).

Usage: python bench/refusal_misses.py rows.json [--features …] [--min-confidence 0.3] [--json]

Runs `bench/refusal_fit.py`'s leave-one-family-out fit (the shipped settings by default) on the
rows of `bench/refusal_rows.py` and lists, per profile, the unanswerable questions that are NOT
refused held out and the answerable ones that ARE, with every feature `read_evidence` reads, the
held-out probability and floor, the concepts the evidence misses and the first evidence text: the
material the refusal section of docs/verbatim.md groups by why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))

from refusal_fit import ABLATION_FEATURES, PROFILES, TOKEN_FEATURES, read_sentences, read_tokens, run

import evidence.verbatim.grounding as rg
from evidence.verbatim.grounding import read_evidence

SHIPPED = "grounding,cosine,typed_key,agreement,typed_rarest"
SHOWN = ("grounding", "cosine", "typed_key", "agreement", "typed_rarest", "answer_type", "index_absent")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--features", default=SHIPPED)
    ap.add_argument("--min-confidence", type=float, default=0.3)
    ap.add_argument("--show", default=",".join(SHOWN), help="the features printed per question")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    # `absent_rare` and `absent_named` are read whether or not the shipped model reads them, as
    # `refusal_fit.py` does, so that `--features …,absent_named` and `--show` see them.
    rg.READ_RARE = rg.READ_NAMED = True
    rows = json.loads(args.rows.read_text())
    for r in rows:
        if r["profile"] == "default":
            r["can_answer"] = r["confidence"] >= args.min_confidence
    columns = [c for c in args.features.split(",") if c]
    show = [c for c in args.show.split(",") if c]
    if any(c in TOKEN_FEATURES for c in [*columns, *show]):
        read_tokens(rows, args.rows.with_name("token_best.json"))
    if any(c in ABLATION_FEATURES for c in [*columns, *show]):
        read_sentences(rows, args.rows.with_name("sent_vectors.json"))
    detail: dict[str, np.ndarray] = {}
    run(rows, 0.03, columns, 0.30, budget="answerable", label="found", detail=detail)
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        refused = bool(detail["refused"][i])
        if r["answerable"] == refused:  # an answerable question refused, an unanswerable one kept
            f = r["_features"]
            judged = r.get("judged") or {}
            out.append(
                {
                    "profile": r["profile"],
                    "kind": "false refusal" if r["answerable"] else "answered",
                    "family": r["family"],
                    "question": r["question"],
                    "path": r.get("path"),
                    "found": r["found"],
                    "p": round(float(detail["p"][i]), 3),
                    "floor": round(float(detail["bar"][i]), 3),
                    "cosine_bar": bool(detail["already"][i]),
                    **{c: round(float(f.get(c, 0.0)), 3) for c in show},
                    "missing": [],
                    "text": (judged.get("texts") or [""])[0][:160].replace("\n", " "),
                }
            )
            if judged.get("texts"):
                reading = read_evidence(
                    r["question"],
                    judged["texts"],
                    [tuple(g) for g in judged["groups"]],
                    judged.get("given") or (),
                    judged.get("bodies"),
                    df=judged.get("df"),
                )
                out[-1]["missing"] = list(reading.missing)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for pr in PROFILES:
        for kind in ("answered", "false refusal"):
            sel = [o for o in out if o["profile"] == pr and o["kind"] == kind]
            print(f"== {pr}: {kind} ({len(sel)})")
            for o in sel:
                feats = " ".join(f"{c[:6]}={o[c]}" for c in show)
                print(
                    f"{o['family'][:14]:<14} p={o['p']} fl={o['floor']}{' COS' if o['cosine_bar'] else ''}"
                    f" {o['path']} found={o['found']} | {o['question']}\n    {feats} missing={o['missing']}"
                    f"\n    > {o['text']}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
