"""What scoping the embedding cache by index costs (issue 26.5; RELIABILITY.md, "Noisy neighbours").

The same SciFact abstracts are indexed into index `a`, then into index `b`, on one store with
the real MiniLM embedder, once per `EVIDENCE_EMBEDDING_CACHE_SCOPE`:

* `index` (the default): `b` reuses none of `a`'s vectors, so it costs what `a` cost;
* `shared`: `b` is served from `a`'s vectors (the saving, and the cross-tenant timing signal).

    python bench/cache_scope.py [--docs 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import ROOT, _find, read_jsonl

from evidence.config import EmbeddingCacheScope, Settings
from evidence.model import IndexDocumentRequest
from evidence.service import EvidenceService


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "scifact"))
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    corpus = read_jsonl(_find(Path(args.dataset), "corpus.jsonl.gz", "corpus.jsonl"), limit=args.docs)
    requests = [
        IndexDocumentRequest(
            document_id=str(d["_id"]), filename=f"{d['_id']}.txt", text=f"{d.get('title', '')}. {d['text']}"
        )
        for d in corpus
    ]
    report: dict[str, dict[str, float]] = {}
    for scope in EmbeddingCacheScope:
        with tempfile.TemporaryDirectory(prefix="evidence-cache-") as tmp:
            service = EvidenceService(Settings(store_dir=Path(tmp), embedding_cache_scope=scope))
            service.embedder.embed_query("warm up the model")
            times = {}
            for index in ("a", "b"):
                started = time.perf_counter()
                for request in requests:
                    service.index_document(index, request)
                times[index] = round(time.perf_counter() - started, 2)
            service.close()
        report[scope.value] = {"index_a_s": times["a"], "index_b_s": times["b"]}
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
