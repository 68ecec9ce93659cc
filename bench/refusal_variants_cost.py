"""The cost of the refusal signal's presence test (docs/verbatim.md#refusal-abbreviations).

Usage: python bench/refusal_variants_cost.py [QA_ROOT] --store DIR

For every question of QA_ROOT's families (indexed as `qa-<family>` in the store, as `evidence eval
--qa` leaves them): the time of the first `initialisms` table per index, of `index_df` (with the
variants), and of `index_variants` alone; how many questions have some term present by a variant.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.search.embedded import EmbeddedBackend  # noqa: E402
from evidence.search.scoped import bind_filters  # noqa: E402
from evidence.verbatim import grounding  # noqa: E402
from evidence.verbatim.cascade import question_groups  # noqa: E402
from evidence.verbatim.grounding import index_df, index_variants  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=ROOT / "build" / "qa19")
    ap.add_argument("--store", type=Path, required=True)
    args = ap.parse_args()
    grounding.READ_VARIANTS = True  # read whether or not the shipped model reads absent_rare
    backend = EmbeddedBackend(args.store)
    view = bind_filters(backend, None)
    full: list[float] = []
    alone: list[float] = []
    tables: list[float] = []
    with_variant = 0
    for family in sorted(p for p in args.root.iterdir() if (p / "questions.jsonl").exists()):
        index = f"qa-{family.name}"
        start = time.perf_counter()
        backend.initialisms(index)
        tables.append(time.perf_counter() - start)
        for line in (family / "questions.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            q = json.loads(line)["question"]
            words = [t for g in question_groups(q) for t in g]
            start = time.perf_counter()
            df = index_df(view, index, words, q)
            full.append(time.perf_counter() - start)
            zero = [t for t, n in (df or {}).items() if n == 0]
            start = time.perf_counter()
            found = index_variants(view, index, zero, q) if zero else frozenset()
            alone.append(time.perf_counter() - start)
            with_variant += bool(found)
    backend.close()

    def ms(xs: list[float], p: float) -> float:
        return sorted(xs)[int(p * (len(xs) - 1))] * 1000

    print(
        f"questions {len(full)}, with a variant {with_variant}; index_df (with the variants) p50 "
        f"{ms(full, 0.5):.2f} p95 {ms(full, 0.95):.2f} ms; the variants alone p50 {ms(alone, 0.5):.2f} "
        f"p95 {ms(alone, 0.95):.2f} max {max(alone) * 1000:.1f} ms; first table per index max "
        f"{max(tables):.2f} s, all {sum(tables):.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
