"""`make bench-scale`: the embedded backend at 100k, 300k and 1M passages.

Builds on `bench/run.py --only 100k` (the same bulk path into `EmbeddedBackend`), but:
- text is REAL: passages drawn from SciFact (../shared/datasets/scifact) and from the QA suite's
  plain-text documents (licences, the Debian policy, drug labels), recombined so no two passages
  are identical;
- vectors are SYNTHESISED from real all-MiniLM-L6-v2 vectors: each is a normalised mixture of the
  real vector of its main source passage with a second real vector and a little noise. The real
  vectors are SciFact's, read from an eval index (`evidence eval` builds one) or embedded here;
- queries are SciFact's real test queries, embedded by the real model;
- retrieve is the service's WHOLE retrieve (`EvidenceService.retrieve`, the default profile:
  first stage, dedup, rerank, cut-off, MMR, top-k), with the first stage in bm25, dense or hybrid
  mode, with and without a metadata filter (10% of documents match).

Resumable and bounded: each size's store lives under build/scale/<n>/ and is reused; a larger
size starts from a copy of the largest smaller complete store and only adds the rest; an
interrupted build continues at its last committed batch. Measurements run in a fresh process per
size so RSS is serving, not building. Results: build/scale/results.json and a Markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from synthetic import FILTERED_TYPE, synthetic_document  # noqa: E402

from evidence.cli.serve_sizing import tree_bytes  # noqa: E402
from evidence.progress import Progress  # noqa: E402

WORK = ROOT / "build" / "scale"
INDEX = "scale"
PER_DOC = 10
BATCH = 5_000
VECTOR_NOTE = (
    "vectors synthesised from real all-MiniLM-L6-v2 vectors of SciFact passages "
    "(normalised mixture 0.8 own + 0.35 other real vector + N(0, 0.02) noise); "
    "text drawn from SciFact and the QA suite's documents; queries are SciFact's, embedded for real"
)


def _sources(dataset: Path) -> tuple[list[str], np.ndarray]:
    """Real passages with real vectors (SciFact), plus paragraphs of other real text."""
    cache = WORK / "sources.npz"
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        return [str(t) for t in z["texts"]], z["vectors"]
    from evidence.evaluation import find_dataset

    ds = find_dataset(dataset)
    texts: list[str] = []
    vecs: list[np.ndarray] = []
    found = sorted(Path("/work").glob("*/*/.evidence/indexes/eval-scifact/records.sqlite3")) + sorted(
        (ROOT / ".evidence" / "indexes").glob("eval-scifact*/records.sqlite3")
    )
    if found:
        db = sqlite3.connect(f"file:{found[-1]}?mode=ro", uri=True)
        for text, blob in db.execute(
            "SELECT text, vector FROM chunks WHERE kind = 'passage' AND vector IS NOT NULL ORDER BY rowid"
        ):
            texts.append(text)
            # float16 blobs since vectors are stored compact (store_dense.VECTOR_FORMAT), float32 before
            vecs.append(np.frombuffer(blob, dtype=np.float16 if len(blob) == 2 * 384 else np.float32))
        db.close()
    else:
        from evidence.embed.minilm import MiniLMEmbedder

        emb = MiniLMEmbedder()
        with gzip.open(ds.corpus, "rt", encoding="utf-8") as f:
            docs = [json.loads(line) for line in f][:3000]
        texts = [f"{d.get('title', '')}. {d.get('text', '')}" for d in docs]
        vecs = list(emb.embed_documents(texts))
    other: list[str] = []
    for path in sorted((ROOT / "bench" / "qa").glob("*/documents/*")):
        if path.suffix in (".txt", ".md", ".html", ".xml"):
            raw = re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8", errors="replace"))
            other.extend(p.strip() for p in re.split(r"\n\s*\n", raw) if len(p.split()) >= 20)
    WORK.mkdir(parents=True, exist_ok=True)
    all_texts = texts + other
    matrix = np.stack(vecs).astype(np.float32)
    np.savez(cache, texts=np.array(all_texts), vectors=matrix)
    return all_texts, matrix


def _batch(b: int, texts: list[str], real: np.ndarray) -> tuple[list[Any], list[np.ndarray]]:
    rng = np.random.default_rng(1000 + b)
    n_real = len(real)
    docs, vecs = [], []
    first = b * BATCH // PER_DOC
    for d in range(first, first + BATCH // PER_DOC):
        passages = []
        own = rng.integers(0, n_real, size=PER_DOC)
        other = rng.integers(0, n_real, size=PER_DOC)
        extra = rng.integers(0, len(texts), size=PER_DOC)
        for j in range(PER_DOC):
            sentences = re.split(r"(?<=[.!?])\s+", texts[int(own[j])])
            start = int(rng.integers(0, max(1, len(sentences) - 2)))
            piece = " ".join(sentences[start : start + int(rng.integers(2, 8))])
            tail = " ".join(texts[int(extra[j])].split()[: int(rng.integers(10, 40))])
            passages.append(f"{piece} {tail}")
        docs.append(synthetic_document(d, passages))
        v = 0.8 * real[own] + 0.35 * real[other] + rng.normal(0, 0.02, size=(PER_DOC, real.shape[1]))
        vecs.append((v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32))
    return docs, vecs


def build(n: int, dataset: Path) -> dict[str, Any]:
    from evidence.embed.minilm import DIMENSION, MODEL_ID
    from evidence.search.embedded import EmbeddedBackend

    store = WORK / str(n)
    meta_path = store / "build.json"
    if meta_path.exists() and json.loads(meta_path.read_text()).get("complete"):
        return dict(json.loads(meta_path.read_text()))
    if not store.exists():
        smaller = sorted(
            int(p.name)
            for p in WORK.iterdir()
            if p.name.isdigit()
            and int(p.name) < n
            and (p / "build.json").exists()
            and json.loads((p / "build.json").read_text()).get("complete")
        )
        if smaller:
            shutil.copytree(WORK / str(smaller[-1]), store)
            (store / "build.json").unlink()
        else:
            store.mkdir(parents=True)
    texts, real = _sources(dataset)
    backend = EmbeddedBackend(store)
    if INDEX not in {i.name for i in backend.list_indexes()}:
        backend.create_index(INDEX, embedder_id=MODEL_ID, dimension=DIMENSION)
    done = backend.get_index(INDEX).chunks
    prev = json.loads(meta_path.read_text()) if meta_path.exists() else {"seconds": 0.0, "passages_built": 0}
    bar = Progress(f"build {n:,}")
    t0 = time.perf_counter()
    start_passages = done
    with backend.bulk(INDEX):
        for b in range(done // BATCH, n // BATCH):
            docs, vecs = _batch(b, texts, real)
            backend.upsert(INDEX, docs, vecs)
            bar((b + 1) * BATCH, n, "passages")
            prev_partial = {**prev, "seconds": prev["seconds"] + time.perf_counter() - t0}
            meta_path.write_text(json.dumps(prev_partial))
    bar.close()
    backend.close()
    seconds = prev["seconds"] + time.perf_counter() - t0
    built = n - start_passages + prev.get("passages_built", 0)
    out = {
        "passages": n,
        "complete": True,
        "seconds": round(seconds, 1),
        "passages_built": built,
        "passages_per_s": round(built / seconds, 1) if seconds else None,
        "store_bytes": tree_bytes(store),
    }
    meta_path.write_text(json.dumps(out))
    return out


_MEASURE = r"""
import json, sys, time, resource, os
sys.path.insert(0, {shared!r})
from pathlib import Path
from evidence.config import Settings
from evidence.evaluation import find_dataset, load_qrels, load_queries, percentile
from evidence.model import RetrieveRequest
from evidence.rank.first_stage import FirstStage, HybridRecall, RetrievalMode
from evidence.rank.pipeline import Profile
from evidence.rank.profiles import default_profile
from evidence.profiles import register_profile
from evidence.service import EvidenceService

