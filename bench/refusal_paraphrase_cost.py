"""What the paraphrase reading of `absent_rare` costs per question (docs/verbatim.md#refusal-paraphrase).

Usage: python bench/refusal_paraphrase_cost.py ROWS.json [ROWS.json ...]

Reads rows recorded by `bench/refusal_rows.py` (each judgement's evidence texts, the question's
concepts and their passage counts) and times, per row, what `read_evidence` adds when the model
reads `absent_rare`: `absent_concepts` and, when some concept is a candidate, `paraphrased` over
the evidence texts (static word vectors, a table lookup per distinct word). The table's load
(`embed.static.piece_table`, once per process) is timed apart. Two passes over the rows: the
first reads every word new to the process (cold: its word vectors are computed then), the second
with the words cached (warm, a long-running server's state). Prints the rows read, how many had a
candidate and how many a paraphrase, and p50/p95/max milliseconds per row, per pass.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.embed.static import piece_table  # noqa: E402
from evidence.verbatim import grounding as rg  # noqa: E402
from evidence.verbatim.scoring import grounding  # noqa: E402


def main() -> int:
    t0 = time.perf_counter()
    piece_table()
    load = time.perf_counter() - t0
    work = []
    for path in sys.argv[1:]:
        for row in json.loads(Path(path).read_text()):
            judged = row.get("judged")
            if not judged or not judged["texts"] or judged.get("df") is None:
                continue
            groups = [tuple(g) for g in judged["groups"]]
            texts = [*judged["texts"], *(judged.get("given") or ())]
            df = rg.TermCounts(judged["df"], judged.get("df_variants") or ())
            weights = rg.concept_weights(row["question"], groups)
            _, missing = grounding(groups, texts, weights)
            work.append((row["question"], rg.unique_concepts(groups), set(missing), weights, df, texts))
    for name in ("cold", "warm"):
        took: list[float] = []
        candidates = said = 0
        for q, concepts, missing, weights, df, texts in work:
            t = time.perf_counter()
            unsaid = rg.absent_concepts(concepts, missing, weights, df)
            found = rg.paraphrased(q, unsaid, texts) if unsaid else frozenset()
            took.append((time.perf_counter() - t) * 1000)
            candidates += bool(unsaid)
            said += bool(found)
        took.sort()
        print(
            f"{name}: table load {load * 1000:.0f} ms; rows {len(took)}, with a candidate {candidates}, "
            f"with a paraphrase {said}; per row p50 {statistics.median(took):.3f} ms, "
            f"p95 {took[int(0.95 * (len(took) - 1))]:.3f} ms, max {took[-1]:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
