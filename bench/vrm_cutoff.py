"""What vrm's relevancy cutoff keeps and drops without a reranker (issue 25 item 6).

    python bench/vrm_cutoff.py [--store DIR] [--json]

Two corpora, MiniLM, no reranker, the vrm profile's defaults (top 6, cutoff 0.1):

- the demo's vendor corpus (`evidence demo`'s index: vendor documents, a follow-up document,
  follow-up responses), questions in `bench/data/vrm_cutoff/demo_questions.jsonl`;
- held-out fixtures of another vendor written for this measurement (`bench/data/vrm_cutoff/globex`,
  one topic per document), questions in `questions.jsonl`.

A hit is relevant when its text contains one of the question's `relevant` labels (a heading of the
demo corpus, a file name of the fixtures). Reported per corpus, for the cutoff on fused scores
(before: it cut nothing) and on the calibrated relevance (now): hits returned, relevant hits
returned, irrelevant hits returned, questions whose relevant hit was lost, and every drop.

With `--scifact-store S` (the store `evidence eval --dataset .../scifact --mode hybrid` built):
the per-hit relevance against SciFact's judgements instead, binned, and what a 0.1 cutoff drops.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from evidence.config import Settings
from evidence.demo import VENDOR_STEPS
from evidence.model import Hit, RetrieveRequest
from evidence.profiles import get_profile, register_profile
from evidence.rank.stages import RelevancyCutoff
from evidence.service import EvidenceService

HERE = Path(__file__).parent / "data" / "vrm_cutoff"


def _uncalibrated() -> Any:
    vrm = get_profile("vrm")
    stages = tuple(RelevancyCutoff() if s.name == "rerank_cutoff" else s for s in vrm.stages)
    return replace(vrm, name="vrm-fused", stages=stages)


def _label(hit: Hit, corpus: str) -> str:
    return hit.source.rsplit("/", 1)[-1] if corpus == "globex" else hit.text


def _name(hit: Hit, corpus: str) -> str:
    return hit.source.rsplit("/", 1)[-1] if corpus == "globex" else " ".join(hit.text.split())[:40]


def measure(
    service: EvidenceService, index: str, questions: list[dict[str, Any]], corpus: str
) -> dict[str, Any]:
    out: dict[str, Any] = {
        p: {"hits": 0, "relevant_hits": 0, "irrelevant_hits": 0, "lost": 0} for p in ("vrm-fused", "vrm")
    }
    dropped_relevant: list[str] = []
    kept_irrelevant: list[str] = []
    dropped_irrelevant = 0
    for q in questions:
        labels = q["relevant"]
        got = {}
        for profile in ("vrm-fused", "vrm"):
            req = RetrieveRequest(query=q["criterion"], criterion_question=q["criterion"], profile=profile)
            hits = service.retrieve(index, req).hits
            ok = [h for h in hits if any(lab in _label(h, corpus) for lab in labels)]
            m = out[profile]
            m["hits"] += len(hits)
            m["relevant_hits"] += len(ok)
            m["irrelevant_hits"] += len(hits) - len(ok)
            m["lost"] += bool(labels) and not ok
            got[profile] = {h.chunk_id: (h, h in ok) for h in hits}
        for cid, (h, rel) in got["vrm-fused"].items():
            if cid not in got["vrm"]:
                if rel:
                    dropped_relevant.append(f"{q['criterion']} | {_name(h, corpus)}")
                else:
                    dropped_irrelevant += 1
        for h, rel in got["vrm"].values():
            if not rel:
                kept_irrelevant.append(f"{q['criterion']} | {_name(h, corpus)}")
    out["questions"] = len(questions)
    out["unanswerable"] = sum(not q["relevant"] for q in questions)
    out["dropped_irrelevant"] = dropped_irrelevant
    out["dropped_relevant"] = dropped_relevant
    out["kept_irrelevant"] = kept_irrelevant
    return out


def scifact(store: Path, dataset: Path) -> dict[str, Any]:
    """Per-hit calibration on SciFact's judged pairs: the top 10 of the first stage per test
    question (the eval index `evidence eval --dataset ... --mode hybrid` builds), the relevance
    of each hit against its qrels label, binned, and what a 0.1 cutoff keeps and drops."""
    from evidence.evaluation import find_dataset, load_qrels, load_queries
    from evidence.rank.candidate import Candidate
    from evidence.rank.confidence import hit_relevance

    ds = find_dataset(dataset)
    qrels = load_qrels(ds.qrels)
    queries = load_queries(ds.queries, set(qrels))
    service = EvidenceService(Settings(store_dir=store))
    index = "eval-scifact"
    embedder_id = service.backend.get_index(index).embedder_id
    pairs: list[tuple[float, int]] = []
    for qid, text in queries:
        r = service.retrieve(index, RetrieveRequest(query=text, profile="default", top_k=10, explain=True))
        hits = r.hits
        ids = [h.chunk_id for h in hits]
        by_id = {
            x.chunk.chunk_id: x.chunk
            for x in service.backend.lookup(index, {"chunk_id": ids}, limit=len(ids))
        }
        cands = [Candidate(chunk=by_id[i], score=0.0, first_stage_score=0.0) for i in ids]
        vector = service.query_vector(index, text)
        stored = service.backend.vectors(index, ids)
        cos = {}
        for i in ids:
            v = stored.get(i)
            if v is not None and vector is not None:
                cos[i] = float(v @ vector / ((v @ v) ** 0.5 * (vector @ vector) ** 0.5))
        rel = hit_relevance(text, cands, cosines=cos, embedder_id=embedder_id)
        for p, h in zip(rel, hits, strict=True):
            pairs.append((p, int(qrels[qid].get(h.document_id, 0) > 0)))
    bins = []
    for lo, hi in ((0, 0.1), (0.1, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01)):
        inside = [y for p, y in pairs if lo <= p < hi]
        if inside:
            mean_p = sum(p for p, _ in pairs if lo <= p < hi) / len(inside)
            bins.append(
                {
                    "bin": f"{lo:.1f}-{min(hi, 1.0):.1f}",
                    "n": len(inside),
                    "mean_relevance": round(mean_p, 3),
                    "relevant_share": round(sum(inside) / len(inside), 3),
                }
            )
    rel_total = sum(y for _, y in pairs)
    dropped = [(p, y) for p, y in pairs if p < 0.1]
    return {
        "pairs": len(pairs),
        "relevant": rel_total,
        "bins": bins,
        "cutoff_0.1": {
            "dropped": len(dropped),
            "dropped_relevant": sum(y for _, y in dropped),
            "kept_relevant_share": round(1 - sum(y for _, y in dropped) / max(1, rel_total), 4),
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store")
    p.add_argument("--json", action="store_true")
    p.add_argument("--scifact-store", help="also: per-hit calibration on SciFact's eval index in this store")
    p.add_argument("--dataset", default=str(Path(__file__).resolve().parents[2] / "shared/datasets/scifact"))
    args = p.parse_args(argv)
    if args.scifact_store:
        print(json.dumps(scifact(Path(args.scifact_store), Path(args.dataset)), indent=1))
        return 0
    register_profile("vrm-fused", _uncalibrated)
    store = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="vrm-cutoff-"))
    service = EvidenceService(Settings(store_dir=store))
    for paths, doc_type in VENDOR_STEPS:
        service.index_paths("demo", list(paths), doc_type=doc_type)
    service.index_paths("globex", sorted((HERE / "globex").glob("*.md")), doc_type="tc_files")
    report = {}
    for corpus, index, qfile in (
        ("demo", "demo", "demo_questions.jsonl"),
        ("globex", "globex", "questions.jsonl"),
    ):
        questions = [json.loads(line) for line in (HERE / qfile).read_text().splitlines() if line.strip()]
        report[corpus] = measure(service, index, questions, corpus)
    print(json.dumps(report, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
