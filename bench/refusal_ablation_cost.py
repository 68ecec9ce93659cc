"""What key-term ablation would cost per retrieve (docs/verbatim.md#refusal-key-ablation).

Usage: python bench/refusal_ablation_cost.py ROWS_JSON --store DIR [--rounds 3] [--limit 80]

ROWS_JSON: rows recorded with `bench/refusal_rows.py --ablation`. For each row's recorded
ablation (the question without its index-rarest key concept, within the evidence's documents),
times the work a served ablation adds: embedding the ablated question (MiniLM, uncached) and one
dense passage call filtered to those documents (`_dense`), or one BM25 call instead (`_lex`),
`--rounds` times over the first `--limit` rows, after one untimed embedding that loads the model
(query vectors are not cached, so every round embeds again; the store's pages are warm after the
first). Prints median / p90 milliseconds. A shared machine's numbers: re-measure on an idle one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation.suite import slug  # noqa: E402
from evidence.records import ChunkKind  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402
from evidence.verbatim.grounding import AGREEMENT_DEPTH  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=80)
    args = ap.parse_args()
    rows = [r for r in json.loads(args.rows.read_text()) if (r.get("judged") or {}).get("ablation")]
    service = EvidenceService(Settings(store_dir=args.store))
    indexes = {i.name for i in service.list_indexes()}
    work = []
    for r in rows:
        abl = r["judged"]["ablation"]
        if "rarest" not in abl or not abl["full"]["dense"]:
            continue
        index = f"qa-{slug(r['family'])}"  # as `evidence eval --qa` names a family's index
        if index not in indexes:
            continue
        docs = sorted({d[0] for d in abl["full"]["dense"]})
        work.append((index, abl["rarest"]["text"], docs))
    work = work[: args.limit]
    embed_ms: list[float] = []
    dense_ms: list[float] = []
    lex_ms: list[float] = []
    try:
        if work:  # the model's first load is no per-retrieve cost
            service.query_vector(work[0][0], work[0][1])
        for _ in range(args.rounds):
            for index, text, docs in work:
                filters = {"document_id": docs}
                t0 = time.perf_counter()
                vector = service.query_vector(index, text)
                assert vector is not None
                t1 = time.perf_counter()
                service.backend.dense(
                    index, vector, k=AGREEMENT_DEPTH, filters=filters, kind=ChunkKind.PASSAGE
                )
                t2 = time.perf_counter()
                service.backend.lexical(
                    index, text, k=AGREEMENT_DEPTH, filters=filters, kind=ChunkKind.PASSAGE
                )
                t3 = time.perf_counter()
                embed_ms.append((t1 - t0) * 1000)
                dense_ms.append((t2 - t0) * 1000)
                lex_ms.append((t3 - t2) * 1000)
    finally:
        service.close()
    for name, xs in (
        ("embedding the ablated question", embed_ms),
        ("ablation_dense (embed + dense call)", dense_ms),
        ("ablation_lex (BM25 call)", lex_ms),
    ):
        a = np.asarray(xs)
        print(f"{name}: n {len(a)} median {np.median(a):.1f} ms p90 {np.percentile(a, 90):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
