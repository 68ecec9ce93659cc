"""The span scorer's word pieces on disk (`embed/pieces.py`): what a new process saves, what it
costs, and that it changes no answer (docs/verbatim.md, "The token-level match").

    # every question of the QA suite in this (fresh) process: path, refusal, hit ids, latency
    python bench/token_cache.py answers bench/qa --store DIR --out A.json [--quantise int8]
    # two such runs gave the same answers? (paths, refusals, every hit in order)
    python bench/token_cache.py compare A.json B.json
    # bytes per span (float16 / int8), the cache file, and what storing every span's pieces at
    # indexing time would cost (bytes, and model time measured on a sample of spans)
    python bench/token_cache.py sizes --store DIR [--sample 200]

`answers` runs with whatever `evidence` is importable: `PYTHONPATH=OTHER/shared` runs another
checkout's code (A/B against main). `--quantise int8` stores each piece vector as int8 with a
per-row scale (read back as float16) inside this process only, to show what int8 would change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def percentile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return 0.0
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _int8_roundtrip() -> None:
    """Patch TokenCache so every matrix it makes is what an int8 store with a per-row scale
    would give back (max |x| of the row / 127)."""
    from evidence.verbatim import span_rank

    inner = span_rank.TokenCache.lookup

    def lookup(self: Any, texts: Sequence[str], store: Any = None, **kw: Any) -> list[np.ndarray]:
        out = []
        for m in inner(self, texts, store, **kw):
            a = np.asarray(m, dtype=np.float32)
            scale = np.maximum(np.abs(a).max(axis=1, keepdims=True), 1e-12) / 127.0
            q = np.clip(np.rint(a / scale), -127, 127).astype(np.int8)
            out.append((q.astype(np.float32) * scale).astype(np.float16))
        return out

    span_rank.TokenCache.lookup = lookup  # type: ignore[method-assign]


def answers(args: argparse.Namespace) -> int:
    from evidence.config import Settings
    from evidence.evaluation.qa import load_qa
    from evidence.evaluation.suite import ensure_qa_index, find_qa_families
    from evidence.model import RetrieveRequest
    from evidence.service import EvidenceService

    if args.quantise == "int8":
        _int8_roundtrip()
    started = time.perf_counter()
    service = EvidenceService(Settings(store_dir=Path(args.store)))
    rows: list[dict[str, Any]] = []
    for family in find_qa_families(Path(args.qa)):
        index, _ = ensure_qa_index(service, family)
        for rec in load_qa(family.questions):
            t0 = time.perf_counter()
            resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile=args.profile))
            ms = (time.perf_counter() - t0) * 1000
            texts = "\n".join(h.text for h in resp.hits)
            rows.append(
                {
                    "family": family.name,
                    "question": rec["question"],
                    "path": resp.telemetry.path_used,
                    "can_answer": resp.can_answer,
                    "confidence": round(float(resp.confidence), 6),
                    "hits": [h.chunk_id for h in resp.hits],
                    "text_sha": hashlib.sha256(texts.encode()).hexdigest()[:16],
                    "ms": round(ms, 2),
                }
            )
    service.close()
    lat = [r["ms"] for r in rows]
    summary = {
        "questions": len(rows),
        "p50_ms": round(percentile(lat, 50), 1),
        "p95_ms": round(percentile(lat, 95), 1),
        "mean_ms": round(statistics.fmean(lat), 1),
        "process_s": round(time.perf_counter() - started, 1),
    }
    Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}))
    print(json.dumps(summary))
    return 0


def compare(args: argparse.Namespace) -> int:
    a = json.loads(Path(args.a).read_text())["rows"]
    b = json.loads(Path(args.b).read_text())["rows"]
    keys = ("path", "can_answer", "confidence", "hits", "text_sha")
    differ = [
        (x["family"], x["question"], {k: (x[k], y[k]) for k in keys if x[k] != y[k]})
        for x, y in zip(a, b, strict=True)
        if any(x[k] != y[k] for k in keys)
    ]
    print(json.dumps({"questions": len(a), "different": len(differ)}))
    for fam, q, d in differ[:20]:
        print(f"  {fam}: {q}\n    {d}")
    return 0 if not differ else 1


def sizes(args: argparse.Namespace) -> int:
    import sqlite3

    from evidence.config import Settings
    from evidence.embed.minilm import MiniLMEmbedder
    from evidence.records import ChunkKind
    from evidence.service import EvidenceService
    from evidence.verbatim.spans import scoring_texts

    store = Path(args.store)
    out: dict[str, Any] = {}
    pieces = store / "pieces.sqlite3"
    if pieces.exists():
        db = sqlite3.connect(pieces)
        n, vec_bytes, rows = db.execute("SELECT count(*), total(bytes), total(rows) FROM pieces").fetchone()
        db.close()
        files = sum(p.stat().st_size for p in store.glob("pieces.sqlite3*"))
        out["cache"] = {
            "texts": n,
            "vector_bytes": int(vec_bytes),
            "file_bytes": files,
            "mean_pieces": round(rows / n, 1) if n else 0,
            "bytes_per_text_float16": round(vec_bytes / n) if n else 0,
            "bytes_per_text_int8": round((vec_bytes / 2 + 4 * rows) / n) if n else 0,
        }
    out["store_bytes_without_pieces"] = sum(
        p.stat().st_size for p in store.rglob("*") if p.is_file() and not p.name.startswith("pieces.sqlite3")
    )
    # Option B: every span's pieces stored at indexing time.
    service = EvidenceService(Settings(store_dir=store))
    model = MiniLMEmbedder()
    texts: list[str] = []
    for info in service.backend.list_indexes():
        spans = [h.chunk for h in service.backend.lookup(info.name, {}, limit=10**9, kind=ChunkKind.SPAN)]
        texts.extend(scoring_texts(spans))
    service.close()
    inputs, _ = model.windows(texts, first_only=True)
    total_pieces = sum(len(x) - 2 for x in inputs)
    rng = np.random.default_rng(0)
    sample = [texts[i] for i in rng.choice(len(texts), size=min(args.sample, len(texts)), replace=False)]
    model.embed_tokens(sample[:8])  # the session's start is not the spans'
    t0 = time.perf_counter()
    model.embed_tokens(sample)
    per_span = (time.perf_counter() - t0) / len(sample)
    out["every_span"] = {
        "spans": len(texts),
        "mean_pieces": round(total_pieces / len(texts), 1),
        "float16_bytes": total_pieces * 384 * 2,
        "int8_bytes": total_pieces * (384 + 4),
        "embed_s_per_span_sampled": round(per_span, 4),
        "embed_s_every_span": round(per_span * len(texts), 1),
    }
    print(json.dumps(out, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("answers")
    a.add_argument("qa", nargs="?", default=str(ROOT / "bench" / "qa"))
    a.add_argument("--store", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--profile", default="verbatim")
    a.add_argument("--quantise", choices=("float16", "int8"), default="float16")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    s = sub.add_parser("sizes")
    s.add_argument("--store", required=True)
    s.add_argument("--sample", type=int, default=200)
    args = p.parse_args(argv)
    return {"answers": answers, "compare": compare, "sizes": sizes}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
