"""The layering of docs/architecture.md#layers, checked on the source: imports point down only.

Every `from evidence… import …` counts, lazy ones (inside functions, under TYPE_CHECKING)
included: a lazy import postpones the cost, not the coupling.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "evidence"

BOTTOM = frozenset(
    {
        "names",
        "config",
        "errors",
        "records",
        "ids",
        "progress",
        "retry",
        "version",
        "access",
        "fair",
        "aws",
        "lifetime",
        "sqlite_wal",
    }
)
#: What each lower layer may import (besides itself). "model:NAME" allows one name only.
ALLOWED: dict[str, frozenset[str]] = {
    "names": frozenset(),
    "errors": frozenset(),
    "records": frozenset(),
    "ids": frozenset(),
    "progress": frozenset(),
    "version": frozenset(),
    "aws": frozenset(),
    "lifetime": frozenset(),
    "sqlite_wal": frozenset(),
    "config": frozenset({"names", "errors"}),
    "access": frozenset({"names", "errors"}),
    "model": frozenset({"names"}),
    "observability": BOTTOM | {"model"},
    "embed": BOTTOM,
    "search": BOTTOM,
    "retry": frozenset({"errors"}),
    "fair": frozenset({"errors"}),
    "ingest": BOTTOM | {"embed", "rank.followups"},
    "rank": BOTTOM | {"search", "model:Overrides"},
    "plan": BOTTOM | {"model", "ingest.sections", "ingest.entities"},
    "format": BOTTOM | {"model", "rank"},
}
LOWER = frozenset(ALLOWED)
# The profiles with packages of their own sit above the ranking layer and below the service.
for _pkg in ("graph", "verbatim", "coach"):
    ALLOWED[_pkg] = LOWER | {"graph", "verbatim", "coach"}
# coach.service types its runtime's back-reference to the service (TYPE_CHECKING only).
ALLOWED["coach"] = ALLOWED["coach"] | {"service:EvidenceService"}
# The profile plug-ins (evidence.profiles) sit on everything a profile is made of, below the
# service, which calls only their protocol; indexing is the service's writing half.
ALLOWED["profiles"] = LOWER | {"graph", "verbatim", "coach"}
ALLOWED["indexing"] = LOWER | {"graph", "verbatim", "coach"}
ALLOWED["service"] = LOWER | {"graph", "verbatim", "coach", "profiles", "indexing"}
# `evidence eval`'s computation, run by the CLI and by the workbench's evaluate route.
ALLOWED["evaluation"] = ALLOWED["service"] | {"service"}
# The workbench's reads behind its /v1 routes (document text, evaluation) and the page itself.
ALLOWED["workbench"] = ALLOWED["service"] | {"service", "evaluation"}
ALLOWED["api"] = ALLOWED["service"] | {"service", "assess", "workbench"}
# The batch chain's steps (run by the planner, retriever and formatter tasks in api.tasks) call the
# service and report errors as the API does; api.tasks dispatches to them (no module cycle).
ALLOWED["assess"] = ALLOWED["service"] | {"service", "api.errors", "api:runtime"}


def _layer(module: str) -> str:
    return module.split(".", 1)[0]


def _imports(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, target module relative to `evidence`, imported name) for every evidence import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "evidence":
                for alias in node.names:
                    yield node.lineno, alias.name, "*"
            elif node.module.startswith("evidence."):
                for alias in node.names:
                    yield node.lineno, node.module.removeprefix("evidence."), alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("evidence."):
                    yield node.lineno, alias.name.removeprefix("evidence."), "*"


def _permitted(target: str, name: str, allowed: frozenset[str]) -> bool:
    for rule in allowed:
        module, _, only = rule.partition(":")
        if (target == module or target.startswith(module + ".")) and (not only or name == only):
            return True
    return False


def _violations() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        layer = rel.parts[0]
        if layer not in ALLOWED:
            continue  # entry points (cli/, server, demo, …) may import anything
        for line, target, name in _imports(path):
            if _layer(target) == layer:
                continue
            if not _permitted(target, name, ALLOWED[layer]):
                where = f"{path.relative_to(PACKAGE.parent)}:{line}"
                out.append(f"{where}: {layer} imports evidence.{target}.{name}")
    return out


def test_imports_follow_the_documented_layers() -> None:
    assert _violations() == [], "see docs/architecture.md#layers"


@pytest.mark.parametrize(
    ("layer", "target", "name", "ok"),
    [
        ("search", "model", "IndexDocumentRequest", False),  # search/ never sees edge models
        ("rank", "model", "Overrides", True),  # the knob bounds' one source
        ("rank", "model", "RetrieveResponse", False),  # rank/ never builds API models
        ("rank", "format.evidence", "build_evidence", False),  # format depends on rank
        ("format", "rank.followups", "round_of", True),
        ("service", "api.app", "resolve", False),
        ("api", "service", "EvidenceService", True),
        ("api", "cli", "main", False),
    ],
)
def test_the_rules_themselves(layer: str, target: str, name: str, ok: bool) -> None:
    assert _permitted(target, name, ALLOWED[layer]) is ok
