"""Every development question's whole answer (hits, scores, evidence, refusal), one JSON line
each, and its latency: the no-change check of a speed-up (decision rule R6, session 44).

    EVIDENCE_TOKEN_CACHE_MB=1024 .venv/bin/python bench/qa/answer_dump.py --store DIR \\
        --qa build/qa19 --profile verbatim [--families a,b] [--embedder serve|plain] --out answers.jsonl
    .venv/bin/python bench/qa/answer_dump.py --compare a.jsonl b.jsonl

The store's indexes must be there already (`evidence eval` made them): this script never indexes.
`--compare` prints the questions whose answers differ (timings and telemetry durations left out)
and each file's latency p50/p95; exit 1 when any answer differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

#: Telemetry fields that are timings or process state, not the answer.
_VOLATILE = {"ms", "latency_ms", "timings", "durations", "stage_ms", "elapsed_ms", "request_id", "trace_id"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE and not k.endswith("_ms")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def dump(args: argparse.Namespace) -> int:
    from evidence.config import Settings
    from evidence.evaluation.files import slug
    from evidence.evaluation.qa import load_qa
    from evidence.evaluation.suite import find_qa_families
    from evidence.model import RetrieveRequest
    from evidence.service import EvidenceService

    families = [f for f in args.families.split(",") if f] if args.families else None
    settings = Settings(store_dir=Path(args.store))
    background = None
    if args.embedder == "serve":  # `evidence serve`'s: documents embedded in a niced worker process
        from evidence.embed.background import serving_embedder

        embedder, background = serving_embedder(settings)
        if embedder is None:
            raise SystemExit("--embedder serve: this deployment embeds no documents apart (write_nice 0?)")
        service = EvidenceService(settings, embedder=embedder)
    elif args.embedder == "plain":  # no store cache in front, as on OpenSearch
        from evidence.embed.factory import build_embedder

        service = EvidenceService(settings, embedder=build_embedder(settings))
    else:
        service = EvidenceService(settings)
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            for family in find_qa_families(Path(args.qa), families):
                index = f"qa-{slug(family.name)}"
                for rec in load_qa(family.questions):
                    t0 = time.perf_counter()
                    resp = service.retrieve(
                        index, RetrieveRequest(query=rec["question"], profile=args.profile)
                    )
                    ms = (time.perf_counter() - t0) * 1000
                    answer = _strip(resp.model_dump(mode="json"))
                    row = {
                        "family": family.name,
                        "question": rec["question"],
                        "ms": round(ms, 2),
                        "answer": answer,
                    }
                    out.write(json.dumps(row, sort_keys=True) + "\n")
    finally:
        service.close()
        if background is not None:
            background.close()
    return 0


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return 0.0
    k = (len(xs) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def compare(a: str, b: str) -> int:
    rows = [[json.loads(line) for line in Path(p).read_text(encoding="utf-8").splitlines()] for p in (a, b)]
    differ = 0
    if len(rows[0]) != len(rows[1]):
        print(f"different question counts: {len(rows[0])} vs {len(rows[1])}")
        differ += 1
    for x, y in zip(*rows, strict=False):
        if (x["family"], x["question"]) != (y["family"], y["question"]):
            print("questions out of step:", x["question"], "|", y["question"])
            return 1
        if _strip(x["answer"]) != _strip(y["answer"]):
            differ += 1
            print(f"DIFFERS {x['family']}: {x['question']}")
    for p, r in zip((a, b), rows, strict=True):
        ms = [x["ms"] for x in r]
        print(
            f"{p}: {len(r)} questions, latency p50 {_pct(ms, 50):.1f} ms, p95 {_pct(ms, 95):.1f} ms,"
            f" sum {sum(ms) / 1000:.1f} s"
        )
    print(f"{differ} answer(s) differ")
    return 1 if differ else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store")
    p.add_argument("--qa", default="build/qa19")
    p.add_argument("--profile", default="verbatim")
    p.add_argument("--families", default="")
    p.add_argument("--out")
    p.add_argument(
        "--embedder",
        choices=("store", "serve", "plain"),
        default="store",
        help="store: the service's own (the store's cache in front); serve: `evidence serve`'s"
        " (documents in a niced worker process); plain: no store cache in front (OpenSearch's)",
    )
    p.add_argument("--compare", nargs=2, metavar="FILE")
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.store or not args.out:
        p.error("--store and --out are needed (or --compare A B)")
    return dump(args)


if __name__ == "__main__":
    sys.exit(main())
