"""cold17: `verbatim.spans.best_sub_span` (one run analysed per start) against the pairs' pass it
replaced (every (start, end) run analysed), on long many-clause spans; `scoring.terms`' memo
emptied before each call (a span's runs are new text in a real question). Same answers checked.

    PYTHONPATH=. .venv/bin/python bench/data/session45/cold17_subspan_bench.py
"""

from __future__ import annotations

import random
import time

from evidence.verbatim.scoring import SpanStats, terms
from evidence.verbatim.spans import best_sub_span
from tests.unit.verbatim.test_trim import _clauses, pairs_best_sub_span


def main() -> None:
    rng = random.Random(45)
    print("| concepts | clauses | chars | max_chars | pairs' pass ms | linear ms | same |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for n in (10, 40, 120, 400):
        body = _clauses(rng, n)
        # near: two common words, a part is found early; apart: two words only at the span's two
        # ends, no part keeps both (the pairs' pass analysed every run within the bound)
        for kind, text, groups in (
            ("near", body, [("paus",), ("multipli",)]),
            ("apart", f"Zymurgy, {body} quixotic.", [("zymurgi",), ("quixot",)]),
        ):
            c = SpanStats([text, "pause"]).concepts(groups)
            _time(kind, n, text, c)


def _time(kind: str, n: int, text: str, c: list[tuple[float, frozenset[str]]]) -> None:
    for bound in (300, 600):
        out = []
        times = []
        for fn in (pairs_best_sub_span, best_sub_span):
            best = float("inf")
            for _ in range(5):
                terms.cache_clear()
                t0 = time.perf_counter()
                got = fn(text, c, bound)
                best = min(best, time.perf_counter() - t0)
            out.append(got)
            times.append(best * 1000)
        same = "yes" if out[0] == out[1] else "NO"
        print(f"| {kind} | {n} | {len(text)} | {bound} | {times[0]:.2f} | {times[1]:.2f} | {same} |")


if __name__ == "__main__":
    main()
