"""What the paraphrase reading of `absent_rare` costs per question (docs/verbatim.md#refusal-paraphrase).

Usage: python bench/refusal_paraphrase_cost.py [--context] ROWS.json [ROWS.json ...]

Reads rows recorded by `bench/refusal_rows.py` (each judgement's evidence texts, the question's
concepts and their passage counts) and times, per row, what `read_evidence` adds when the model
reads `absent_rare`: `absent_concepts` and, when some concept is a candidate, `paraphrased` over
the evidence texts (static word vectors, a table lookup per distinct word). The table's load
(`embed.static.piece_table`, once per process) is timed apart. Two passes over the rows: the
first reads every word new to the process (cold: its word vectors are computed then), the second
with the words cached (warm, a long-running server's state). Prints the rows read, how many had a
candidate and how many a paraphrase, and p50/p95/max milliseconds per row, per pass.

`--context`: the contextual reading instead (`paraphrased_in_context`, docs/verbatim.md
#refusal-context): one MiniLM word-piece pass (`embed_tokens`) over the question and the evidence
texts for each row with a candidate, the model loaded before timing; one pass (a text's pieces are
not kept between rows: the evidence texts, with their headings, rarely repeat across questions),
wall-clock and CPU milliseconds per row.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.embed.static import piece_table  # noqa: E402
from evidence.verbatim import grounding as rg  # noqa: E402
from evidence.verbatim.scoring import grounding  # noqa: E402


def main() -> int:
    context = "--context" in sys.argv[1:]
    t0 = time.perf_counter()
    tokens = None
    if context:
        from evidence.embed.minilm import MiniLMEmbedder

        tokens = MiniLMEmbedder().embed_tokens
        tokens(["warm up"])
    else:
        piece_table()
    load = time.perf_counter() - t0
    work = []
    for path in (a for a in sys.argv[1:] if a != "--context"):
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
    if tokens is not None:
        return context_cost(work, tokens, load)
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


def context_cost(work: list[tuple[Any, ...]], tokens: Any, load: float) -> int:
    """`--context`: per row, `absent_concepts` and `paraphrased_in_context` (wall and CPU ms)."""
    wall: list[float] = []
    cpu: list[float] = []
    candidates = said = 0
    for q, concepts, missing, weights, df, texts in work:
        t, c = time.perf_counter(), time.process_time()
        unsaid = rg.absent_concepts(concepts, missing, weights, df)
        found = rg.paraphrased_in_context(q, unsaid, texts, tokens) if unsaid else frozenset()
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        candidates += bool(unsaid)
        said += bool(found)
    for name, took in (("wall", sorted(wall)), ("cpu", sorted(cpu))):
        print(
            f"context ({name}): model load {load * 1000:.0f} ms; rows {len(took)}, with a candidate "
            f"{candidates}, with a paraphrase {said}; per row p50 {statistics.median(took):.3f} ms, "
            f"p95 {took[int(0.95 * (len(took) - 1))]:.3f} ms, max {took[-1]:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
