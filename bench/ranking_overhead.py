"""Overhead of the ranking stages per request, excluding the first stage and the remote reranker.

100 synthetic candidates (384-dim vectors, as MiniLM) in a real embedded store, follow-ups linked
to the criterion, follow-up documents; each profile is run N times on the same candidate list.
The reranker is an in-process stand-in whose own time is subtracted, so the numbers are what
our code adds around a remote call. Formatting (evidence XML + JSON hits) is measured too.

    .venv/bin/python bench/ranking_overhead.py [--runs 1000] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))

from evidence.format.evidence import evidence_from_candidates
from evidence.format.hits import to_followups, to_hits
from evidence.ids import content_hash, normalize_and_hash
from evidence.profiles import get_profile
from evidence.rank.candidate import Candidate
from evidence.rank.context import RankContext
from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.search.embedded import EmbeddedBackend

DIM = 384
INDEX = "bench"
CRITERION = "Do you encrypt customer data at rest?"


def _vec(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _chunks() -> list[Chunk]:
    out = []
    h = normalize_and_hash(CRITERION)
    for i in range(100):
        meta: dict[str, object] = {"type": "followup_document" if i % 17 == 0 else "tc_files"}
        text = f"Vendor passage {i}: " + " ".join(f"word{(i * j) % 97}" for j in range(120))
        out.append(
            Chunk(
                f"c{i}",
                f"doc{i % 20}",
                ChunkKind.PASSAGE,
                text,
                0,
                len(text),
                i,
                source=f"doc{i % 20}.pdf",
                metadata=meta,
                content_hash=content_hash(text),
            )
        )
    for r in range(1, 5):
        text = f"Round {r} answer about encryption."
        meta = {
            "type": f"followup_response:{r}",
            "round_number": r,
            "criterion_question_hash": h,
            "question": CRITERION,
            "answer": text,
            "FILENAME": "followups.xlsx",
        }
        out.append(
            Chunk(
                f"f{r}",
                f"fu{r}",
                ChunkKind.PASSAGE,
                text,
                0,
                len(text),
                0,
                source="followups.xlsx",
                metadata=meta,
                content_hash=content_hash(text),
            )
        )
    return out


class InstantReranker:
    name = "instant"

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[tuple[int, float]]:
        c0 = time.thread_time()
        t0 = time.perf_counter()
        scored = [(i, int(hashlib.md5(t.encode()).hexdigest()[:4], 16) / 65535) for i, t in enumerate(texts)]
        scored.sort(key=lambda r: (-r[1], r[0]))
        self.seconds += time.perf_counter() - t0
        self.cpu_seconds += time.thread_time() - c0
        return scored[: top_n or len(texts)]


class Fixed:
    name = "first_stage"

    def __init__(self, cands: list[Candidate]) -> None:
        self.cands = cands

    def run(self, candidates: object, ctx: object) -> list[Candidate]:
        return self.cands


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)), 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        backend = EmbeddedBackend(Path(d))
        backend.create_index(INDEX, embedder_id="bench", dimension=DIM)
        chunks = _chunks()
        docs: dict[str, list[Chunk]] = {}
        for c in chunks:
            docs.setdefault(c.document_id, []).append(c)
        batch = [
            DocumentChunks(k, content_hash(k), v[0].source, tuple(v), dict(v[0].metadata))
            for k, v in docs.items()
        ]
        backend.upsert(
            INDEX,
            batch,
            [
                np.stack(
                    [_vec(int(c.chunk_id[1:]) + (0 if c.chunk_id[0] == "c" else 1000)) for c in d.chunks]
                )
                for d in batch
            ],
        )
        qv = _vec(99999)
        rng = np.random.default_rng(0)
        # 100 first-stage candidates: 96 passages + the 4 linked follow-ups, RRF-like scores
        regular = [c for c in chunks if c.chunk_id.startswith("c")][:96] + [
            c for c in chunks if c.chunk_id.startswith("f")
        ]
        fused = sorted(rng.uniform(0.01, 0.033, len(regular)), reverse=True)
        cands = [
            Candidate(c, float(s), float(s), {"fused": float(s), "dense": float(rng.uniform(0, 0.8))})
            for c, s in zip(regular, fused, strict=True)
        ]
        configs = {
            "vrm (seed defaults, reranker)": ("vrm", {}, True),
            "vrm + min_similarity + mmr + max_chars + per-doc cap": (
                "vrm",
                {"min_similarity": 0.2, "mmr_lambda": 0.7, "max_chars": 3000, "max_chunks_per_document": 2},
                True,
            ),
            "default (no reranker)": ("default", {}, False),
        }
        results = {}
        for label, (name, overrides, use_rr) in configs.items():
            profile = get_profile(name).with_stage("first_stage", Fixed(cands))
            params = profile.params(overrides)
            stage_ms: list[float] = []
            stage_cpu_ms: list[float] = []
            fmt_ms: list[float] = []
            for _ in range(args.runs):
                rr = InstantReranker() if use_rr else None
                ctx = RankContext(
                    INDEX,
                    CRITERION,
                    qv,
                    CRITERION,
                    normalize_and_hash(CRITERION),
                    params,
                    None,
                    False,
                    backend,
                    rr,
                )
                c0 = time.thread_time()
                t0 = time.perf_counter()
                out = profile.run(ctx)
                t1 = time.perf_counter()
                c1 = time.thread_time()
                doc = evidence_from_candidates(out.hits, out.followups)
                to_hits(out.hits)
                to_followups(out.followups)
                t2 = time.perf_counter()
                stage_ms.append((t1 - t0 - (rr.seconds if rr else 0.0)) * 1000)
                stage_cpu_ms.append((c1 - c0 - (rr.cpu_seconds if rr else 0.0)) * 1000)
                fmt_ms.append((t2 - t1) * 1000)
                assert doc.valid_indexes
            results[label] = {
                "stages_cpu_p50_ms": _pct(stage_cpu_ms, 50),
                "stages_cpu_p95_ms": _pct(stage_cpu_ms, 95),
                "stages_p50_ms": _pct(stage_ms, 50),
                "stages_p95_ms": _pct(stage_ms, 95),
                "format_p50_ms": _pct(fmt_ms, 50),
                "format_p95_ms": _pct(fmt_ms, 95),
                "hits": len(out.hits),
                "followups": len(out.followups),
                "per_stage_ms": {s.name: s.ms for s in out.stages[1:]},
            }
        backend.close()
    if args.json:
        print(json.dumps({"runs": args.runs, "candidates": len(cands), "results": results}))
        return
    print(f"{len(cands)} candidates, {args.runs} runs each (remote reranker excluded); ms")
    print(f"  {'':53s} stages wall p50/p95 | stages CPU p50/p95 | format wall p50/p95")
    for label, r in results.items():
        print(
            f"  {label:53s} {r['stages_p50_ms']:6.3f} / {r['stages_p95_ms']:6.3f}"
            f"    | {r['stages_cpu_p50_ms']:6.3f} / {r['stages_cpu_p95_ms']:6.3f}"
            f"    | {r['format_p50_ms']:6.3f} / {r['format_p95_ms']:6.3f}"
            f"   ({r['hits']} hits + {r['followups']} follow-ups)"
        )


if __name__ == "__main__":
    main()
