"""`evidence plan TEXT [--profile P] [--index NAME] [--json]`: the plan a request would run with.

The same payload as `POST /v1/plan` and the planner function. With the verbatim profile (the
default here) the plan is seed 002's (`entity`, `query_mode`, `attribute`, `candidate_sections`,
`search_phrases`, `extraction_level`), from the rules or — `EVIDENCE_PLANNER=bedrock` — the LLM
planner; `--index` lets the rules recognise the entities that index holds.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def add_plan_parser(
    subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "plan", parents=list(parents), help="show the retrieval plan of a question (POST /v1/plan)"
    )
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--profile", default="verbatim")
    p.add_argument("--criterion", metavar="Q", help="the criterion question (vrm)")
    p.add_argument("--index", metavar="NAME", help="recognise the entities this index holds (verbatim)")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    return p


def run_plan(args: argparse.Namespace) -> int:
    from evidence.config import Settings
    from evidence.model import PlanRequest
    from evidence.service import EvidenceService

    store = getattr(args, "store", None)
    service = EvidenceService(Settings(store_dir=Path(store)) if store else Settings())
    request = PlanRequest(query=args.text, criterion_question=args.criterion, profile=args.profile)
    if args.index:
        service.backend.get_index(args.index)
    plan, degraded = service.plan_with_markers(request, index=args.index)
    if args.json:
        print(json.dumps(plan.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False))
        return 0
    note = f" (degraded: {', '.join(degraded)})" if degraded else ""
    print(f"planner: {plan.planner}{note}")
    print(f"entity: {plan.entity}  mode: {plan.query_mode}  attribute: {plan.attribute}")
    print(f"sections: {', '.join(plan.candidate_sections) or '-'}  level: {plan.extraction_level}")
    print("phrases: " + " | ".join(plan.search_phrases))
    return 0
