"""Where `evidence serve`'s CPU goes per retrieve, leg by leg (docs/scale.md#serving-cpu).

A sampling profiler misleads here: the request threads of a server wait for the GIL, and
cProfile or py-spy count those waits (py-spy's idle detection counted blocked threads too on this
machine). This measures CPU instead: `retrieve` runs SciFact queries through the HTTP resolver
(`evidence.api.app.resolve`: event, routing, body parsing, service, JSON) in one process, one at a
time, and charges each thread's CPU clock (`time.thread_time`) to the innermost leg running on
it: query embedding, the first stage's legs, score completion, fusion, focus, the refusal's
reading and its agreement searches, formatting, the response models. The lexical leg runs on the
pool thread (`rank/ahead.py`) and is counted there. What no leg claims (the resolver outside
them, pool hand-offs, other threads) is reported as the rest.

    OPENBLAS_NUM_THREADS=1 EVIDENCE_EMBED_THREADS=1 .venv/bin/python bench/serve_cpu.py retrieve \
        --store COPY_OF_LOAD_BASE [--queries 200 --rounds 2 | --draws 500]

One BLAS and one onnxruntime thread as in a `serve` worker on 2 cores (two BLAS threads spin and
double the CPU of a scan). `--rounds`: the same queries again and again (steady state: every
per-passage cache warm); `--draws N`: N queries drawn at random as `bench/load.py` draws them, in
a fresh process (a worker's first N retrieves).

    .venv/bin/python bench/serve_cpu.py commits --lexical STORE/indexes/scifact/lexical/passage

`commits`: the CPU of single-document tantivy commits (writer, delete, add, commit, merges) on a
copy of an inverted index, and its segments after each: what an upload's lexical sync costs.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"


class Legs:
    """Thread CPU charged to the innermost wrapped call on each thread; a `sticky` leg keeps
    what it calls (the agreement's searches stay the agreement's)."""

    def __init__(self) -> None:
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._local = threading.local()

    def wrap(self, owner: Any, name: str, leg: str, *, sticky: bool = False) -> None:
        fn: Callable[..., Any] = getattr(owner, name)
        legs = self

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack: list[list[Any]] = legs._local.__dict__.setdefault("stack", [])
            if stack and stack[-1][2]:
                return fn(*args, **kwargs)
            now = time.thread_time()
            if stack:
                legs.cpu[stack[-1][0]] += now - stack[-1][1]
            stack.append([leg, now, sticky])
            legs.calls[leg] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                now = time.thread_time()
                top = stack.pop()
                legs.cpu[top[0]] += now - top[1]
                if stack:
                    stack[-1][1] = now

        setattr(owner, name, timed)


def retrieve(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["EVIDENCE_STORE_DIR"] = str(args.store)
    os.environ["EVIDENCE_DEFAULT_INDEX"] = args.index
    sys.path.insert(0, str(ROOT / "shared"))
    import evidence.rank.context as rank_context
    from evidence import service
    from evidence.api import app
    from evidence.evaluation import find_dataset, load_qrels, load_queries
    from evidence.profiles import base
    from evidence.rank import dedup, first_stage
    from evidence.search import embedded
    from evidence.server import http_to_event
    from evidence.testing import lambda_context
    from evidence.verbatim import grounding

    legs = Legs()
    legs.wrap(app, "parse_body", "request body (pydantic)")
    legs.wrap(app, "json_response", "response JSON (model_dump_json)")
    legs.wrap(service.EvidenceService, "retrieve", "response models (hits, telemetry)")
    legs.wrap(service.EvidenceService, "run_profile", "plan, params, withhold, span check")
    legs.wrap(service.EvidenceService, "query_vector", "query embedding (onnxruntime)")
    legs.wrap(base.PipelinePlugin, "scope", "scope: named documents", sticky=True)
    legs.wrap(base.PipelinePlugin, "answer_signal", "refusal: answer signal, grounding")
    legs.wrap(grounding, "passage_agreement", "refusal: agreement searches", sticky=True)
    legs.wrap(base, "head_cosines", "refusal: head cosines", sticky=True)
    legs.wrap(base.PipelinePlugin, "bundle", "evidence XML", sticky=True)
    legs.wrap(rank_context, "run_stage", "other stages (dedup, caps, mmr...)")
    legs.wrap(dedup.FocusHits, "run", "focus", sticky=True)
    legs.wrap(first_stage.FirstStage, "_complete_legs", "score completion", sticky=True)
    legs.wrap(first_stage, "fuse", "fusion", sticky=True)
    legs.wrap(first_stage.FirstStage, "retrieve", "first stage: the rest")
    legs.wrap(embedded.EmbeddedBackend, "lexical", "lexical leg (tantivy, records)")
    legs.wrap(embedded.EmbeddedBackend, "dense", "dense leg (scan, records)")

    ds = find_dataset(args.dataset)
    queries = [t for _, t in load_queries(ds.queries, set(load_qrels(ds.qrels)))]

    def call(query: str) -> None:
        event = http_to_event(
            "POST",
            f"/v1/indexes/{args.index}/retrieve",
            [("Content-Type", "application/json")],
            json.dumps({"query": query, "top_k": 10}).encode(),
        )
        answer = app.resolve(event, lambda_context("serve-cpu"))
        assert answer["statusCode"] == 200, answer

    if args.draws:
        rng = random.Random(1)
        plan = [rng.choice(queries) for _ in range(args.draws)]
        call(queries[0])  # the model's session
    else:
        plan = queries[: args.queries] * args.rounds
        for query in queries[: args.queries]:  # warm: every per-passage and per-word cache
            call(query)
    legs.cpu.clear()
    legs.calls.clear()
    started = time.process_time()
    for query in plan:
        call(query)
    total = time.process_time() - started
    n = len(plan)
    rows = {leg: round(1000 * cpu / n, 2) for leg, cpu in legs.cpu.most_common()}
    rows["the rest (resolver outside the legs, pool hand-offs, other threads)"] = round(
        1000 * (total - sum(legs.cpu.values())) / n, 2
    )
    return {"retrieves": n, "cpu_ms_per_retrieve": round(1000 * total / n, 2), "legs_ms": rows}


def commits(args: argparse.Namespace) -> dict[str, Any]:
    import tantivy

    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="serve-cpu-") as tmp:
        path = Path(tmp) / "lexical"
        shutil.copytree(args.lexical, path)
        sb = tantivy.SchemaBuilder()  # the store's schema (search/store_lexical.py)
        sb.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
        sb.add_text_field("document_id", stored=False, tokenizer_name="raw")
        sb.add_text_field("meta", stored=False, tokenizer_name="raw")
        sb.add_text_field("body", stored=False, tokenizer_name="ws", index_option="freq")
        index = tantivy.Index(sb.build(), path=str(path), reuse=True)
        index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        for i in range(args.commits):
            started = time.process_time()
            writer = index.writer(heap_size=64_000_000, num_threads=1)  # the store's writer
            writer.delete_documents_by_term("document_id", f"serve-cpu-{i}")
            doc = tantivy.Document()
            doc.add_text("document_id", f"serve-cpu-{i}")
            doc.add_text("chunk_id", f"serve-cpu-{i}:0")
            doc.add_text("body", " ".join(f"term{j % 97}" for j in range(200)))
            writer.add_document(doc)
            writer.commit()
            writer.wait_merging_threads()
            del writer
            segments = [s["max_doc"] for s in json.loads((path / "meta.json").read_text())["segments"]]
            out.append({"cpu_ms": round(1000 * (time.process_time() - started), 1), "segments": segments})
    cpu = [row["cpu_ms"] for row in out]
    return {"commits": out, "mean_cpu_ms": round(sum(cpu) / len(cpu), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("retrieve")
    r.add_argument("--store", type=Path, required=True, help="a copy of the load bench's base store")
    r.add_argument("--index", default="scifact")
    r.add_argument("--dataset", type=Path, default=SCIFACT)
    r.add_argument("--queries", type=int, default=200)
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--draws", type=int, default=0, help="random draws in a fresh process instead")
    c = sub.add_parser("commits")
    c.add_argument("--lexical", type=Path, required=True, help="an inverted index directory (copied)")
    c.add_argument("--commits", type=int, default=24)
    args = ap.parse_args()
    print(json.dumps(retrieve(args) if args.what == "retrieve" else commits(args), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