for mode in ("lexical", "dense"):
    def make(mode=mode):
        p = default_profile()
        first = HybridRecall(ours=FirstStage(mode=RetrievalMode(mode if mode == "dense" else "bm25")))
        stages = tuple(first if s.name == "first_stage" else s
                       for s in p.stages)
        return Profile(name="bench-" + mode, description=mode, defaults=p.defaults, stages=stages)
    register_profile("bench-" + mode, make)
svc = EvidenceService(Settings(store_dir=Path({store!r}), default_index={index!r}))
ds = find_dataset(Path({dataset!r}))
queries = [t for _, t in load_queries(ds.queries, set(load_qrels(ds.qrels)))][:{nq}]
from evidence.search.embedded import dense_path
store = svc.backend.index_store({index!r})
out = {{"dense_path": dense_path(svc.backend, {index!r})}}
if out["dense_path"] == "ann":
    t = time.perf_counter(); store._ann_current(); out["ann_prepare_s"] = round(time.perf_counter() - t, 1)
FILTER = {{"type": {filtered_type!r}}}
for label, profile in (("bm25", "bench-lexical"), ("dense", "bench-dense"), ("hybrid", "default")):
    for filt in (None, FILTER):
        req = lambda q: RetrieveRequest(query=q, profile=profile, filters=filt)
        for q in queries[:3]:
            svc.retrieve({index!r}, req(q))
        times = []
        for q in queries:
            t = time.perf_counter()
            svc.retrieve({index!r}, req(q))
            times.append((time.perf_counter() - t) * 1000)
        out[label + ("_filtered" if filt else "")] = {{p: round(percentile(times, int(p[1:])), 1)
                                                     for p in ("p50", "p95", "p99")}}
        print(label, filt, out[label + ("_filtered" if filt else "")], file=sys.stderr, flush=True)
