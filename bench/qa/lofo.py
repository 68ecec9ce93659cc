"""Leave-one-family-out: tune a refusal threshold on the other families, measure it on each one.

Usage: python bench/qa/lofo.py [ROOT] [--profile P] [--feature NAME] [--max-false-refusals F]
                               [--families A,B] [--store DIR] [--json]

ROOT (default: this folder) is a QA suite (`evidence eval --qa DIR`'s layout). Every family is
indexed as `evidence eval --qa` does (re-used while unchanged) and asked once with the profile;
then, for each family in turn, `tune_refusal_threshold` picks the threshold on FEATURE (the
response's `confidence`, or a `telemetry.answer.features` entry such as `coverage`, `cosine`,
`top_score`) from the *other* families, and the held-out family is scored with it
(`refuse_below`: hits withheld below the threshold, as `withhold_below` does). The figures that
count are `held_out`: every family measured with a threshold it was not tuned on.

The same three calls serve any other parameter (a rule set, a lexicon): give
`evidence.evaluation.leave_one_family_out` your own `fit(train_outcomes) -> param` and
`apply(outcome, param) -> outcome`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    QaOutcome,
    collect_qa_outcomes,
    leave_one_family_out,
    qa_metrics,
    refuse_below,
    tune_refusal_threshold,
)
from evidence.service import EvidenceService  # noqa: E402


def feature_of(name: str) -> Callable[[QaOutcome], float]:
    def read(o: QaOutcome) -> float:
        if name == "confidence":
            return o.confidence
        return float(o.features.get(name, 0.0))  # no hits: no feature, the lowest value

    return read


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", default=str(HERE))
    p.add_argument("--profile", default="verbatim")
    p.add_argument("--feature", default="confidence")
    p.add_argument("--max-false-refusals", type=float, default=0.03)
    p.add_argument("--families", help="only these families (comma-separated)")
    p.add_argument("--store", help="store folder (default: the configured one)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    settings = Settings(store_dir=Path(args.store)) if args.store else Settings()
    service = EvidenceService(settings)
    families = [f for f in args.families.split(",") if f] if args.families else None
    try:
        outcomes, _ = collect_qa_outcomes(service, Path(args.root), profile=args.profile, families=families)
    finally:
        service.close()
    feature = feature_of(args.feature)
    report = leave_one_family_out(
        outcomes,
        lambda train: tune_refusal_threshold(train, feature, max_false_refusals=args.max_false_refusals),
        lambda o, t: refuse_below(o, t, feature),
    )
    report = {"profile": args.profile, "feature": args.feature, "untuned": qa_metrics(outcomes), **report}
    if args.json:
        print(json.dumps(report, separators=(",", ":")))
        return 0
    keys = (
        "answer_recall_600",
        "answer_recall_2000",
        "no_result_precision",
        "no_result_recall",
        "false_refusals",
    )
    print(f"{args.profile}, threshold on {args.feature}, tuned on the other families:")
    for name, m in [
        *report["families"].items(),
        ("held_out", report["held_out"]),
        ("untuned", report["untuned"]),
    ]:
        param = f"{m['parameter']:.4f}" if "parameter" in m else "-"
        print(f"{name:<20} threshold {param:>7}  " + "  ".join(f"{k} {m[k]}" for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
