"""`evidence invoke FUNCTION EVENT.json`: run a Lambda handler locally on an event file.

The handler's own output (Powertools JSON logs, EMF metrics) goes to stderr so that
stdout holds exactly the handler's return value as JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

FUNCTIONS = ("indexer", "retriever", "planner", "formatter")


def repo_root(start: Path | None = None) -> Path:
    """The folder holding functions/: the working directory or an ancestor, else the package's."""
    for origin in (start or Path.cwd(), Path(__file__).resolve()):
        for folder in (origin, *origin.parents):
            if (folder / "functions" / "retriever" / "handler.py").is_file():
                return folder
    raise FileNotFoundError("functions/ not found; run from the repository")


def load_handler(function: str) -> Callable[[Any, Any], Any]:
    if function not in FUNCTIONS:
        raise ValueError(f"unknown function {function!r}; choose one of {', '.join(FUNCTIONS)}")
    root = str(repo_root())
    if root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module(f"functions.{function}.handler")
    handler: Callable[[Any, Any], Any] = module.handler
    return handler


def invoke(function: str, event: dict[str, Any] | list[Any], context: Any = None) -> Any:
    from evidence.testing import lambda_context

    handler = load_handler(function)
    with redirect_stdout(sys.stderr):
        return handler(event, context or lambda_context(f"evidence-{function}"))


def add_invoke_parser(
    subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "invoke",
        parents=list(parents),
        help="run a Lambda handler locally on an event file",
        description="Runs functions/<FUNCTION>/handler.py on EVENT.json and prints the response as JSON.",
    )
    parser.add_argument("function", choices=FUNCTIONS, help="which handler")
    parser.add_argument("event", type=Path, help="event JSON file (see events/)")
    parser.set_defaults(func=run_invoke)
    return parser


def run_invoke(args: argparse.Namespace) -> int:
    from evidence.api import runtime
    from evidence.config import Settings

    try:
        event = json.loads(args.event.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"evidence invoke: cannot read {args.event}: {exc}", file=sys.stderr)
        return 2
    store = getattr(args, "store", None)
    if store is not None:
        runtime.configure(settings=Settings(store_dir=store))
    try:
        response = invoke(args.function, event)
    except Exception as exc:
        # A Lambda error: what the runtime would report as errorType/errorMessage.
        print(json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}))
        return 1
    finally:
        runtime.close()
    print(json.dumps(response, ensure_ascii=False, default=str))
    return 0