# Serving RSS now, and the peak (which includes building the ANN index when no file existed).
vmrss = [l for l in open("/proc/self/status") if l.startswith("VmRSS:")][0].split()[1]
out["rss_mb"] = round(int(vmrss) / 1024, 1)
out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
if out["dense_path"] == "ann" and {recall}:
    # recall@100 of the dense leg against exact cosine (the exact matrix is loaded after RSS was read)
    from evidence.records import ChunkKind
    vecs = [svc.embedder.embed_query(q) for q in queries[:{recall_queries}]]
    for filt in (None, FILTER):
        approx = [[h.chunk.chunk_id for h in store.dense(v, 100, filt, ChunkKind.PASSAGE)] for v in vecs]
        cfg, store.ann_config = store.ann_config, None
        t = time.perf_counter()
        exact = [[h.chunk.chunk_id for h in store.dense(v, 100, filt, ChunkKind.PASSAGE)] for v in vecs[:1]]
        t = time.perf_counter()
        exact = [[h.chunk.chunk_id for h in store.dense(v, 100, filt, ChunkKind.PASSAGE)] for v in vecs]
        exact_ms = (time.perf_counter() - t) * 1000 / len(vecs)
        store.ann_config = cfg
        t = time.perf_counter()
        for v in vecs:
            store.dense(v, 100, filt, ChunkKind.PASSAGE)
        ann_ms = (time.perf_counter() - t) * 1000 / len(vecs)
        rec = sum(len(set(a) & set(e)) / max(len(e), 1) for a, e in zip(approx, exact)) / len(vecs)
        key = "ann_recall_at_100" + ("_filtered" if filt else "")
        out[key] = round(rec, 4)
        out[key.replace("recall_at_100", "leg_ms")] = {{"ann": round(ann_ms, 1), "exact": round(exact_ms, 1)}}
        print(key, out[key], out[key.replace("recall_at_100", "leg_ms")], file=sys.stderr, flush=True)
