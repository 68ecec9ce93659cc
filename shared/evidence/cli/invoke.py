"""`evidence invoke FUNCTION EVENT.json`: run a Lambda handler locally on an event file.

stdout holds exactly the handler's return value as JSON (or, as the Lambda runtime would
report it, `{errorType, errorMessage}` with exit code 1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evidence.cli.common import EXIT_FAILED, EXIT_OK, CliError, Command, settings_from_args, shown_path
from evidence.invoke import FUNCTIONS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("function", choices=FUNCTIONS, help="which handler")
    p.add_argument("event", type=Path, metavar="EVENT.json", help="event JSON file (see events/)")


def run(args: argparse.Namespace) -> int:
    from evidence.api import runtime
    from evidence.invoke import invoke

    try:
        event = json.loads(args.event.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{shown_path(args.event)}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"{shown_path(args.event)}: not JSON: {exc}") from None
    runtime.configure(settings=settings_from_args(args))
    try:
        response = invoke(args.function, event)
    except Exception as exc:
        # A Lambda error: what the runtime would report as errorType/errorMessage.
        print(json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}))
        return EXIT_FAILED
    finally:
        runtime.close()
    print(json.dumps(response, ensure_ascii=False, default=str))
    return EXIT_OK


COMMAND = Command(
    "invoke",
    "run a Lambda handler locally on an event file",
    add_arguments,
    run,
    description="Runs functions/<FUNCTION>/handler.py on EVENT.json and prints the response as JSON.",
)
