"""`evidence query TEXT --index NAME`: retrieve evidence for a question."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from evidence.cli import common
from evidence.cli.common import EXIT_OK, CliError, Command, key_values
from evidence.cli.output import print_response

if TYPE_CHECKING:
    from evidence.model import RetrieveRequest


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--index", required=True, metavar="NAME")
    p.add_argument("--profile", default="default", metavar="P", help="ranking profile (default: default)")
    p.add_argument("--criterion", metavar="Q", help="the criterion question (follow-ups are linked to it)")
    p.add_argument(
        "--top-k", type=int, dest="top_k", metavar="N", help="how many hits (default: the profile's)"
    )
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        dest="filters",
        metavar="KEY=VALUE",
        help="only chunks whose metadata KEY is VALUE (repeatable; the same KEY twice = any of)",
    )
    p.add_argument("--format", choices=("text", "json", "xml"), default="text")
    p.add_argument("--explain", action="store_true")


def filters_from_args(pairs: list[str]) -> dict[str, str | list[str]]:
    """`--filter k=v` pairs as the API's `filters`: a key given once is a term, twice or more a list."""
    grouped: dict[str, list[str]] = {}
    for key, value in key_values(pairs, "--filter"):
        grouped.setdefault(key, []).append(value)
    return {k: v[0] if len(v) == 1 else v for k, v in grouped.items()}


def request_from_args(args: argparse.Namespace) -> RetrieveRequest:
    from pydantic import ValidationError

    from evidence.model import RetrieveRequest

    if not args.text.strip():
        raise CliError("the query is empty; give the question to retrieve evidence for")
    fields: dict[str, Any] = {"query": args.text, "profile": args.profile, "explain": args.explain}
    if args.criterion:
        fields["criterion_question"] = args.criterion
    if args.top_k is not None:
        fields["top_k"] = args.top_k
    if args.filters:
        fields["filters"] = filters_from_args(args.filters)
    try:
        return RetrieveRequest(**fields)
    except ValidationError as exc:
        raise common.request_error(exc) from None


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    with common.quiet_service(args) as service:
        resp = service.retrieve(args.index, request)
    print_response(resp, args.format)
    return EXIT_OK


COMMAND = Command("query", "retrieve evidence for a question", add_arguments, run)
