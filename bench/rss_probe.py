"""Where the serving process's memory goes under writes, without HTTP (RELIABILITY.md, "Load").

Copies the load run's SciFact base store (`bench/load.py` builds it), then indexes SciFact
documents one at a time through the service, with three retrieves after each, and prints the
process's anonymous and file-backed RSS every `--every` writes and at every jump of more than
20 MB, with the sizes of the tantivy segments.

    python bench/rss_probe.py [--writes 700] [--warm-up]

`--warm-up` first runs the embedder once at its largest batch (8 by 256 tokens), which sizes
onnxruntime's memory arena up front.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from load import INDEX, rss_kb  # noqa: E402  (bench/load.py: the base store this copies)

from evidence.config import Settings  # noqa: E402
from evidence.model import IndexDocumentRequest, RetrieveRequest  # noqa: E402
from evidence.server import limit_malloc_arenas  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402


def rss_mb() -> dict[str, int]:
    _, anon, file = rss_kb(os.getpid())
    return {"RssAnon": anon // 1024, "RssFile": file // 1024}


def segments(store: Path) -> dict[str, list[int]]:
    lexical = store / "indexes" / INDEX / "lexical"
    return {
        kind: [s["max_doc"] for s in json.loads((lexical / kind / "meta.json").read_text())["segments"]]
        for kind in ("passage", "span")
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "scifact"))
    ap.add_argument("--base-store", default=str(ROOT / "build" / "load-base"))
    ap.add_argument("--writes", type=int, default=700)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--warm-up", action="store_true", help="size the embedder's arena at start")
    args = ap.parse_args()
    base = Path(args.base_store)
    if not (base / "load-base.json").exists():
        raise SystemExit(f"rss_probe: no base store at {base}; run bench/load.py once")
    limit_malloc_arenas()  # as `evidence serve` does
    dataset = Path(args.dataset)
    with gzip.open(dataset / "corpus.jsonl.gz", "rt") as fh:
        docs = [json.loads(line) for _, line in zip(range(args.writes), fh, strict=False)]
    with gzip.open(dataset / "queries.jsonl.gz", "rt") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    with tempfile.TemporaryDirectory(prefix="evidence-probe-") as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(base, store)
        service = EvidenceService(Settings(store_dir=store))
        service.retrieve(INDEX, RetrieveRequest(query=queries[0]))
        if args.warm_up:
            from evidence.embed.minilm import MiniLMEmbedder

            inner = getattr(service.embedder, "inner", service.embedder)
            if isinstance(inner, MiniLMEmbedder):
                inner.embed_documents(["word " * 400] * inner.batch_size)
        print("start", rss_mb(), flush=True)
        previous = rss_mb()["RssAnon"]
        for i, doc in enumerate(docs):
            service.index_document(
                INDEX,
                IndexDocumentRequest(
                    document_id=f"probe-{i}",
                    filename="probe.txt",
                    text=f"{doc.get('title', '')} {doc['text']}".strip(),
                    metadata={"type": "doc"},
                ),
            )
            for q in range(3):
                service.retrieve(INDEX, RetrieveRequest(query=queries[(i * 3 + q) % len(queries)]))
            now = rss_mb()
            if i % args.every == 0 or now["RssAnon"] - previous > 20:
                print(i, now, segments(store), flush=True)
            previous = now["RssAnon"]
        print("end", rss_mb(), segments(store), flush=True)
        service.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
