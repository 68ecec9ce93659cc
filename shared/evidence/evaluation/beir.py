"""`evidence eval`: retrieval quality and latency on a BEIR-layout dataset.

Metrics follow pytrec_eval / trec_eval (`evaluation.metrics`): nDCG@10, recall@100, MRR@10,
averaged over every query that has judgments (a query with no hit scores 0).
Only a query's `_id` and `text` are read: SciFact's query metadata is the answer key.

Chunk hits become document rankings by each document's best chunk (max-passage).
An unchanged dataset is not re-indexed: the index records a fingerprint of the
corpus file, the chunking/embedding settings and the ingestion code, and the store records the
indexing settings it was written under; when either differs from the run's, the index is deleted
and indexed afresh (`evaluation.indexes`).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidence.embed.base import document_key
from evidence.errors import RequestValidationError
from evidence.evaluation.files import ingest_code_digest, late_version_tag, open_text, slug
from evidence.evaluation.indexes import ensure_eval_index, header_tag
from evidence.evaluation.metrics import (
    documents_from_chunks,
    mrr_at,
    ndcg_at,
    percentile,
    recall_at,
    span_metrics,
)
from evidence.progress import ProgressFn
from evidence.rank.first_stage import FirstStage, RetrievalMode
from evidence.service import EvidenceService

EVAL_MODES = ("bm25", "dense", "hybrid", "full")


@dataclass(frozen=True)
class Dataset:
    name: str
    corpus: Path
    queries: Path
    qrels: Path
    rationales: Path | None


def _first(root: Path, names: Sequence[str]) -> Path | None:
    for n in names:
        if (root / n).exists():
            return root / n
    return None


def find_dataset(root: Path) -> Dataset:
    if not root.is_dir():
        raise RequestValidationError(f"dataset folder {root} does not exist", field="dataset")
    corpus = _first(root, ["corpus.jsonl", "corpus.jsonl.gz"])
    queries = _first(root, ["queries.jsonl", "queries.jsonl.gz"])
    qrels = _first(root, ["qrels-test.tsv", "qrels/test.tsv"])
    missing = [
        n
        for n, p in (
            ("corpus.jsonl[.gz]", corpus),
            ("queries.jsonl[.gz]", queries),
            ("qrels-test.tsv or qrels/test.tsv", qrels),
        )
        if p is None
    ]
    if missing or corpus is None or queries is None or qrels is None:
        raise RequestValidationError(f"{root} lacks {', '.join(missing)} (BEIR layout)", field="dataset")
    return Dataset(root.resolve().name, corpus, queries, qrels, _first(root, ["rationales-test.jsonl"]))


def load_queries(path: Path, wanted: set[str]) -> list[tuple[str, str]]:
    out = []
    with open_text(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            rec = json.loads(line)
            qid = str(rec["_id"])
            if qid in wanted:
                out.append((qid, str(rec["text"])))  # never the metadata: it holds the answers
    return out


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\r\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) < 3:
                continue
            qid, did, rel = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = rel
    return qrels


def subset_dataset(dataset: Path, documents: set[str], queries: set[str], folder: Path) -> Path:
    """A BEIR-layout copy of `dataset` holding only these documents, queries and their qrels:
    a fixed slice that `run_eval` scores like the whole (the quality gate, docs/ranking.md)."""
    ds = find_dataset(dataset)
    folder.mkdir(parents=True, exist_ok=True)
    with open_text(ds.corpus) as src, (folder / "corpus.jsonl").open("w", encoding="utf-8") as dst:
        dst.writelines(line for line in src if line.strip() and str(json.loads(line)["_id"]) in documents)
    with open_text(ds.queries) as src, (folder / "queries.jsonl").open("w", encoding="utf-8") as dst:
        dst.writelines(line for line in src if line.strip() and str(json.loads(line)["_id"]) in queries)
    with (
        ds.qrels.open(encoding="utf-8") as src,
        (folder / "qrels-test.tsv").open("w", encoding="utf-8") as dst,
    ):
        for i, line in enumerate(src):
            if (i == 0 and line.startswith("query-id")) or line.split("\t")[0] in queries:
                dst.write(line)
    return folder


def _fingerprint(ds: Dataset, service: EvidenceService, with_vectors: bool) -> str:
    h = hashlib.sha256()
    with ds.corpus.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    s = service.settings
    h.update(
        json.dumps(
            [
                s.passage_tokens,
                s.passage_overlap,
                s.record_max_tokens,
                with_vectors,
                document_key(service.embedder) if with_vectors else "",
            ]
        ).encode()
    )
    # The span extractor and chunker make what is scored (rationale recall reads the spans): a
    # changed one must re-index, as the QA suite's fingerprint does.
    h.update(ingest_code_digest().encode())
    if with_vectors:
        h.update(late_version_tag())
    # The section header rule shapes the BM25 field and the passage vectors' inputs of a corpus
    # with sections; only under a rule, so that the fingerprints of stores indexed without stand.
    h.update(header_tag(s))
    return h.hexdigest()


def ensure_indexed(
    service: EvidenceService, ds: Dataset, *, with_vectors: bool, progress: ProgressFn | None
) -> tuple[str, float]:
    """Index the corpus as `eval-<dataset>` (`-bm25` without vectors) unless the same corpus was
    indexed there under the same settings; a stale index is deleted and indexed afresh, as the QA
    suite's (`evaluation.indexes.ensure_eval_index`)."""
    from evidence.search.embedded import EmbeddedBackend

    index = f"eval-{slug(ds.name)}" + ("" if with_vectors else "-bm25")
    seconds = ensure_eval_index(
        service,
        index,
        _fingerprint(ds, service, with_vectors),
        [ds.corpus],
        unit="documents",
        failure=lambda n, source, reason: RequestValidationError(
            f"{n} corpus records failed to index, first: {source}: {reason}", field="dataset"
        ),
        # Lexical-only on the embedded store: nothing is embedded (OpenSearch's index has vectors).
        embed=with_vectors or not isinstance(service.backend, EmbeddedBackend),
        progress=progress,
    )
    return index, seconds


