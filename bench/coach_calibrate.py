"""Calibrate (or just evaluate) the coach's confidence on a graph and its labelled queries.

    python bench/coach_calibrate.py                      # sample graph: fit, report in-sample + 5-fold CV
    python bench/coach_calibrate.py --write              # ... and write shared/evidence/coach/calibration.py
    python bench/coach_calibrate.py --graph G.yaml --queries Q.jsonl --evaluate-only   # a held-out set

Fitting: (1) node relevance, a logistic model of (cosine, text coverage, title coverage) on the
LO candidates of in-scope queries (an expected LO = 1); (2) with those node scores, the
in-domain model (cosine, coverage; in-scope or ambiguous = 1), the confidence model (cosine,
coverage, top relevance, ambiguity rule; in-scope = 1) and the sense-gap threshold of the split
rule (grid, best F1 of needs_clarification). Every model is L2-regularised logistic regression
(Newton's method) with at most five coefficients. Cross-validation refits (2) on four folds and
scores the fifth (stratified by label); node relevance is fitted on all queries (reported as such).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.coach import calibration as cal  # noqa: E402
from evidence.coach import confidence as conf  # noqa: E402
from evidence.coach.engine import CoachEngine  # noqa: E402
from evidence.coach.evaluate import LabelledQuery, evaluate, load_queries  # noqa: E402

DATA = ROOT / "shared/evidence/demo/data/coach"
GAP_GRID = (-0.05, -0.02, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 0.1, iters: int = 50) -> list[float]:
    """Weights (intercept first) of an L2-penalised logistic regression, by Newton's method."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    pen = np.full(xb.shape[1], l2)
    pen[0] = 0.0  # the intercept is not shrunk
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + pen * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(pen) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return [round(float(v), 4) for v in w]


def build_engine(store: Path, graph: Path, index: str, observer: Callable[[str, Any], None]) -> CoachEngine:
    from evidence.embed.cache import CachedEmbedder, EmbeddingCache
    from evidence.embed.minilm import MiniLMEmbedder
    from evidence.graph import index_graph, parse_graph
    from evidence.search.embedded import EmbeddedBackend

    backend = EmbeddedBackend(store)
    embedder = CachedEmbedder(MiniLMEmbedder(), EmbeddingCache(store / "embeddings.sqlite3"))
    t0 = time.perf_counter()
    report = index_graph(
        backend, embedder, index, parse_graph(graph.read_bytes(), filename=graph.name), graph_id=graph.name
    )
    print(
        f"indexed {graph.name}: {report.nodes} nodes, {report.status} ({time.perf_counter() - t0:.1f} s)",
        file=sys.stderr,
    )
    return CoachEngine(backend, embed_query=embedder.embed_query, observer=observer)


def collect(
    engine: CoachEngine, index: str, queries: Sequence[LabelledQuery], box: dict[str, Any]
) -> list[dict[str, Any]]:
    rows = []
    for q in queries:
        response = engine.run(index, q.request())
        feats: conf.QueryFeatures = box["features"]
        nodes = sorted((s for s in box["nodes"] if s.view.is_lo), key=lambda s: -s.rel)[:20]
        rows.append({"q": q, "features": feats, "nodes": nodes, "response": response})
    return rows