print(json.dumps(out))
"""


def measure(
    n: int, dataset: Path, queries: int, recall: bool = True, recall_queries: int = 100
) -> dict[str, Any]:
    code = _MEASURE.format(
        shared=str(ROOT / "shared"),
        store=str(WORK / str(n)),
        index=INDEX,
        dataset=str(dataset),
        nq=queries,
        recall=recall,
        recall_queries=recall_queries,
        filtered_type=FILTERED_TYPE,
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=False
    )
    if proc.returncode:
        raise SystemExit(f"measuring {n}: {proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def table(results: dict[str, Any]) -> str:
    legs = ("bm25", "bm25_filtered", "dense", "dense_filtered", "hybrid", "hybrid_filtered")
    head = (
        "| passages | build p/s | store GB | RSS MB | dense | "
        + " | ".join(f"{leg} p50/p95/p99 ms" for leg in legs)
        + " |"
    )
    lines = [head, "|" + "---|" * (5 + len(legs))]
    for n, r in sorted(results["sizes"].items(), key=lambda kv: int(kv[0])):
        b, m = r["build"], r["serve"]
        cells = [f"{m[leg]['p50']}/{m[leg]['p95']}/{m[leg]['p99']}" for leg in legs]
        lines.append(
            f"| {int(n):,} | {b.get('passages_per_s')} | {b['store_bytes'] / 1e9:.2f} | {m['rss_mb']} | "
            f"{m.get('dense_path', 'exact')} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in results["sizes"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for leg, style in (("bm25", "o-"), ("dense", "s-"), ("hybrid", "^-")):
        for suffix, ls in (("", "-"), ("_filtered", "--")):
            ys = [results["sizes"][str(n)]["serve"][leg + suffix]["p95"] for n in sizes]
            ax.plot(sizes, ys, style[0] + ls, label=f"{leg}{' + filter' if suffix else ''} p95")
    ax.set_xscale("log")
    ax.set_xlabel("passages")
    ax.set_ylabel("whole retrieve p95 (ms)")
    ax.set_title("Embedded backend: retrieve p95 vs corpus size (2 cores)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, "synthesised vectors from real MiniLM ones; real text; real queries", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,300000,1000000", help="comma-separated passage counts")
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--queries", type=int, default=200, help="SciFact test queries timed per leg")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument(
        "--query-only",
        action="store_true",
        help="measure the complete stores already under build/scale/<n>/, never build or extend one",
    )
    ap.add_argument(
        "--recall-queries", type=int, default=100, help="queries of the ANN recall check (each scans exactly)"
    )
    ap.add_argument("--plot", type=Path, default=None, help="PNG to write (needs matplotlib)")
    args = ap.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    if any(n % BATCH for n in sizes):
        ap.error(f"--sizes: each size must be a multiple of {BATCH}")
    WORK.mkdir(parents=True, exist_ok=True)
    res_path = WORK / "results.json"
    results: dict[str, Any] = json.loads(res_path.read_text()) if res_path.exists() else {"sizes": {}}
    results["note"] = VECTOR_NOTE
    results["cores"] = os.cpu_count()
    print(f"note: {VECTOR_NOTE}", flush=True)
    if args.query_only and args.build_only:
        ap.error("--query-only and --build-only exclude each other")
    for n in sizes:
        if args.query_only:
            meta = WORK / str(n) / "build.json"
            if not meta.exists() or not json.loads(meta.read_text()).get("complete"):
                ap.error(f"--query-only: no complete store of {n:,} passages under {WORK / str(n)}")
            b = dict(json.loads(meta.read_text()))
        else:
            b = build(n, args.dataset)
        print(json.dumps({"passages": n, "build": b}), flush=True)
        if args.build_only:
            continue
        m = measure(n, args.dataset, args.queries, recall_queries=args.recall_queries)
        results["sizes"][str(n)] = {"build": b, "serve": m}
        print(json.dumps({"passages": n, "serve": m}), flush=True)
        res_path.write_text(json.dumps(results, indent=2) + "\n")
    if not args.build_only and results["sizes"]:
        print(table(results))
        if args.plot:
            plot(results, args.plot)
            print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
