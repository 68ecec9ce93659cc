"""Cost of the refusal signal's index counts per question (`verbatim.grounding.index_df`) on the
embedded backend: one BM25 `lexical` call of k = DF_CAP per term (before) against one
`term_counts` call (after), on the QA store, A/B interleaved, with the counts checked equal.

    nice -n 10 .venv/bin/python bench/df_cost.py --store build/qa-store --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.grounding import _WORD, DF_CAP, index_df
from evidence.verbatim.scoring import terms

ROOT = Path(__file__).resolve().parent / "qa"


def per_term(backend: EmbeddedBackend, index: str, words: list[str], question: str) -> dict[str, int]:
    """`index_df` as it was: one ranked `lexical` call per term, its hits counted."""
    surface: dict[str, str] = {}
    for w in _WORD.findall(question):
        if len(ts := terms(w)) == 1:
            surface.setdefault(ts[0], w)
    out: dict[str, int] = {}
    for t in dict.fromkeys(words):
        asked = t if terms(t) == (t,) else surface.get(t, t)
        out[t] = len(backend.lexical(index, asked, k=DF_CAP, kind=ChunkKind.PASSAGE))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=Path, default=Path("build/qa-store"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    backend = EmbeddedBackend(args.store)
    asked: list[tuple[str, str, list[str]]] = []
    for family in sorted(p for p in ROOT.iterdir() if (p / "questions.jsonl").exists()):
        index = f"qa-{family.name}"
        for line in (family / "questions.jsonl").read_text().splitlines():
            q = json.loads(line)["question"]
            asked.append((index, q, [t for g in question_groups(q) for t in g]))
    for index, q, words in asked:  # warm both paths (searchers, caches) before timing
        assert per_term(backend, index, words, q) == index_df(backend, index, words, q), q
    before: list[float] = []
    after: list[float] = []
    for r in range(args.rounds):
        for i, (index, q, words) in enumerate(asked):
            order = ("old", "new") if (i + r) % 2 == 0 else ("new", "old")
            for which in order:
                t0 = time.perf_counter()
                if which == "old":
                    per_term(backend, index, words, q)
                else:
                    index_df(backend, index, words, q)
                (before if which == "old" else after).append((time.perf_counter() - t0) * 1000)
    terms_per_q = statistics.mean(len(dict.fromkeys(w)) for _, _, w in asked)
    print(
        json.dumps(
            {
                "questions": len(asked),
                "rounds": args.rounds,
                "terms_per_question_mean": round(terms_per_q, 2),
                "counts_equal": True,
                "before_ms": {
                    "mean": round(statistics.mean(before), 3),
                    "p50": round(statistics.median(before), 3),
                    "p95": round(sorted(before)[int(0.95 * len(before))], 3),
                },
                "after_ms": {
                    "mean": round(statistics.mean(after), 3),
                    "p50": round(statistics.median(after), 3),
                    "p95": round(sorted(after)[int(0.95 * len(after))], 3),
                },
                "load": os.getloadavg(),
            }
        )
    )
    backend.close()


if __name__ == "__main__":
    main()
