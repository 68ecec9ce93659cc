"""Query embedding at its exact width against padding to a multiple of 32 (the document path).

Usage: python bench/query_embedding.py [--dataset DIR] [--rounds 3]

Embeds SciFact's test queries with the shipped model both ways, alternating query by query so
both see the same machine load, and prints p50/p95/mean ms per query, the widths, and how far
the two vectors of a query are apart (the int8 model quantises activations per tensor, so padding
rows can move a vector slightly). Retrieval quality of the change: `evidence eval --mode
dense|hybrid`, which embeds its queries with `embed_query`.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.embed.minilm import MiniLMEmbedder  # noqa: E402
from evidence.evaluation import find_dataset, load_qrels, load_queries  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ds = find_dataset(args.dataset)
    texts = [t for _, t in load_queries(ds.queries, set(load_qrels(ds.qrels)))]
    emb = MiniLMEmbedder()
    inputs = [emb.windows([t], first_only=True)[0][0] for t in texts]
    for seq in inputs[:20]:  # warm-up: session, arena
        emb.embed_ids([seq], pad_to=32)
        emb.embed_ids([seq], pad_to=1)
    times: dict[int, list[float]] = {32: [], 1: []}
    vecs: dict[int, list[np.ndarray]] = {32: [], 1: []}
    for r in range(args.rounds):
        for i, seq in enumerate(inputs):
            order = (32, 1) if (i + r) % 2 == 0 else (1, 32)
            for pad in order:
                t0 = time.perf_counter()
                v = emb.embed_ids([seq], pad_to=pad)[0]
                times[pad].append((time.perf_counter() - t0) * 1000)
                if r == 0:
                    vecs[pad].append(v)
    lengths = [len(s) for s in inputs]
    padded = [-(-n // 32) * 32 for n in lengths]
    print(
        f"{len(texts)} queries x {args.rounds} rounds; width p50 {statistics.median(lengths)} "
        f"(max {max(lengths)}), padded p50 {statistics.median(padded)}"
    )
    for pad, name in ((32, "padded to 32"), (1, "exact width")):
        xs = times[pad]
        p50, p95, mean = pct(xs, 50), pct(xs, 95), statistics.fmean(xs)
        print(f"{name:<13} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  mean {mean:6.2f} ms")
    cos = [float(a @ b) for a, b in zip(vecs[32], vecs[1], strict=True)]
    print(f"cosine(padded, exact): min {min(cos):.6f}, mean {statistics.fmean(cos):.6f}")
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
