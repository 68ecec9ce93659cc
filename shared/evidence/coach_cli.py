"""`evidence coach QUERY --index NAME [--subject S] [--intent I] [--request FILE] [--json]`.

Seed 004's coach request over a knowledge-graph index (docs/coach.md): `--request` reads the whole
request as the seed's JSON, and the options given on the line win over it. `--json` prints the
response of `POST /v1/indexes/{index}/coach` as one line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evidence.coach.contract import CoachRequest, CoachResponse

INTENTS = ("tutoring", "practice", "definition", "comparison", "troubleshooting")


def add_coach_parser(
    subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "coach",
        parents=list(parents),
        help="the coach's minimal cited context for a student's message (seed 004)",
    )
    p.add_argument("text", metavar="QUERY", nargs="?", help="the student's message (or `query` in --request)")
    p.add_argument("--index", required=True, metavar="NAME")
    p.add_argument("--subject", metavar="S")
    p.add_argument("--intent", choices=INTENTS)
    p.add_argument(
        "--request",
        type=Path,
        metavar="FILE",
        help="the whole request as seed 004's JSON; the options above win",
    )
    p.add_argument("--json", action="store_true", help="print the response as one JSON line")
    return p


def request_from_args(args: argparse.Namespace) -> CoachRequest:
    from pydantic import ValidationError

    from evidence.cli import CliError
    from evidence.coach.contract import CoachRequest

    fields: dict[str, Any] = {}
    if args.request is not None:
        try:
            loaded = json.loads(args.request.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CliError(f"--request {args.request}: cannot read: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CliError(f"--request {args.request}: not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise CliError(f"--request {args.request}: expected a JSON object (seed 004's request)")
        fields.update(loaded)
    if args.text is not None:
        fields["query"] = args.text
    if args.subject is not None:
        fields["subject"] = args.subject
    if args.intent is not None:
        fields["intent"] = args.intent
    if not str(fields.get("query", "")).strip():
        raise CliError("the query is empty; give the student's message (QUERY or `query` in --request)")
    try:
        return CoachRequest.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CliError(f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def print_coach(r: CoachResponse) -> None:
    verdict = "answer" if r.can_answer else "clarify" if r.needs_clarification else "out of scope"
    print(f"{verdict} (confidence {r.confidence:.2f}, intent {r.intent.value})")
    if r.clarification_question:
        print(f"  ask: {r.clarification_question}")
    for m in r.matched_los:
        print(f"  LO       {m.id:<12} {m.score:.2f}  {m.title}  [{m.reason}]")
    for s in r.supporting_los:
        print(f"  prereq   {s.id:<12} {s.score:.2f}  {s.title}  [{' -> '.join(s.path)}]")
    for c in r.content_items:
        print(f"  {c.type:<8} {c.id:<12} {c.score:.2f}  {c.title}  [for {c.for_lo}, {c.difficulty}]")
    for bullet, source in zip(r.minimal_context, r.minimal_context_sources, strict=True):
        print(f"  - {bullet}  ({source})")
    stages = ", ".join(f"{k} {v:.0f}" for k, v in r.telemetry.stages.items())
    degraded = f"; degraded: {', '.join(r.telemetry.degraded)}" if r.telemetry.degraded else ""
    print(f"  {r.telemetry.tokens} tokens, {r.telemetry.total_ms:.0f} ms ({stages}){degraded}")


def run_coach(args: argparse.Namespace) -> int:
    from evidence.cli import _service

    request = request_from_args(args)
    service = _service(args)
    # stdout carries only the answer; anything logged on the way goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        response = service.coach(args.index, request)
    if args.json:
        print(response.model_dump_json())
    else:
        print_coach(response)
    return 0
