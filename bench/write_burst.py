"""Concurrent writes to one embedded index, without embedding: what group commit buys where
writes overlap at the store (RELIABILITY.md, "Load").

A copy of the load index (`bench/load.py`'s base store) is opened in this process; `--threads`
threads each write `--writes` new SciFact-shaped documents (random unit vectors: no model), and
delete every other one again. Reported: writes per second, latency p50/p95, the index's commits
(one per group), and the store's consistency at the end.

    python bench/write_burst.py --base-store build/load-base [--threads 8] [--writes 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

INDEX = "scifact"
TEXT = (
    "Chaperone proteins assist the folding of nascent polypeptide chains in the cytosol. "
    "We measured folding yields in vitro across twelve temperatures and three ionic strengths. "
)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from evidence.ingest import chunk_document, parse_text
    from evidence.records import ChunkKind
    from evidence.search.embedded import EmbeddedBackend

    with tempfile.TemporaryDirectory(prefix="evidence-burst-") as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(args.base_store, store)
        backend = EmbeddedBackend(store)
        idx = backend.index_store(INDEX)
        idx.dense(np.ones(idx.dimension() or 384, dtype=np.float32), 5, None, ChunkKind.PASSAGE)
        dim = idx.dimension() or 384
        start_generation = idx.generation()
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        rng = np.random.default_rng(0)

        def document(name: str) -> tuple[Any, np.ndarray]:
            parsed = parse_text(f"Note {name}. {TEXT * 3}", filename=f"{name}.txt", fmt="txt")
            doc = chunk_document(parsed, document_id=name, source=f"{name}.txt", metadata={"burst": "yes"})
            vecs = rng.standard_normal((len(doc.chunks), dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            for i, c in enumerate(doc.chunks):
                if c.kind is not ChunkKind.PASSAGE:
                    vecs[i] = np.nan
            return doc, vecs

        def worker(n: int) -> None:
            for w in range(args.writes):
                name = f"burst-{n}-{w}"
                doc, vecs = document(name)
                for op in ("upsert", "delete") if w % 2 else ("upsert",):
                    started = time.perf_counter()
                    try:
                        if op == "upsert":
                            backend.upsert(INDEX, [doc], [vecs])
                        else:
                            backend.delete_document(INDEX, name)
                    except Exception as exc:  # a failed write is a measured error
                        with lock:
                            errors.append(f"{op} {name}: {exc!r}")
                    with lock:
                        latencies.append((time.perf_counter() - started) * 1000)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(args.threads)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        commits = idx.generation() - start_generation
        ok = idx.consistency().ok
        backend.close()
    ordered = sorted(latencies)
    return {
        "threads": args.threads,
        "writes": len(latencies),
        "seconds": round(elapsed, 2),
        "writes_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(ordered[len(ordered) // 2], 1),
        "p95_ms": round(ordered[int(0.95 * len(ordered))], 1),
        "mean_ms": round(statistics.fmean(ordered), 1),
        "commits": commits,
        "errors": len(errors),
        "error_samples": errors[:3],
        "consistent": ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-store", default=str(ROOT / "build" / "load-base"))
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--writes", type=int, default=10, help="documents written per thread")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args)
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 1 if report["errors"] or not report["consistent"] else 0


if __name__ == "__main__":
    sys.exit(main())
