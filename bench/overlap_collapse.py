"""Measure `collapse_overlaps` (issue 13, item 7) on SciFact: the default profile with and without it.

Two BM25 indexes of the SciFact corpus (test queries, `../shared/datasets/scifact`):
- `records`: every abstract one passage, as `evidence index` / `evidence eval` read a BEIR corpus;
- `windowed`: every abstract windowed as a file (256-token passages, 32-token overlap), where
  neighbouring passages of one abstract overlap, as they do for real files.
For each, the default profile (no remote reranker) returns top 10 hits per query, with the stage
and without it. Reported: document nDCG@10, recall@10 and MRR@10 over the hits (a document at its
best hit's rank, as `evidence eval` ranks them), distinct documents in the top 10, and the share
of returned characters that repeat text another hit of the same document already holds.
`evidence eval --mode bm25/dense/hybrid` measures the first stage alone, which this stage follows,
so those figures cannot move; `--mode hybrid` with vectors: `--hybrid` (embeds the corpus: slow).

    .venv/bin/python bench/overlap_collapse.py [--hybrid] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    documents_from_chunks,
    find_dataset,
    load_qrels,
    load_queries,
    mrr_at,
    ndcg_at,
    recall_at,
)
from evidence.ingest import chunk_document, iter_sources, parse_text  # noqa: E402
from evidence.ingest.sources import SourceItem  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.profiles import get_profile, register_profile  # noqa: E402
from evidence.records import DocumentChunks  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402

WITHOUT = "default-no-collapse"


def _without_collapse() -> Any:
    base = get_profile("default")
    return replace(base, name=WITHOUT, stages=tuple(s for s in base.stages if s.name != "collapse_overlaps"))


def _documents(corpus: Path, *, windowed: bool) -> list[DocumentChunks]:
    out = []
    for item in iter_sources([corpus]):
        if not isinstance(item, SourceItem):
            raise SystemExit(f"corpus record failed: {item}")
        doc = item.parse()
        if windowed:
            doc = parse_text(doc.text, filename=item.document_id, fmt="txt", title=doc.title)
        out.append(
            chunk_document(
                doc,
                document_id=item.document_id,
                source=item.source,
                metadata=item.metadata,
                as_record=not windowed,
            )
        )
    return out


def _repeated_chars(hits: list[Any]) -> tuple[int, int]:
    """(characters repeating an earlier hit of the same document, all characters returned)."""
    seen: dict[str, list[tuple[int, int]]] = {}
    repeated = total = 0
    for h in hits:
        a, b = h.citation.char_start, h.citation.char_end
        total += b - a
        for x, y in seen.get(h.document_id, []):
            repeated += max(0, min(b, y) - max(a, x))
        seen.setdefault(h.document_id, []).append((a, b))
    return repeated, total


def _run(
    service: EvidenceService,
    index: str,
    queries: list[tuple[str, str]],
    qrels: dict[str, dict[str, int]],
    profile: str,
) -> dict[str, Any]:
    ndcg, rec, mrr, distinct, rep, tot, ms = [], [], [], [], 0, 0, []
    for qid, text in queries:
        t0 = time.perf_counter()
        resp = service.retrieve(index, RetrieveRequest(query=text, profile=profile, top_k=10))
        ms.append((time.perf_counter() - t0) * 1000)
        ranked = documents_from_chunks([h.document_id for h in resp.hits])
        rels = qrels.get(qid, {})
        ndcg.append(ndcg_at(ranked, rels, 10))
        rec.append(recall_at(ranked, rels, 10))
        mrr.append(mrr_at(ranked, rels, 10))
        distinct.append(len(ranked))
        r, t = _repeated_chars(resp.hits)
        rep, tot = rep + r, tot + t
    return {
        "ndcg_at_10": round(statistics.fmean(ndcg), 4),
        "recall_at_10": round(statistics.fmean(rec), 4),
        "mrr_at_10": round(statistics.fmean(mrr), 4),
        "distinct_documents_in_top_10": round(statistics.fmean(distinct), 2),
        "repeated_char_share": round(rep / tot, 4) if tot else 0.0,
        "p50_ms": round(statistics.median(ms), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--store", type=Path, default=ROOT / ".bench" / "overlap")
    ap.add_argument("--hybrid", action="store_true", help="embed the corpus (MiniLM) and fuse both legs")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    ds = find_dataset(args.dataset)
    qrels = load_qrels(ds.qrels)
    queries = load_queries(ds.queries, set(qrels))[: args.limit]
    register_profile(WITHOUT, _without_collapse)
    service = EvidenceService(Settings(store_dir=args.store))
    results: dict[str, Any] = {"queries": len(queries), "hybrid": args.hybrid}
    for layout in ("records", "windowed"):
        index = f"scifact-{layout}" + ("-hybrid" if args.hybrid else "")
        try:
            service.backend.get_index(index)
        except Exception:
            docs = _documents(ds.corpus, windowed=layout == "windowed")
            for start in range(0, len(docs), 256):
                service.write_documents(index, docs[start : start + 256], embed=args.hybrid)
        info = service.backend.get_index(index)
        results[layout] = {
            "documents": info.documents,
            "with_collapse": _run(service, index, queries, qrels, "default"),
            "without_collapse": _run(service, index, queries, qrels, WITHOUT),
        }
        print(json.dumps({layout: results[layout]}), flush=True)
    service.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
