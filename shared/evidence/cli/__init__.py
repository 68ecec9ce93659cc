"""`evidence …`: the command line. Exit codes: 0 ok, 1 failed, 2 bad usage or bad input.

Every subcommand is a module of this package exporting a `Command` (its arguments and its
runner), registered below in the order `evidence --help` lists them. The CLI and the tools it
runs (server, invoke, demo, evaluation, migrate, progress) are developer tools: no Lambda
handler imports them, and the Lambda layer leaves them out (infra/bundle.py DEV_MODULES).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from evidence.cli import (
    assess,
    coach,
    delete,
    demo,
    evaluate,
    index,
    invoke,
    listing,
    migrate,
    plan,
    query,
    serve,
)
from evidence.cli.common import EXIT_FAILED, EXIT_USAGE, CliError, Command, store_option
from evidence.errors import ConfigurationError, EvidenceError, NotFoundError
from evidence.version import package_version

COMMANDS: tuple[Command, ...] = (
    index.COMMAND,
    query.COMMAND,
    listing.COMMAND,
    delete.COMMAND,
    evaluate.COMMAND,
    demo.COMMAND,
    serve.COMMAND,
    invoke.COMMAND,
    assess.COMMAND,
    plan.COMMAND,
    coach.COMMAND,
    migrate.COMMAND,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evidence", description="Evidence retrieval for assessment workflows."
    )
    parser.add_argument("--version", action="version", version=f"evidence {package_version()}")
    store = store_option()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(
            command.name,
            parents=[store],
            help=command.help,
            description=command.description,
        )
        command.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = next(c.run for c in COMMANDS if c.name == args.command)
    try:
        return run(args)
    except CliError as exc:
        print(f"evidence {args.command}: error: {exc}", file=sys.stderr)
        return exc.code
    except NotFoundError as exc:
        print(f"evidence {args.command}: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except ConfigurationError as exc:
        # A setting that cannot work (an OpenSearch backend without an endpoint, a broken access
        # policy), found when the part that reads it is built: bad input, as a misspelt variable
        # is (docs/contracts.md#cli-conventions), though it maps to a 500 inside the API.
        print(f"evidence {args.command}: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except EvidenceError as exc:
        print(f"evidence {args.command}: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if 400 <= exc.status < 500 else EXIT_FAILED
    except KeyboardInterrupt:
        print(f"evidence {args.command}: interrupted", file=sys.stderr)
        return 130
