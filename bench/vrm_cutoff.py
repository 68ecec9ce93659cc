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
from evidence.rank.profiles import get_profile, register_profile
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
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
