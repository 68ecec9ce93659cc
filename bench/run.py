"""`make bench`: indexing throughput, retrieve latency on SciFact, retrieve latency and RSS at 100k passages.

Results print as a Markdown table and are written to bench/results.json. Each part runs in a
fresh store under .bench/ (no embedding cache), except the SciFact latency part, which reuses
the eval index in the default store when it is already built (`evidence eval` builds it).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from synthetic import FILTERED_TYPE, synthetic_document  # noqa: E402

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import find_dataset, load_qrels, load_queries, percentile  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.records import ChunkKind, DocumentChunks  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402


def _corpus_subset(dataset: Path, n: int, out: Path) -> Path:
    ds = find_dataset(dataset)
    opener = gzip.open if ds.corpus.suffix == ".gz" else open
    with opener(ds.corpus, "rt", encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:  # type: ignore[operator]
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out


def _passages_alone(svc: EvidenceService, corpus: Path) -> tuple[int, float, float]:
    """SciFact through the same reading and chunking as `evidence index`, its fact spans dropped
    before the write: (passages, wall seconds, CPU seconds). Spans are extra work, reported apart."""
    import dataclasses

    from evidence.ingest.sources import SourceFailure, file_items
    from evidence.search.base import BulkLoading

    svc.write_documents("bench", [], embed=False)  # creates the index outside the timing
    backend = svc.backend
    assert isinstance(backend, BulkLoading)
    wall, cpu = time.perf_counter(), time.process_time()
    passages = 0
    batch: list[DocumentChunks] = []
    with backend.bulk("bench"):
        for item in file_items(corpus, {}):
            if isinstance(item, SourceFailure):
                raise SystemExit(f"{item.source}: {item.reason}")
            doc = svc.chunk_source(item)
            kept = tuple(c for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
            passages += len(kept)
            batch.append(dataclasses.replace(doc, chunks=kept))
            if len(batch) >= 256:
                svc.write_documents("bench", batch, embed=False)
                batch.clear()
        svc.write_documents("bench", batch, embed=False)
    return passages, time.perf_counter() - wall, time.process_time() - cpu


def bench_bm25_indexing(dataset: Path, work: Path) -> dict[str, Any]:
    """BM25-only indexing of SciFact: passages alone, then the default (passages + fact spans).
    Wall and CPU seconds both: on a shared machine the CPU time is the steadier figure."""
    import os

    ds = find_dataset(dataset)
    svc = EvidenceService(Settings(store_dir=work / "passages"))
    passages, seconds, cpu = _passages_alone(svc, ds.corpus)
    svc.close()
    alone = {
        "passages": passages,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "passages_per_s": round(passages / seconds, 1),
    }
    # The default: `evidence index` of the corpus (passages + fact spans).
    svc = EvidenceService(Settings(store_dir=work / "bm25"))
    cpu0 = time.process_time()
    report = svc.index_paths("bench", [ds.corpus], embed=False)
    cpu = time.process_time() - cpu0
    info = svc.backend.get_index("bench")
    svc.close()
    spans = info.chunks - report.chunks
    extra = max(report.seconds - seconds, 1e-9)
    return {
        "passages_alone": alone,
        "bm25_only": {
            "documents": len(report.indexed),
            "passages": report.chunks,
            "spans": spans,
            "chunks_incl_spans": info.chunks,
            "seconds": round(report.seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "passages_per_s": round(report.chunks / report.seconds, 1),
            "chunks_per_s": round(info.chunks / report.seconds, 1),
            # What the spans add over the passages alone, per span.
            "spans_extra_seconds": round(report.seconds - seconds, 2),
            "spans_per_extra_s": round(spans / extra, 1),
        },
        "load_average_1m": round(os.getloadavg()[0], 1),
    }


def bench_indexing(dataset: Path, work: Path, embed_docs: int) -> dict[str, Any]:
    from evidence.embed.tokenizer import get_tokenizer

    results: dict[str, Any] = bench_bm25_indexing(dataset, work)
    # With embeddings: a subset (the model is the bottleneck; throughput is per passage).
    subset = _corpus_subset(dataset, embed_docs, work / "subset.jsonl")
    svc = EvidenceService(Settings(store_dir=work / "dense"))
    report = svc.index_paths("bench", [subset])
    from evidence.search.embedded import EmbeddedBackend

    assert isinstance(svc.backend, EmbeddedBackend)
    texts = [
        c.search_text
        for doc, _ in svc.backend.index_store("bench").documents()
        for c in doc.chunks
        if c.kind is ChunkKind.PASSAGE
    ]
    tok = get_tokenizer()
    full = [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]
    embedded = [min(n, svc.settings.embed_max_tokens - 2) + 2 for n in full]
    results["with_embeddings"] = {
        "documents": len(report.indexed),
        "passages": report.chunks,
        "seconds": round(report.seconds, 2),
        "passages_per_s": round(report.chunks / report.seconds, 2),
        "tokens_per_s": round(sum(embedded) / report.seconds, 1),
        "mean_tokens_per_passage": round(statistics.fmean(full), 1),
        "mean_tokens_embedded": round(statistics.fmean(embedded), 1),
    }
    svc.close()
    return results


def _latency(fn: Any, items: list[Any], warmup: int = 5) -> dict[str, float]:
    for it in items[:warmup]:
        fn(it)
    times = []
    for it in items:
        t = time.perf_counter()
        fn(it)
        times.append((time.perf_counter() - t) * 1000)
    return {"p50": round(percentile(times, 50), 2), "p95": round(percentile(times, 95), 2), "n": len(times)}


def bench_scifact_latency(dataset: Path, store: Path) -> dict[str, Any]:
    from evidence.evaluation import ensure_indexed

    svc = EvidenceService(Settings(store_dir=store))
    ds = find_dataset(dataset)
    index, _ = ensure_indexed(svc, ds, with_vectors=True, progress=None)
    queries = [t for _, t in load_queries(ds.queries, set(load_qrels(ds.qrels)))]
    out = {
        "retrieve_default_profile_ms": _latency(
            lambda q: svc.retrieve(index, RetrieveRequest(query=q)), queries
        ),
        "retrieve_vrm_profile_ms": _latency(
            lambda q: svc.retrieve(index, RetrieveRequest(query=q, profile="vrm")), queries
        ),
        "query_embedding_ms": _latency(svc.embedder.embed_query, queries),
        "chunks": svc.backend.get_index(index).chunks,
    }
    svc.close()
    return out


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def bench_100k(work: Path, n: int) -> dict[str, Any]:
    """Synthetic text (Zipf-distributed vocabulary) and random unit vectors, real query embeddings."""
    from evidence.embed.minilm import MiniLMEmbedder
    from evidence.search.embedded import EmbeddedBackend

    rng = np.random.default_rng(42)
    vocab = [f"w{i}" for i in range(30_000)]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    backend = EmbeddedBackend(work / "100k")
    embedder = MiniLMEmbedder()
    backend.create_index("big", embedder_id=embedder.model_id, dimension=embedder.dimension)
    t0 = time.perf_counter()
    per_doc = 10
    with backend.bulk("big"):
        for start in range(0, n, 5_000):
            docs, vecs = [], []
            for d in range(start // per_doc, (start + 5_000) // per_doc):
                texts = []
                for _ in range(per_doc):
                    words = rng.choice(len(vocab), size=int(rng.integers(80, 200)), p=weights)
                    texts.append(" ".join(vocab[w] for w in words))
                docs.append(synthetic_document(d, texts))
                v = rng.normal(size=(per_doc, embedder.dimension)).astype(np.float32)
                vecs.append(v / np.linalg.norm(v, axis=1, keepdims=True))
            backend.upsert("big", docs, vecs)
    build_s = time.perf_counter() - t0
    backend.close()
    gc.collect()
    # Measure in a fresh process so RSS reflects serving, not building.
    code = f"""
