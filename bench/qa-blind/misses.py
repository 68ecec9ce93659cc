"""Classify the blind set's misses the way a user sees them (read-only: no fitting, no tuning).

Usage: python bench/qa-blind/misses.py [ROOT] [--profile P] [--store DIR] [--json]

Each answerable question is asked once with the profile, on the index `evidence eval --qa` built
(re-used while unchanged). A miss (no expected answer in the first 600 characters of the evidence
for `verbatim`, 2,000 for another profile, as issue 22's acceptance judges them) gets one class:

- `refused`: the response is a refusal (`NO_RESULT`, or `can_answer: false`) and the answer is not
  in the evidence;
- `answer_cut`: a hit holds part of an expected answer (a common run of at least 20 characters,
  or half the answer when shorter) but no hit holds all of it;
- `late`: an expected answer is in the evidence, after the character budget;
- `wrong_document`: the first hit comes from another document than the answer's;
- `right_document_wrong_part`: the first hit is from the answer's document, elsewhere in it.

An unanswerable question is `refused` (right) or `answered` (the first hit is shown).

Prints the counts per family and each miss with its first hit's start.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

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
from evidence.evaluation.suite import is_refusal  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402


def partly_in(answer: str, text: str) -> bool:
    a, t = squash(answer), squash(text)
    m = SequenceMatcher(None, a, t, autojunk=False).find_longest_match(0, len(a), 0, len(t))
    return m.size >= min(20, max(1, len(a) // 2))


def classify(rec: dict[str, Any], resp: Any, limit: int) -> str:
    if not rec["answers"]:
        return "refused" if is_refusal(resp) else "answered"
    texts = [h.text for h in resp.hits]
    answers = list(rec["answers"])
    if answer_found(texts, answers, limit):
        return "found"
    if answer_found(texts, answers, 10**9):
        return "late"
    if not texts or is_refusal(resp):
        return "refused"
    if any(partly_in(a, t) for a in answers for t in texts):
        return "answer_cut"
    if Path(resp.hits[0].source).name != rec.get("document"):
        return "wrong_document"
    return "right_document_wrong_part"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("root", nargs="?", default=str(HERE))
    ap.add_argument("--profile", default="verbatim")
    ap.add_argument("--store", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    settings = Settings(store_dir=Path(args.store)) if args.store else Settings()
    service = EvidenceService(settings)
    limit = QA_EVIDENCE_CHARS if args.profile == "verbatim" else QA_WIDE_CHARS
    rows: list[dict[str, Any]] = []
    for family in find_qa_families(Path(args.root)):
        index, _ = ensure_qa_index(service, family)
        for rec in load_qa(family.questions):
            resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile=args.profile))
            rows.append(
                {
                    "family": family.name,
                    "question": rec["question"],
                    "document": rec.get("document"),
                    "path": resp.telemetry.path_used,
                    "answerable": bool(rec["answers"]),
                    "class": classify(rec, resp, limit),
                    "first_hit": (
                        f"{Path(resp.hits[0].source).name}: {squash(resp.hits[0].text)[:110]}"
                        if resp.hits
                        else None
                    ),
                }
            )
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    for family in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == family]
        print(f"{family}: answerable {dict(Counter(r['class'] for r in mine if r['answerable']))}")
        print(f"  unanswerable {dict(Counter(r['class'] for r in mine if not r['answerable']))}")
    print(f"all answerable: {dict(Counter(r['class'] for r in rows if r['answerable']))}")
    print(f"all unanswerable: {dict(Counter(r['class'] for r in rows if not r['answerable']))}")
    for r in rows:
        if r["class"] not in ("found", "refused") or (r["answerable"] and r["class"] == "refused"):
            print(
                f"- [{r['family']}] {r['class']} via {r['path']}: {r['question']} (answer in {r['document']})"
            )
            print(f"    first hit: {r['first_hit']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
