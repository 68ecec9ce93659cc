"""`evidence coach QUERY --index NAME [--subject S] [--intent I] [--request FILE] [--json]`.

Seed 004's coach request over a knowledge-graph index (docs/coach.md): `--request` reads the whole
request as the seed's JSON, and the options given on the line win over it. `--json` prints the
response of `POST /v1/indexes/{index}/coach` as one line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.cli import common
from evidence.cli.common import EXIT_OK, CliError, Command, shown_path
from evidence.cli.output import print_coach

if TYPE_CHECKING:
    from evidence.coach.contract import CoachRequest

INTENTS = ("tutoring", "practice", "definition", "comparison", "troubleshooting")


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def request_from_args(args: argparse.Namespace) -> CoachRequest:
    from pydantic import ValidationError

    from evidence.coach.contract import CoachRequest

    fields: dict[str, Any] = {}
    if args.request is not None:
        fields.update(_request_file(args.request))
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
        raise common.request_error(exc) from None


def _request_file(path: Path) -> dict[str, Any]:
    where = f"--request {shown_path(path)}"
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"{where}: not JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise CliError(f"{where}: expected a JSON object (seed 004's request)")
    return loaded


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    with common.quiet_service(args) as service:
        response = service.coach(args.index, request)
    if args.json:
        print(response.model_dump_json())
    else:
        print_coach(response)
    return EXIT_OK


COMMAND = Command(
    "coach", "the coach's minimal cited context for a student's message (seed 004)", add_arguments, run
)
