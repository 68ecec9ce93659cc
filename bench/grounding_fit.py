"""Calibrate the grounding check's refusal floor, leave-one-family-out (the unweighted share of
concepts, before the shared refusal signal; superseded by `bench/refusal_fit.py`, which fits
what ships now: `verbatim.grounding`).

Usage: python bench/qa_budget.py QA_ROOT --uncalibrated --json > rows.json
       python bench/grounding_fit.py rows.json [--max-false-refusals 0.03] [--json]

`rows.json` holds, per family and question, the grounding of the evidence the paths found with
every refusal floor off (`verbatim`: the cascade's; `default`: `EVIDENCE_ANSWER_MIN_GROUNDING`),
whether the evidence held an expected answer, and (default) the calibrated `can_answer`.

For each held-out family the floors are fitted on the other families: the floor (grid of 0.01;
verbatim also the safety net's own floor, `HYBRID_FACTSPAN`, grid of 0.02) refusing the most
unanswerable questions while false refusals — answerable questions refused — stay within
`--max-false-refusals` of the answerable ones; then the held-out family is scored with it: NO_RESULT recall
(unanswerable refused), false refusals, and answer recall (answerable, found and not refused).
The floor fitted on every family was what shipped before `verbatim.grounding.judge` (its figures are
the "before" of docs/verbatim.md#honest-refusal).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

GRID = [i / 100 for i in range(101)]


#: The safety net's own floor (verbatim): its evidence passed no rule's bar, so it may need more.
SAFETY_NET = "HYBRID_FACTSPAN"


def refused(row: dict[str, Any], floor: float, net: float | None = None) -> bool:
    g = row["grounding"]
    if row["profile"] == "verbatim":
        bar = max(floor, net) if net is not None and row.get("path") == SAFETY_NET else floor
        return not row["hits"] or g is None or g < bar
    return not row["can_answer"] or (g is not None and g < floor)


def score(rows: list[dict[str, Any]], floor: float, net: float | None = None) -> dict[str, Any]:
    ans = [r for r in rows if r["answerable"]]
    unans = [r for r in rows if not r["answerable"]]
    ref_ans = sum(refused(r, floor, net) for r in ans)
    ref_un = sum(refused(r, floor, net) for r in unans)
    total_ref = ref_ans + ref_un
    return {
        "floor": floor,
        "net": net,
        "recall": round(sum(r["found"] and not refused(r, floor, net) for r in ans) / len(ans), 4)
        if ans
        else 0.0,
        "no_result_recall": round(ref_un / len(unans), 4) if unans else 1.0,
        "no_result_precision": round(ref_un / total_ref, 4) if total_ref else 1.0,
        "false_refusals": round(ref_ans / len(ans), 4) if ans else 0.0,
    }


def fit(rows: list[dict[str, Any]], max_fr: float, *, two: bool = False) -> tuple[float, float | None]:
    """The floors refusing the most unanswerable questions with false refusals within `max_fr`
    (ties: the higher answer recall, then the lower floors)."""
    best: tuple[tuple[float, float, float, float], float, float | None] | None = None
    nets: list[float | None] = [*GRID[::2]] if two else [None]
    for floor in GRID:
        for net in nets:
            if net is not None and net < floor:
                continue
            s = score(rows, floor, net)
            if s["false_refusals"] > max_fr:
                continue
            key = (s["no_result_recall"], s["recall"], -floor, -(net or 0.0))
            if best is None or key > best[0]:
                best = (key, floor, net)
    return (best[1], best[2]) if best else (0.0, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--max-false-refusals", type=float, default=0.03)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = json.loads(args.rows.read_text())
    out: dict[str, Any] = {}
    for profile in ("verbatim", "default"):
        fams = {f: [r for r in v["rows"] if r["profile"] == profile] for f, v in data.items()}
        held: dict[str, Any] = {}
        two = profile == "verbatim"
        for f, rows in fams.items():
            train = [r for g, rs in fams.items() if g != f for r in rs]
            floor, net = fit(train, args.max_false_refusals, two=two)
            held[f] = score(rows, floor, net)
        pooled = [r for rs in fams.values() for r in rs]
        out[profile] = {
            "held_out": held,
            "all": score(pooled, *fit(pooled, args.max_false_refusals, two=two)),
        }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for profile, v in out.items():
        print(f"{profile}: fitted on all families: {v['all']}")
        for f, s in v["held_out"].items():
            print(f"  held out {f:20} {s}")


if __name__ == "__main__":
    main()