def node_dataset(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for r in rows:
        q: LabelledQuery = r["q"]
        if q.label != "in_scope" or not q.expected_los or q.conversation_snippet:
            continue
        for s in r["nodes"]:
            xs.append([0.0 if s.cos is None else s.cos, s.cov_text, s.cov_title])
            ys.append(1.0 if s.view.id in q.expected_los else 0.0)
    return np.asarray(xs), np.asarray(ys)


def decide_with(f: conf.QueryFeatures, model: dict[str, Any]) -> str:
    saved = (cal.DOMAIN_WEIGHTS, cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP)
    cal.DOMAIN_WEIGHTS, cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP = (
        model["domain"],
        model["confidence"],
        model["gap"],
    )
    try:
        d = conf.decide(f)
    finally:
        cal.DOMAIN_WEIGHTS, cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP = saved
    return {"answer": "in_scope", "clarify": "ambiguous", "out_of_scope": "out_of_scope"}[d.mode]


def fit_query_models(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def f1_clarify(gap: float) -> float:
        # Out-of-domain queries are declined before ambiguity is looked at: they do not count here.
        tp = fp = fn = 0
        for r in (r for r in rows if r["q"].label != "out_of_scope"):
            f = replace(r["features"])
            amb = f.vague or f.unresolved_reference or f.bare_topic or f.broad or f.sense_gap <= gap
            pos = r["q"].label == "ambiguous"
            tp += amb and pos
            fp += amb and not pos
            fn += (not amb) and pos
        return 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    gap = max(GAP_GRID, key=lambda g: (f1_clarify(g), -abs(g - 0.03)))
    saved = cal.SENSE_GAP
    cal.SENSE_GAP = gap
    try:
        dom_rows = [r for r in rows if not (r["features"].vague or r["features"].unresolved_reference)]
        xd = np.asarray([[r["features"].cos_max, r["features"].coverage] for r in dom_rows])
        yd = np.asarray([1.0 if r["q"].label != "out_of_scope" else 0.0 for r in dom_rows])
        xc = np.asarray([list(r["features"].vector()) for r in rows])
        yc = np.asarray([1.0 if r["q"].label == "in_scope" else 0.0 for r in rows])
        return {"domain": fit_logistic(xd, yd), "confidence": fit_logistic(xc, yc), "gap": gap}
    finally:
        cal.SENSE_GAP = saved


def metrics(rows: list[dict[str, Any]], predicted: list[str], confidences: list[float]) -> dict[str, Any]:
    def pr(positive: str) -> dict[str, float]:
        tp = sum(
            1 for r, p in zip(rows, predicted, strict=True) if p == positive and r["q"].label == positive
        )
        fp = sum(
            1 for r, p in zip(rows, predicted, strict=True) if p == positive and r["q"].label != positive
        )
        fn = sum(
            1 for r, p in zip(rows, predicted, strict=True) if p != positive and r["q"].label == positive
        )
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        return {"precision": round(prec, 4), "recall": round(rec, 4), "tp": tp, "fp": fp, "fn": fn}

    brier = sum(
        (c - (r["q"].label == "in_scope")) ** 2 for r, c in zip(rows, confidences, strict=True)
    ) / len(rows)
    return {
        "accuracy": round(
            sum(1 for r, p in zip(rows, predicted, strict=True) if p == r["q"].label) / len(rows), 4
        ),
        "can_answer": pr("in_scope"),
        "needs_clarification": pr("ambiguous"),
        "out_of_scope": pr("out_of_scope"),
        "confidence_brier": round(brier, 4),
    }


def confidence_with(f: conf.QueryFeatures, model: dict[str, Any]) -> float:
    saved = (cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP)
    cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP = model["confidence"], model["gap"]
    try:
        return conf.confidence(f)
    finally:
        cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP = saved


def cross_validate(rows: list[dict[str, Any]], folds: int = 5, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    by_label: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_label.setdefault(r["q"].label, []).append(i)
    fold_of = {}
    for idx in by_label.values():
        rng.shuffle(idx)
        for k, i in enumerate(idx):
            fold_of[i] = k % folds
    predicted = [""] * len(rows)
    confidences = [0.0] * len(rows)
    for k in range(folds):
        train = [r for i, r in enumerate(rows) if fold_of[i] != k]
        model = fit_query_models(train)
        for i, r in enumerate(rows):
            if fold_of[i] == k:
                predicted[i] = decide_with(r["features"], model)
                confidences[i] = confidence_with(r["features"], model)
    return metrics(rows, predicted, confidences)


def write_calibration(node: Sequence[float], model: dict[str, Any], summary: dict[str, Any]) -> None:
    def pr(part: str, name: str) -> str:
        m = summary[part][name]
        return f"{m['precision']}/{m['recall']}"

    text = f'''"""Fitted coefficients of the coach's confidence models (written by bench/coach_calibrate.py).

Fitted on the sample graph's labelled queries (shared/evidence/demo/data/coach/queries.jsonl):
{summary["queries"]} queries ({summary["labels"]}).
In-sample: can_answer P/R {pr("in_sample", "can_answer")},
needs_clarification P/R {pr("in_sample", "needs_clarification")}.
5-fold CV: can_answer P/R {pr("cv", "can_answer")}, needs_clarification P/R {pr("cv", "needs_clarification")}.
"""

#: P(node is what the query is about) = sigmoid(w0 + w1 cos + w2 text coverage + w3 title coverage)
NODE_WEIGHTS = {tuple(node)}
#: P(in the graph's domain) = sigmoid(w0 + w1 best cosine + w2 best coverage)
DOMAIN_WEIGHTS = {tuple(model["domain"])}
#: confidence = sigmoid(w0 + w1 best cosine + w2 best coverage + w3 top LO relevance + w4 ambiguous)
CONFIDENCE_WEIGHTS = {tuple(model["confidence"])}
#: Split rule: a distinct LO's best sentence within this margin of the top LO's.
SENSE_GAP = {model["gap"]}
DOMAIN_THRESHOLD = 0.5
ANSWER_THRESHOLD = 0.5
'''
    (ROOT / "shared/evidence/coach/calibration.py").write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", type=Path, default=DATA / "algebra-calculus.yaml")
    ap.add_argument("--queries", type=Path, default=DATA / "queries.jsonl")
    ap.add_argument("--store", type=Path, default=Path("/tmp/evidence-coach-calibration"))
    ap.add_argument("--index", default="coach-calibration")
    ap.add_argument("--write", action="store_true", help="write the fitted coefficients to calibration.py")
    ap.add_argument("--evaluate-only", action="store_true", help="score the current calibration, fit nothing")
    ap.add_argument("--repeat", type=int, default=1, help="with --evaluate-only: runs per query (latency)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    box: dict[str, Any] = {}
    engine = build_engine(args.store, args.graph, args.index, box.__setitem__)
    queries = load_queries(args.queries)
    if args.evaluate_only:
        engine.run(args.index, queries[0].request())  # the model loads once, outside the figures
        report = evaluate(lambda r: engine.run(args.index, r), queries * max(1, args.repeat))
        out = report.metrics()
        out["errors"] = report.errors()[: len(queries)]
        print(json.dumps(out, indent=None if args.json else 2))
        return 0

    rows = collect(engine, args.index, queries, box)
    x, y = node_dataset(rows)
    node = fit_logistic(x, y)
    cal.NODE_WEIGHTS = tuple(node)
    rows = collect(engine, args.index, queries, box)  # query features with the fitted node scores
    model = fit_query_models(rows)
    cal.DOMAIN_WEIGHTS, cal.CONFIDENCE_WEIGHTS, cal.SENSE_GAP = (
        tuple(model["domain"]),
        tuple(model["confidence"]),
        model["gap"],
    )
    report = evaluate(lambda r: engine.run(args.index, r), queries)
    in_sample = report.metrics()
    cv = cross_validate(rows)
    labels = in_sample["labels"]
    summary = {
        "graph": args.graph.name,
        "queries": len(queries),
        "labels": ", ".join(f"{v} {k}" for k, v in labels.items()),
        "node_weights": node,
        "node_rows": len(y),
        "model": model,
        "in_sample": {
            k: in_sample[k]
            for k in (
                "accuracy",
                "can_answer",
                "needs_clarification",
                "out_of_scope",
                "confusion",
                "confidence_brier",
                "lo_hit_at_1",
                "lo_hit_at_3",
                "intent_accuracy",
            )
        },
        "cv": cv,
        "latency_ms": in_sample["latency_ms"],
        "errors": report.errors(),
    }
    if args.write:
        write_calibration(node, model, summary)
    print(json.dumps(summary, indent=None if args.json else 2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
