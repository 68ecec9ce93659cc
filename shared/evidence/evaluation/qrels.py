"""Qrels over an existing index (the workbench's Evaluate): nDCG@10, recall@100, MRR@10 per query."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evidence.errors import RequestValidationError
from evidence.evaluation.files import jsonl_objects
from evidence.evaluation.metrics import documents_from_chunks, mrr_at, ndcg_at, percentile, recall_at
from evidence.service import EvidenceService


def load_qrels_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSONL `{"query": str, "relevant": {document_id: grade}, "query_id"?}`: judgments against
    the documents of an index that already exists (a BEIR folder indexes its own corpus)."""
    out = []
    for n, rec in jsonl_objects(path, "qrels file", path.name, field="qrels"):
        query, relevant = rec.get("query"), rec.get("relevant")
        if not isinstance(query, str) or not query.strip():
            raise RequestValidationError(
                f"{path.name}:{n}: 'query' must be a non-empty string", field="qrels"
            )
        if not isinstance(relevant, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in relevant.items()
        ):
            raise RequestValidationError(
                f"{path.name}:{n}: 'relevant' must map document ids to integer grades", field="qrels"
            )
        out.append(rec)
    if not out:
        raise RequestValidationError(f"qrels file {path.name} holds no queries", field="qrels")
    return out


def run_qrels(
    service: EvidenceService,
    qrels_file: Path,
    *,
    index: str,
    profile: str = "default",
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """nDCG@10, recall@100 and MRR@10 of an index's retrieval under one profile and knobs, with
    `run_eval`'s `full` mode computation (hits → documents by best chunk → the same metrics);
    per query too, so two settings can be compared question by question."""
    from evidence.model import RetrieveRequest

    items = load_qrels_jsonl(qrels_file)
    service.backend.get_index(index)
    fields: dict[str, Any] = {"top_k": 100, "first_stage_k": 100, **(overrides or {})}
    per_query: list[dict[str, Any]] = []
    latencies: list[float] = []
    for n, rec in enumerate(items, start=1):
        t0 = time.perf_counter()
        resp = service.retrieve(index, RetrieveRequest(query=rec["query"], profile=profile, **fields))
        latencies.append((time.perf_counter() - t0) * 1000)
        ranked = documents_from_chunks([h.document_id for h in resp.hits])
        rels = rec["relevant"]
        per_query.append(
            {
                "query_id": str(rec.get("query_id", n)),
                "query": rec["query"],
                "ndcg_at_10": ndcg_at(ranked, rels, 10),
                "recall_at_100": recall_at(ranked, rels, 100),
                "mrr_at_10": mrr_at(ranked, rels, 10),
            }
        )
    metrics = ("ndcg_at_10", "recall_at_100", "mrr_at_10")
    means = {key: round(statistics.fmean(q[key] for q in per_query), 4) for key in metrics}
    for q in per_query:  # rounded for display only, after averaging (as run_eval averages)
        q.update({key: round(q[key], 4) for key in metrics})

    return {
        "qrels_file": qrels_file.name,
        "index": index,
        "profile": profile,
        "queries": len(per_query),
        **means,
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
        },
        "per_query": per_query,
    }