import json, sys, time, resource
sys.path.insert(0, {str(ROOT / "shared")!r}); sys.path.insert(0, {str(ROOT / "bench")!r})
import numpy as np
from pathlib import Path
from evidence.embed.minilm import MiniLMEmbedder
from evidence.search.embedded import EmbeddedBackend
from evidence.rank.first_stage import FirstStage
from evidence.evaluation import percentile
b = EmbeddedBackend(Path({str(work / "100k")!r})); e = MiniLMEmbedder(); fs = FirstStage()
rng = np.random.default_rng(1)
qs = [" ".join(f"w{{int(i)}}" for i in rng.integers(0, 3000, size=6)) for _ in range(200)]
def one(q, filters=None):
    return fs.retrieve(b, "big", query=q, vector=e.embed_query(q), k=100, filters=filters)
for q in qs[:5]: one(q)
def lat(filters):
    t = []
    for q in qs:
        s = time.perf_counter(); one(q, filters); t.append((time.perf_counter() - s) * 1000)
    return {{"p50": round(percentile(t, 50), 2), "p95": round(percentile(t, 95), 2), "n": len(t)}}
out = {{"hybrid_ms": lat(None), "hybrid_filtered_ms": lat({{"type": {FILTERED_TYPE!r}}}),
       "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}}
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"passages": n, "build_seconds": round(build_s, 1), **served}


def previous_indexing() -> dict[str, Any]:
    """The last run's indexing results (a BM25-only run keeps the embedding figures)."""
    out = ROOT / "bench" / "results.json"
    found = json.loads(out.read_text()).get("indexing", {}) if out.exists() else {}
    return dict(found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--store", type=Path, default=ROOT / ".evidence", help="store holding the eval index")
    ap.add_argument("--embed-docs", type=int, default=1000)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--only", choices=("indexing", "bm25-indexing", "latency", "100k"))
    args = ap.parse_args()
    work = ROOT / ".bench"
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: dict[str, Any] = {"machine": {"cores": __import__("os").cpu_count()}}
    if args.only in (None, "indexing"):
        results["indexing"] = bench_indexing(args.dataset, work, args.embed_docs)
        print(json.dumps(results["indexing"]), flush=True)
    if args.only == "bm25-indexing":
        results["indexing"] = {**previous_indexing(), **bench_bm25_indexing(args.dataset, work)}
        print(json.dumps(results["indexing"]), flush=True)
    if args.only in (None, "latency"):
        results["scifact_latency"] = bench_scifact_latency(args.dataset, args.store)
        print(json.dumps(results["scifact_latency"]), flush=True)
    if args.only in (None, "100k"):
        results["at_100k"] = bench_100k(work, args.passages)
        print(json.dumps(results["at_100k"]), flush=True)
    out = ROOT / "bench" / "results.json"
    previous = json.loads(out.read_text()) if out.exists() else {}
    previous.update(results)
    out.write_text(json.dumps(previous, indent=2) + "\n")
    print(f"written to {out}; peak RSS of this process {_rss_mb()} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