def _iter_gold(path: Path | None) -> Iterator[tuple[str, list[tuple[str, int, int]]]]:
    if path is None:
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            gold = {
                (str(ev["doc_id"]), int(s["char_start"]), int(s["char_end"]))
                for ev in rec["evidence"]
                for s in ev["sentences"]
            }
            yield str(rec["query_id"]), sorted(gold)


def run_eval(
    service: EvidenceService,
    dataset: Path,
    *,
    mode: str = "hybrid",
    spans: bool = False,
    limit: int | None = None,
    progress: ProgressFn | None = None,
    first_stage: FirstStage | None = None,
) -> dict[str, Any]:
    if mode not in EVAL_MODES:
        raise RequestValidationError(f"unknown mode {mode!r}; valid: {', '.join(EVAL_MODES)}", field="mode")
    ds = find_dataset(dataset)
    qrels = load_qrels(ds.qrels)
    queries = load_queries(ds.queries, set(qrels))
    if limit:
        queries = queries[:limit]
    with_vectors = mode != "bm25"
    index, index_seconds = ensure_indexed(service, ds, with_vectors=with_vectors, progress=progress)
    backend = service.backend
    stage = first_stage or FirstStage(mode=RetrievalMode.parse(mode if mode != "full" else "hybrid"))
    ndcgs, recalls, mrrs, latencies = [], [], [], []
    for i, (qid, text) in enumerate(queries):
        t0 = time.perf_counter()
        if mode == "full":
            from evidence.model import RetrieveRequest

            resp = service.retrieve(index, RetrieveRequest(query=text, top_k=100, first_stage_k=100))
            chunk_docs = [h.document_id for h in resp.hits]
        else:
            vector = service.query_vector(index, text) if mode in ("dense", "hybrid") else None
            result = stage.retrieve(backend, index, query=text, vector=vector, k=100)
            chunk_docs = [c.chunk.document_id for c in result.candidates]
        latencies.append((time.perf_counter() - t0) * 1000)
        ranked = documents_from_chunks(chunk_docs)
        rels = qrels.get(qid, {})
        ndcgs.append(ndcg_at(ranked, rels, 10))
        recalls.append(recall_at(ranked, rels, 100))
        mrrs.append(mrr_at(ranked, rels, 10))
        if progress and (i + 1) % 25 == 0:
            progress(i + 1, len(queries), "queries")
    out: dict[str, Any] = {
        "dataset": ds.name,
        "mode": mode,
        "queries": len(queries),
        "ndcg_at_10": round(statistics.fmean(ndcgs), 4) if ndcgs else 0.0,
        "recall_at_100": round(statistics.fmean(recalls), 4) if recalls else 0.0,
        "mrr_at_10": round(statistics.fmean(mrrs), 4) if mrrs else 0.0,
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
        },
        "index_seconds": round(index_seconds, 2),
    }
    if spans:
        out["spans"] = _span_eval(service, index, ds, dict(queries), limit, with_vectors=with_vectors)
    return out


def _span_eval(
    service: EvidenceService,
    index: str,
    ds: Dataset,
    queries: Mapping[str, str],
    limit: int | None,
    *,
    with_vectors: bool,
) -> dict[str, Any]:
    """Rationale-sentence recall and precision of passage-then-sentence span ranking
    (`verbatim.sentences`): passages by the first stage (hybrid when the index has vectors), then
    the sentences inside the top passages."""
    from evidence.verbatim.sentences import SpanRanking

    ranking = SpanRanking()
    ks = (5, 10, 20)
    rec: dict[int, list[float]] = {k: [] for k in ks}
    prec: dict[int, list[float]] = {k: [] for k in ks}
    n = 0
    for qid, gold in _iter_gold(ds.rationales):
        if qid not in queries:
            continue
        text = queries[qid]
        vector = service.query_vector(index, text) if with_vectors else None
        ranked = ranking.rank(service.backend, index, text, vector=vector, k=max(ks))
        got = [(r.chunk.document_id, r.chunk.char_start, r.chunk.char_end) for r in ranked]
        for k in ks:
            r, p = span_metrics(got, gold, k)
            rec[k].append(r)
            prec[k].append(p)
        n += 1
        if limit and n >= limit:
            break
    return {
        "queries": n,
        "averaging": "macro",
        **{f"sentence_recall_at_{k}": round(statistics.fmean(rec[k]), 4) if rec[k] else 0.0 for k in ks},
        **{f"span_precision_at_{k}": round(statistics.fmean(prec[k]), 4) if prec[k] else 0.0 for k in ks},
    }
