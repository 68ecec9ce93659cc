"""The coach's hybrid recall with each fusion method (issue 25 item 4): why z-scores, measured.

    python bench/coach_fusion.py [--store DIR]

Runs `bench/coach_calibrate.py --evaluate-only` (the 92 labelled queries of the sample graph,
MiniLM, the shipped calibration) once per fusion method of the coach's recall stage and prints
the figures side by side: can_answer and needs_clarification precision/recall, LO hit@1/@3.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "bench"))

import coach_calibrate  # noqa: E402

from evidence.coach import profile  # noqa: E402
from evidence.rank.first_stage import FirstStage, HybridRecall  # noqa: E402
from evidence.rank.fusion import FusionConfig, FusionMethod  # noqa: E402
from evidence.rank.stages import CandidateLimit, Rerank  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/tmp/evidence-coach-calibration")
    args = ap.parse_args()
    out = {}
    for method in (FusionMethod.ZSCORE, FusionMethod.RRF, FusionMethod.MINMAX):
        fusion = FusionConfig(method=method)

        def stages(budget: float | None = profile.RERANK_BUDGET_MS, fusion: FusionConfig = fusion) -> tuple:  # type: ignore[type-arg]
            recall = profile.NodeRecall(inner=HybridRecall(ours=FirstStage(fusion=fusion)))
            return (recall, CandidateLimit(), Rerank(budget_ms=budget))

        profile.recall_stages = stages  # type: ignore[assignment]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            coach_calibrate.main(["--evaluate-only", "--json", "--store", args.store])
        m = json.loads(buf.getvalue().strip().splitlines()[-1])
        m = m.get("metrics", m)
        out[method.value] = {
            k: m.get(k)
            for k in ("can_answer", "needs_clarification", "lo_hit_at_1", "lo_hit_at_3", "intent_accuracy")
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
