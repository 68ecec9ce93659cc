"""Fit and measure the answerability signal (`evidence.rank.confidence`) on SciFact.

Usage: python bench/answerability.py [--dataset DIR] [--store DIR] [--ood FILE] [--json]

In-domain: SciFact's test queries against the SciFact index (each has a relevant abstract).
Out-of-domain: questions from other fields (bench/data/answerability/out_of_domain.txt, written
for this project) against the same index: no abstract answers them. Each query goes through the
`default` profile; the signal's inputs are read from `telemetry.answer.features` (`cosine`,
`coverage`: the best of the first hits). Two logistic models are fitted with Newton's method:
`dense` over (cosine, coverage) and `lexical` over coverage alone (lexical-only indexes and
embedders without a calibration). 5-fold cross-validation (stratified, fixed seed) gives the
figures reported in docs/ranking.md: precision and recall of `can_answer=false` (recognising an
out-of-domain question) and the share of in-domain questions still answered, plus how many
in-domain questions whose hits held a relevant abstract would lose them to a floor that cuts.
The coefficients fitted on all the data are printed for `rank/confidence.py`. `held_out` is the
share of a second set of out-of-domain questions (`held_out.txt`, never fitted on) that the
current coefficients refuse.
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

MODELS = {"dense": ("cosine", "coverage"), "lexical": ("coverage",)}


def collect(
    service: EvidenceService, index: str, queries: list[tuple[str, str]], qrels: dict[str, dict[str, int]]
) -> list[dict[str, float]]:
    """Features per query, plus `relevant_hit` (a hit is a relevant abstract) and the verdict."""
    rows = []
    for qid, q in queries:
        resp = service.retrieve(index, RetrieveRequest(query=q, profile="default"))
        answer = resp.telemetry.answer
        assert answer is not None and answer.basis == "dense", answer
        gold = qrels.get(qid, {})
        row = {k: float(v) for k, v in answer.features.items()}
        row["relevant_hit"] = float(any(h.document_id in gold for h in resp.hits))
        row["refused"] = float(not resp.can_answer)
        rows.append(row)
    return rows


def questions(path: Path, prefix: str) -> list[tuple[str, str]]:
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return [(f"{prefix}-{i}", q) for i, q in enumerate(lines)]


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


def refusal_metrics(y: np.ndarray, p: np.ndarray, relevant: np.ndarray, bar: float = 0.5) -> dict[str, float]:
    """Precision/recall of can_answer=false (y=1 means answerable)."""
    refuse = p < bar
    ood = y == 0
    tp = int(np.sum(refuse & ood))
    return {
        "refuse_precision": round(tp / max(1, int(np.sum(refuse))), 4),
        "refuse_recall": round(tp / max(1, int(np.sum(ood))), 4),
        "in_domain_answered": round(float(np.mean(~refuse[y == 1])), 4),
        "in_domain_refused_with_relevant_hit": int(np.sum(refuse & (y == 1) & (relevant == 1))),
    }


def folds_of(y: np.ndarray, k: int = 5, seed: int = 13) -> list[list[int]]:
    """k folds, stratified by shuffling each class separately."""
    rng = random.Random(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for cls in (0.0, 1.0):
        idx = [i for i in range(len(y)) if y[i] == cls]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[j % k].append(i)
    return folds


def evaluate(x: np.ndarray, y: np.ndarray, relevant: np.ndarray) -> dict[str, object]:
    folds = folds_of(y)
    p_cv = np.zeros(len(y))
    for k, test in enumerate(folds):
        train = [i for j, f in enumerate(folds) if j != k for i in f]
        p_cv[test] = predict(fit(x[train], y[train]), x[test])
    return {"cv": refusal_metrics(y, p_cv, relevant), "weights": fit(x, y)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--store", type=Path, default=ROOT / ".bench" / "store")
    ap.add_argument(
        "--ood", type=Path, default=ROOT / "bench" / "data" / "answerability" / "out_of_domain.txt"
    )
    ap.add_argument(
        "--held-out",
        type=Path,
        default=ROOT / "bench" / "data" / "answerability" / "held_out.txt",
        help="out-of-domain questions never used for fitting: the refusal rate they get now",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    service = EvidenceService(Settings(store_dir=args.store))
    ds = find_dataset(args.dataset)
    index, _ = ensure_indexed(service, ds, with_vectors=True, progress=None)
    qrels = load_qrels(ds.qrels)
    in_domain = load_queries(ds.queries, set(qrels))
    ood = questions(args.ood, "ood")
    rows = collect(service, index, in_domain, qrels) + collect(service, index, ood, qrels)
    y = np.array([1.0] * len(in_domain) + [0.0] * len(ood))
    relevant = np.array([r["relevant_hit"] for r in rows])
    refused = np.array([r["refused"] for r in rows]) == 1
    out: dict[str, object] = {
        "in_domain": len(in_domain),
        "out_of_domain": len(ood),
        # What `can_answer` says now, with the coefficients in rank/confidence.py (in-sample).
        "current": refusal_metrics(y, 1.0 - refused, relevant),
    }
    for name, features in MODELS.items():
        x = np.array([[r[f] for f in features] for r in rows])
        result = evaluate(x, y, relevant)
        w = result["weights"]
        assert isinstance(w, np.ndarray)
        out[name] = {
            "cv": result["cv"],
            "coefficients": {
                **{f: round(float(c), 4) for f, c in zip(features, w[:-1], strict=True)},
                "bias": round(float(w[-1]), 4),
            },
        }
    held = questions(args.held_out, "held")
    held_rows = collect(service, index, held, qrels)
    out["held_out"] = {
        "questions": len(held),
        "refused": round(float(np.mean([r["refused"] for r in held_rows])), 4),
    }
    cos = np.array([r["cosine"] for r in rows])
    out["cosine_quantiles"] = {
        "in_domain_1_5_50": [round(float(q), 3) for q in np.quantile(cos[y == 1], [0.01, 0.05, 0.5])],
        "out_of_domain_50_95_99": [round(float(q), 3) for q in np.quantile(cos[y == 0], [0.5, 0.95, 0.99])],
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
