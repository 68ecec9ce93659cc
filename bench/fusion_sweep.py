"""Compare fusion methods on a BEIR dataset's eval index: the measurement behind the default.

Usage: python bench/fusion_sweep.py [--dataset DIR] [--store DIR]
Runs `evidence eval`'s index (built if missing) with each fusion option, equal weights unless
stated, leg depth 100, and prints nDCG@10 / recall@100 per option.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    documents_from_chunks,
    ensure_indexed,
    find_dataset,
    load_qrels,
    load_queries,
    ndcg_at,
    recall_at,
)
from evidence.rank.first_stage import FirstStage, RetrievalMode  # noqa: E402
from evidence.rank.fusion import FusionConfig, FusionMethod  # noqa: E402
from evidence.search.base import SearchBackend, Vector  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402

OPTIONS: list[tuple[str, FirstStage]] = [
    ("bm25", FirstStage(mode=RetrievalMode.LEXICAL)),
    ("dense", FirstStage(mode=RetrievalMode.DENSE)),
    ("rrf k=60", FirstStage(fusion=FusionConfig(FusionMethod.RRF, rank_constant=60))),
    ("rrf k=20", FirstStage(fusion=FusionConfig(FusionMethod.RRF, rank_constant=20))),
    ("minmax 0.5/0.5", FirstStage(fusion=FusionConfig(FusionMethod.MINMAX))),
    ("zscore 0.5/0.5", FirstStage(fusion=FusionConfig(FusionMethod.ZSCORE))),
    (
        "minmax 0.3/0.7",
        FirstStage(fusion=FusionConfig(FusionMethod.MINMAX, weights={"lexical": 0.3, "dense": 0.7})),
    ),
    (
        "minmax 0.7/0.3",
        FirstStage(fusion=FusionConfig(FusionMethod.MINMAX, weights={"lexical": 0.7, "dense": 0.3})),
    ),
    (
        "zscore 0.3/0.7",
        FirstStage(fusion=FusionConfig(FusionMethod.ZSCORE, weights={"lexical": 0.3, "dense": 0.7})),
    ),
    (
        "zscore 0.7/0.3",
        FirstStage(fusion=FusionConfig(FusionMethod.ZSCORE, weights={"lexical": 0.7, "dense": 0.3})),
    ),
]


def stage_scores(
    stage: FirstStage,
    backend: SearchBackend,
    index: str,
    *,
    queries: Sequence[tuple[str, str]],
    vectors: Mapping[str, Vector],
    qrels: Mapping[str, Mapping[str, int]],
) -> tuple[list[float], list[float]]:
    """Each query's nDCG@10 and recall@100 of the documents `stage` retrieves (k 100)."""
    nd, rc = [], []
    for qid, text in queries:
        res = stage.retrieve(backend, index, query=text, vector=vectors[qid], k=100)
        ranked = documents_from_chunks([c.chunk.document_id for c in res.candidates])
        nd.append(ndcg_at(ranked, qrels[qid], 10))
        rc.append(recall_at(ranked, qrels[qid], 100))
    return nd, rc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--store", type=Path, default=ROOT / ".evidence")
    args = ap.parse_args()
    svc = EvidenceService(Settings(store_dir=args.store))
    ds = find_dataset(args.dataset)
    qrels = load_qrels(ds.qrels)
    queries = load_queries(ds.queries, set(qrels))
    index, _ = ensure_indexed(svc, ds, with_vectors=True, progress=None)
    vectors = dict(
        zip((q for q, _ in queries), svc.embedder.embed_documents([t for _, t in queries]), strict=True)
    )
    print(f"{'option':<18} nDCG@10  recall@100")
    for name, stage in OPTIONS:
        nd, rc = stage_scores(stage, svc.backend, index, queries=queries, vectors=vectors, qrels=qrels)
        print(f"{name:<18} {statistics.fmean(nd):.4f}   {statistics.fmean(rc):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
