"""`pair_index` for recorded refusal rows (session 45, ref17's fifth candidate).

Usage: python bench/refusal_pairs.py rows.json QA_ROOT --store DIR > pairs.json

For each row (question, profile), the question's two subject concepts that some passage of the
index uses and that it uses least (`grounding.index_pair`), and whether one passage of the index
holds both (`grounding.pair_in_index`: one BM25 call). Written as {family: {question|profile:
value}}; `bench/refusal_fit.py --pairs pairs.json` reads it as the `pair_index` feature, and
`bench/refusal_shape.py --pairs pairs.json` measures its AUC.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import ensure_qa_index, find_qa_families  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402
from evidence.verbatim.grounding import TermCounts, pair_in_index  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("root", type=Path)
    ap.add_argument("--store", type=Path, required=True)
    args = ap.parse_args()
    rows = json.loads(args.rows.read_text())
    service = EvidenceService(Settings(store_dir=args.store))
    out: dict[str, dict[str, Any]] = {}
    times: list[float] = []
    try:
        families = sorted({r["family"] for r in rows})
        for family in find_qa_families(args.root, families):
            index, _ = ensure_qa_index(service, family)
            mine = out.setdefault(family.name, {})
            for r in rows:
                j = r.get("judged")
                if r["family"] != family.name or not j or j.get("df") is None:
                    continue
                df = TermCounts(j["df"], j.get("df_variants") or ())
                t0 = time.perf_counter()
                mine[f"{r['question']}|{r['profile']}"] = pair_in_index(
                    service.backend, index, r["question"], [tuple(g) for g in j["groups"]], df
                )
                times.append(time.perf_counter() - t0)
            print(f"{family.name}: done", file=sys.stderr)
    finally:
        service.close()
    times.sort()
    if times:
        print(
            f"pair_in_index: {len(times)} calls, p50 {1000 * times[len(times) // 2]:.1f} ms, "
            f"p95 {1000 * times[int(len(times) * 0.95)]:.1f} ms",
            file=sys.stderr,
        )
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
