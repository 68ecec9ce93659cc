"""Fit and measure the answerability signal (`evidence.rank.confidence`) on SciFact.

Usage: python bench/answerability.py [--dataset DIR] [--store DIR] [--ood FILE] [--json]

In-domain: SciFact's test queries against the SciFact index (each has a relevant abstract).
Out-of-domain: questions from other fields (bench/data/answerability/out_of_domain.txt, written
for this project) against the same index: no abstract answers them. Each query goes through the
`default` profile with the relevance floor's verdict recorded (features from
`telemetry.answer`). A logistic model over (top-hit cosine, top-hit query-term coverage) is
fitted with Newton's method; 5-fold cross-validation gives the figures reported in the README
(precision and recall of `can_answer=false`, i.e. of recognising an out-of-domain question), and
the coefficients fitted on all data are printed for `rank/confidence.py`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import ensure_indexed, find_dataset, load_qrels, load_queries  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402

FEATURES = ("dense", "coverage")


def collect(service: EvidenceService, index: str, queries: list[str]) -> list[dict[str, float]]:
    rows = []
    for q in queries:
        resp = service.retrieve(index, RetrieveRequest(query=q, profile="default"))
        answer = resp.telemetry.answer
        assert answer is not None and answer.basis == "dense", answer
        rows.append(dict(answer.features))
    return rows


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 50) -> np.ndarray:
    """Logistic regression (bias last) by Newton's method with a small ridge for stability."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + l2 * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(np.hstack([x, np.ones((len(x), 1))]) @ w)))


def refusal_metrics(y: np.ndarray, p: np.ndarray, bar: float = 0.5) -> dict[str, float]:
    """Precision/recall of can_answer=false (y=1 means answerable)."""
    refuse = p < bar
    ood = y == 0
    tp = int(np.sum(refuse & ood))
    prec = tp / max(1, int(np.sum(refuse)))
    rec = tp / max(1, int(np.sum(ood)))
    in_domain_kept = float(np.mean(~refuse[y == 1]))
    return {
        "refuse_precision": round(prec, 4),
        "refuse_recall": round(rec, 4),
        "in_domain_answered": round(in_domain_kept, 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--store", type=Path, default=ROOT / ".bench" / "store")
    ap.add_argument(
        "--ood", type=Path, default=ROOT / "bench" / "data" / "answerability" / "out_of_domain.txt"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    service = EvidenceService(Settings(store_dir=args.store))
    ds = find_dataset(args.dataset)
    index, _ = ensure_indexed(service, ds, with_vectors=True, progress=None)
    in_domain = [t for _, t in load_queries(ds.queries, set(load_qrels(ds.qrels)))]
    ood = [line.strip() for line in args.ood.read_text().splitlines() if line.strip()]
    rows = collect(service, index, in_domain) + collect(service, index, ood)
    x = np.array([[r[f] for f in FEATURES] for r in rows])
    y = np.array([1.0] * len(in_domain) + [0.0] * len(ood))
    # 5-fold cross-validation, stratified by shuffling each class separately
    rng = random.Random(13)
    folds: list[list[int]] = [[] for _ in range(5)]
    for cls in (0.0, 1.0):
        idx = [i for i in range(len(y)) if y[i] == cls]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[j % 5].append(i)
    p_cv = np.zeros(len(y))
    for k in range(5):
        test = folds[k]
        train = [i for j, f in enumerate(folds) if j != k for i in f]
        w = fit(x[train], y[train])
        p_cv[test] = predict(w, x[test])
    w_all = fit(x, y)
    out = {
        "in_domain": len(in_domain),
        "out_of_domain": len(ood),
        "features": list(FEATURES),
        "cv": refusal_metrics(y, p_cv),
        "coefficients": {
            **{f: round(float(c), 4) for f, c in zip(FEATURES, w_all[:-1], strict=True)},
            "bias": round(float(w_all[-1]), 4),
        },
        "cosine_quantiles": {
            "in_domain": [round(float(q), 3) for q in np.quantile(x[y == 1, 0], [0.01, 0.05, 0.5])],
            "out_of_domain": [round(float(q), 3) for q in np.quantile(x[y == 0, 0], [0.5, 0.95, 0.99])],
        },
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
