"""`evidence invoke FUNCTION EVENT.json`: run a Lambda handler locally on an event file.

The handler's own output (Powertools JSON logs, EMF metrics) goes to stderr so that
stdout holds exactly the handler's return value as JSON.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
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
