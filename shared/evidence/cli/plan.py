"""`evidence plan TEXT [--profile P] [--index NAME] [--json]`: the plan a request would run with.

The same payload as `POST /v1/plan` and the planner function. With the verbatim profile (the
default here) the plan is seed 002's (`entity`, `query_mode`, `attribute`, `candidate_sections`,
`search_phrases`, `extraction_level`), from the rules or — `EVIDENCE_PLANNER=bedrock` — the LLM
planner; `--index` lets the rules recognise the entities that index holds.
"""

from __future__ import annotations

import argparse

from evidence.cli import common
from evidence.cli.common import EXIT_OK, Command
from evidence.cli.output import print_plan


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--profile", default="verbatim", metavar="P", help="ranking profile (default: verbatim)")
    p.add_argument("--criterion", metavar="Q", help="the criterion question (vrm)")
    p.add_argument("--index", metavar="NAME", help="recognise the entities this index holds (verbatim)")
    p.add_argument("--json", action="store_true", help="print one JSON line")


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from evidence.model import PlanRequest

    try:
        request = PlanRequest(query=args.text, criterion_question=args.criterion, profile=args.profile)
    except ValidationError as exc:
        raise common.request_error(exc) from None
    service = common.service_from_args(args)
    try:
        if args.index:
            service.backend.get_index(args.index)
        plan, degraded = service.plan_with_markers(request, index=args.index)
    finally:
        service.close()
    print_plan(plan, degraded, as_json=args.json)
    return EXIT_OK


COMMAND = Command("plan", "show the retrieval plan of a question (POST /v1/plan)", add_arguments, run)
