"""Cold start of the coach (issue 25 item 2): N fresh processes, each asks the same question twice.

    python bench/coach_cold_start.py --store DIR --index tutor [--runs 10] [--json]

Reports, per process, the wall time of the first request (model load included wherever the code
charges it), its `telemetry.total_ms` (what the request's budget saw), its bullet count and
whether the first response equals the second (telemetry aside). The index must hold a graph
(`evidence index shared/evidence/demo/data/coach/algebra-calculus.yaml --index tutor --kind graph`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = r"""
import json, sys, time
from pathlib import Path
from evidence.config import Settings
from evidence.coach.contract import CoachRequest
from evidence.service import EvidenceService
store, index, query = sys.argv[1], sys.argv[2], sys.argv[3]
service = EvidenceService(Settings(store_dir=Path(store)))
request = CoachRequest(query=query)
t0 = time.perf_counter()
first = service.coach(index, request)
wall = (time.perf_counter() - t0) * 1000
second = service.coach(index, request)
print(json.dumps({
    "first_wall_ms": round(wall, 1),
    "first_total_ms": first.telemetry.total_ms,
    "first_bullets": len(first.minimal_context),
    "second_bullets": len(second.minimal_context),
    "first_degraded": first.telemetry.degraded,
    "same": first.model_dump(exclude={"telemetry"}) == second.model_dump(exclude={"telemetry"}),
}))
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--index", default="tutor")
    p.add_argument("--query", default="How do I solve a quadratic equation?")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, args.store, args.index, args.query],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary = {
        "runs": len(rows),
        "first_wall_ms_p50": statistics.median(r["first_wall_ms"] for r in rows),
        "first_wall_ms_max": max(r["first_wall_ms"] for r in rows),
        "first_total_ms_p50": statistics.median(r["first_total_ms"] for r in rows),
        "first_total_ms_max": max(r["first_total_ms"] for r in rows),
        "first_bullets": sorted(r["first_bullets"] for r in rows),
        "same_as_second": sum(r["same"] for r in rows),
        "degraded_first": sum(bool(r["first_degraded"]) for r in rows),
    }
    print(
        json.dumps(
            {"summary": summary, "rows": rows} if args.json else summary, indent=None if args.json else 1
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
