"""Ranking metrics with pytrec_eval / trec_eval semantics, and span metrics over rationale sentences.

nDCG@k with graded gains and a log2 discount (ideal DCG from the judged relevant documents),
recall@k, MRR@k; a query with no hit scores 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def ndcg_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def documents_from_chunks(doc_ids: Sequence[str]) -> list[str]:
    """Ranked chunks → ranked documents, each at its best chunk's position."""
    return list(dict.fromkeys(doc_ids))


# --- span metrics (rationale sentences) -----------------------------------------------------


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


def span_metrics(
    retrieved: Sequence[tuple[str, int, int]], gold: Sequence[tuple[str, int, int]], k: int
) -> tuple[float, float]:
    """(sentence recall@k, span precision@k) as the dataset README defines them."""
    top = retrieved[:k]
    covered = sum(
        1
        for gd, g0, g1 in gold
        if any(d == gd and _overlap(s0, s1, g0, g1) * 2 >= (g1 - g0) for d, s0, s1 in top)
    )
    precise = sum(
        1
        for d, s0, s1 in top
        if any(d == gd and _overlap(s0, s1, g0, g1) * 2 >= (s1 - s0) for gd, g0, g1 in gold)
    )
    return covered / len(gold) if gold else 0.0, precise / len(top) if top else 0.0
