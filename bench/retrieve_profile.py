"""Where a whole retrieve's time goes on a `make bench-scale` store (docs/scale.md#overlapping-the-legs).

Times `EvidenceService.retrieve` (default profile, hybrid first stage, query embedding included)
over SciFact's test queries, with or without the bench's 10% metadata filter, and prints wall time
and CPU time per retrieve (CPU counts every thread of the process: on a shared machine it is the
steadier figure), each stage's time from the response's telemetry, the first stage's legs, and
the serving RSS. `--cprofile` adds the main thread's cumulative profile.

    .venv/bin/python bench/retrieve_profile.py --store build/scale/1000000 [--filter] [--queries 200]

Opens the store read-mostly (no write is asked for); the first open of a store without its ANN
file builds it.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import find_dataset, load_qrels, load_queries, percentile  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402

FILTER = {"type": "followup_document"}  # bench/scale.py's: 10% of the documents


def _line(xs: list[float]) -> str:
    return f"p50 {percentile(xs, 50):6.1f}  p95 {percentile(xs, 95):6.1f}  mean {statistics.mean(xs):6.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True, help="a store dir, e.g. build/scale/1000000")
    ap.add_argument("--index", default="scale")
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--filter", action="store_true", help="with the bench's 10%% metadata filter")
    ap.add_argument("--cprofile", action="store_true", help="print the main thread's profile")
    args = ap.parse_args()
    svc = EvidenceService(Settings(store_dir=args.store, default_index=args.index))
    ds = find_dataset(args.dataset)
    queries = [t for _, t in load_queries(ds.queries, set(load_qrels(ds.qrels)))][: args.queries]
    filters = FILTER if args.filter else None
    for q in queries[:3]:  # warm: model session, ANN file, the filter's rowids
        svc.retrieve(args.index, RetrieveRequest(query=q, filters=filters))
    wall: list[float] = []
    cpu: list[float] = []
    parts: dict[str, list[float]] = {}
    prof = cProfile.Profile() if args.cprofile else None
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        resp = svc.retrieve(args.index, RetrieveRequest(query=q, filters=filters))
        if prof is not None:
            prof.disable()
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        for s in resp.telemetry.stages:
            parts.setdefault(s.name, []).append(s.ms)
            for key, value in (s.detail or {}).items():
                if key.endswith("_ms"):
                    parts.setdefault(f"{s.name}.{key}", []).append(float(value))
    print(f"{len(queries)} queries, filter {filters}")
    print(f"{'wall ms':28s}", _line(wall))
    print(f"{'cpu ms (all threads)':28s}", _line(cpu))
    for name, xs in parts.items():
        if max(xs) >= 0.5:  # stages that never reach half a millisecond are left out
            print(f"  {name:26s}", _line(xs))
    with open("/proc/self/status") as fh:
        rss = next(line for line in fh if line.startswith("VmRSS:")).split()[1]
    print(f"RSS {int(rss) / 1024:.0f} MB")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
