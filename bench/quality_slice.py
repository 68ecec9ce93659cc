"""Builds the SciFact slice behind the quality gate (tests/functional/rank/test_quality_gate.py).

The gate runs in every `make test`, so it cannot embed a corpus: this script does it once.
The slice is fixed and documented:
- queries: the first QUERIES test queries of SciFact by numeric id;
- documents: every judged-relevant document of those queries, plus each query's top
  NEGATIVES BM25 documents over the whole corpus (hard negatives: what a ranking must beat);
- vectors: the MiniLM vector of every text indexing the slice embeds, keyed by the SHA-256 of
  the text, float16 (the gate checks two of them against the live model, so a model change is
  caught, and a chunker change that embeds other texts fails with a pointer back here).

Writes tests/data/scifact_slice/{slice.json,vectors.npz} and prints the slice's figures, which
the gate's floors are set from (a little below, so noise does not fail CI; a fusion or scoring
regression falls far below: docs/ranking.md#quality-gate).

    .venv/bin/python bench/quality_slice.py --dataset ../shared/datasets/scifact
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT))

OUT = ROOT / "tests" / "data" / "scifact_slice"
QUERIES = 100
NEGATIVES = 20


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RecordingEmbedder:
    """The real embedder, remembering every document vector it computes."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.model_id: str = inner.model_id  # type: ignore[attr-defined]
        self.dimension: int = inner.dimension  # type: ignore[attr-defined]
        self.seen: dict[str, np.ndarray] = {}

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        out = self.inner.embed_documents(texts)  # type: ignore[attr-defined]
        for t, v in zip(texts, out, strict=True):
            self.seen[text_key(t)] = v
        return out  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)  # type: ignore[attr-defined,no-any-return]


def write_slice(dataset: Path, doc_ids: set[str], query_ids: list[str], folder: Path) -> None:
    """A BEIR-layout folder holding only the slice: what `evidence eval --dataset` reads."""
    from evidence.evaluation import find_dataset

    ds = find_dataset(dataset)
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(ds.corpus, "rt", encoding="utf-8") as src, (folder / "corpus.jsonl").open("w") as dst:
        for line in src:
            if json.loads(line)["_id"] in doc_ids:
                dst.write(line)
    wanted = set(query_ids)
    opener = gzip.open if ds.queries.suffix == ".gz" else open
    with opener(ds.queries, "rt", encoding="utf-8") as src, (folder / "queries.jsonl").open("w") as dst:  # type: ignore[operator]
        for line in src:
            if json.loads(line)["_id"] in wanted:
                dst.write(line)
    with ds.qrels.open() as src, (folder / "qrels-test.tsv").open("w") as dst:
        for i, line in enumerate(src):
            if i == 0 or line.split("\t")[0] in wanted:
                dst.write(line)


def main() -> int:
    from evidence.config import Settings
    from evidence.evaluation import find_dataset, load_qrels, load_queries, run_eval
    from evidence.service import EvidenceService, build_embedder

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    args = ap.parse_args()
    ds = find_dataset(args.dataset)
    qrels = load_qrels(ds.qrels)
    queries = sorted(load_queries(ds.queries, set(qrels)), key=lambda q: int(q[0]))[:QUERIES]
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        lexical = EvidenceService(Settings(store_dir=store / "bm25"))
        from evidence.evaluation import ensure_indexed

        index, _ = ensure_indexed(lexical, ds, with_vectors=False, progress=None)
        doc_ids: set[str] = set()
        for qid, text in queries:
            doc_ids.update(qrels[qid])
            hits = lexical.backend.lexical(index, text, k=NEGATIVES)
            doc_ids.update(h.chunk.document_id for h in hits)
        lexical.close()
        folder = Path(tmp) / "slice"
        write_slice(args.dataset, doc_ids, [q for q, _ in queries], folder)
        settings = Settings(store_dir=store / "slice")
        recorder = RecordingEmbedder(build_embedder(settings))
        service = EvidenceService(settings, embedder=recorder)  # type: ignore[arg-type]
        figures = {m: run_eval(service, folder, mode=m)["ndcg_at_10"] for m in ("bm25", "dense", "hybrid")}
        service.close()
    OUT.mkdir(parents=True, exist_ok=True)
    keys = sorted(recorder.seen)
    np.savez_compressed(
        OUT / "vectors.npz",
        keys=np.array(keys),
        vectors=np.stack([recorder.seen[k] for k in keys]).astype(np.float16),
    )
    (OUT / "slice.json").write_text(
        json.dumps(
            {
                "dataset": ds.name,
                "queries": [q for q, _ in queries],
                "documents": sorted(doc_ids, key=int),
                "built_with": {"queries": QUERIES, "negatives": NEGATIVES, "model_id": recorder.model_id},
                "ndcg_at_10": figures,
            },
            indent=1,
        )
        + "\n"
    )
    print(json.dumps({"documents": len(doc_ids), "queries": len(queries), "vectors": len(keys), **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
