"""Classify the QA suite's misses: a parsing problem or a ranking problem?

Usage: python bench/qa/misses.py [ROOT] [--profile P] [--families A,B] [--store DIR] [--json]

Every family is indexed as `evidence eval --qa` does (re-used while unchanged) and each answerable
question asked once with the profile. A miss (no expected answer in the first 600 characters of
the evidence; 2,000 for a profile other than `verbatim`) is put in one class, read off every span
of the family's index:

- `ranked_out`: an expected answer is inside one span, which the evidence did not bring in time;
- `across_spans`: it runs across 2-4 consecutive spans (the span splitter cut it);
- `passage_only`: it is in a passage but in no run of spans (spans lost text: a dropped line);
- `not_parsed`: it is in no passage either (the parser lost or changed it: hyphenation, a table).

The first class is for ranking work, the others for ingestion (`ingest/`). Prints the counts per
family and path, and each miss with the answer's section and the evidence's first span.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))
if str(HERE) not in sys.path:  # recall_gaps, a sibling script, when imported from elsewhere
    sys.path.insert(0, str(HERE))

from recall_gaps import holds, run_start  # noqa: E402

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    QA_EVIDENCE_CHARS,
    QA_WIDE_CHARS,
    answer_found,
    ensure_qa_index,
    find_qa_families,
    load_qa,
)
from evidence.evaluation.qa import squash  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.records import ChunkKind  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402


def classify(answers: list[str], spans: list[Any], passages: list[str]) -> tuple[str, Any]:
    """(class, the span holding the answer or starting the run of spans holding it)."""
    wanted = [squash(a) for a in answers]
    for c in spans:
        if holds(c.text, wanted):
            return "ranked_out", c
    start = run_start(spans, wanted)
    if start is not None:
        return "across_spans", start
    if any(any(w in squash(p) for w in wanted) for p in passages):
        return "passage_only", None
    return "not_parsed", None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("root", nargs="?", default=str(HERE))
    ap.add_argument("--profile", default="verbatim")
    ap.add_argument("--families", default="")
    ap.add_argument("--store", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    settings = Settings(store_dir=Path(args.store)) if args.store else Settings()
    service = EvidenceService(settings)
    limit = QA_EVIDENCE_CHARS if args.profile == "verbatim" else QA_WIDE_CHARS
    only = [f for f in args.families.split(",") if f] or None
    rows: list[dict[str, Any]] = []
    for family in find_qa_families(Path(args.root), only):
        index, _ = ensure_qa_index(service, family)
        docs = [d.document_id for d in service.backend.list_documents(index)]
        every = {"document_id": docs}
        spans = sorted(
            (h.chunk for h in service.backend.lookup(index, every, limit=1_000_000, kind=ChunkKind.SPAN)),
            key=lambda c: (c.document_id, c.char_start, c.sequence),
        )
        passages = [h.chunk.text for h in service.backend.lookup(index, every, limit=1_000_000)]
        for rec in load_qa(family.questions):
            if not rec["answers"]:
                continue
            resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile=args.profile))
            texts = [h.text for h in resp.hits]
            row: dict[str, Any] = {
                "family": family.name,
                "question": rec["question"],
                "path": resp.telemetry.path_used,
            }
            if answer_found(texts, rec["answers"], limit):
                row["class"] = "found"
            else:
                cls, span = classify(list(rec["answers"]), spans, passages)
                row.update(
                    {
                        "class": cls,
                        "answer_section": span.section if span is not None else None,
                        "evidence_first": squash(texts[0])[:160] if texts else None,
                    }
                )
            rows.append(row)
    if args.json:
        print(json.dumps(rows))
        return 0
    for family in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == family]
        print(f"{family}: {dict(Counter(r['class'] for r in mine))}")
        print(f"  misses by path: {dict(Counter(r['path'] for r in mine if r['class'] != 'found'))}")
    print(f"all: {dict(Counter(r['class'] for r in rows))}")
    for r in rows:
        if r["class"] != "found":
            print(f"- [{r['family']}] {r['class']} via {r['path']}: {r['question']}")
            print(f"    answer in: {r['answer_section']!r}; evidence starts: {r['evidence_first']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
