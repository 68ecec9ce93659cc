"""The import graph of `evidence`, the Lambda `functions` and `infra`, read from the source with
`ast`: no cycles, and nothing a Lambda handler runs reaches a developer tool.

Every import counts, including those inside functions (a lazy import postpones the cost, not
the coupling: a cycle through one is still a cycle, and moving it to the top of the module would
break), except those under `if TYPE_CHECKING:` (never executed). Only the three trees' own modules
are nodes; imports of third-party packages are ignored. `python -m tests.unit.test_import_graph`
prints the cycles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from infra.bundle import DEV_MODULES

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "shared"
#: (folder holding the top-level package, its name): `evidence` lives under shared/ (the Lambda
#: layer), `functions` and `infra` at the repository root, as the handlers and the CDK app import them.
TREES = ((SHARED, "evidence"), (REPO, "functions"), (REPO, "infra"))

#: What the Lambda functions run (functions/*/handler.py import these, at import or first call).
HANDLER_ROOTS = (
    "evidence.observability",
    "evidence.api.app",
    "evidence.api.indexer",
    "evidence.api.runtime",
    "evidence.api.tasks",
    "evidence.assess",
    "evidence.service",
)
#: Developer tools: importable by the CLI, never by handler code (the layer leaves them out).
DEV_TOOLS = tuple(f"evidence.{name}" for name in sorted(DEV_MODULES))


def modules(trees: tuple[tuple[Path, str], ...] = TREES) -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package), over every tree"""
    out: dict[str, tuple[Path, bool]] = {}
    for root, package in trees:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if any(p.startswith(".") or p in {"node_modules", "cdk.out"} for p in parts):
                continue
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _imports_in(other)
            continue
        yield from _imports_in(child)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def graph(*, with_parents: bool = False) -> dict[str, set[str]]:
    """module -> the modules of `TREES` it imports. `with_parents`: importing `a.b.c` also runs
    `a/__init__` and `a/b/__init__` (for what gets loaded; not for cycles, which would then
    include every package importing its own submodules)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, is_package) in mods.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets = _targets(node, name, is_package)
            if isinstance(node, ast.ImportFrom):
                # `from a import b`: the submodule a.b when there is one, else the module a.
                targets = [t for t in targets[:-1] if t in mods] or targets[-1:]
            for raw in targets:
                target = raw
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if not target:
                    continue
                found = {target}
                if with_parents:
                    parts = target.split(".")
                    found |= {".".join(parts[:i]) for i in range(1, len(parts))} & set(mods)
                edges[name] |= found - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def reachable(edges: dict[str, set[str]], roots: tuple[str, ...]) -> dict[str, str]:
    """module -> the module that first imports it, for everything reachable from `roots`."""
    via: dict[str, str] = dict.fromkeys(roots, "")
    todo = list(roots)
    while todo:
        node = todo.pop()
        for child in sorted(edges[node]):
            if child not in via:
                via[child] = node
                todo.append(child)
    return via


def _chain(via: dict[str, str], module: str) -> str:
    path = [module]
    while via.get(path[-1]):
        path.append(via[path[-1]])
    return " <- ".join(path)


def test_the_graph_sees_lazy_imports_and_skips_type_checking_ones() -> None:
    edges = graph()
    assert "evidence.demo" in edges["evidence.cli.demo"]  # imported inside run_demo
    assert "evidence.migrate" not in edges["evidence.cli.output"]  # under TYPE_CHECKING only
    assert edges["evidence.cli"] >= {"evidence.cli.index", "evidence.cli.common"}  # from a package import
    assert "evidence.cli" not in edges["evidence.cli.index"]
    assert "evidence.cli" in graph(with_parents=True)["evidence.cli.demo"]


def test_the_graph_covers_the_handlers_and_infra() -> None:
    edges = graph()
    assert "evidence.observability" in edges["functions.retriever.handler"]  # across trees
    assert "evidence.api.app" in edges["functions.retriever.handler"]  # lazy, inside _handle
    assert "infra.evidence_infra.stack" in edges["infra.app"]
    assert "infra.evidence_infra.settings" in edges["infra.evidence_infra.api"]  # `from .settings import`
    assert "infra.bundle" in edges["infra.evidence_infra.assets"]  # `from infra import bundle`


def test_no_import_cycles() -> None:
    assert [" <-> ".join(sorted(c)) for c in cycles(graph())] == []


def test_handler_code_never_reaches_a_developer_tool() -> None:
    via = reachable(graph(with_parents=True), HANDLER_ROOTS)
    bad = [m for m in via if any(m == d or m.startswith(d + ".") for d in DEV_TOOLS)]
    assert [_chain(via, m) for m in sorted(bad)] == []


def test_a_cycle_and_a_leak_would_be_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [frozenset({"a", "b", "c"})]
    assert _chain(reachable(edges, ("d",)), "c") == "c <- b <- a <- d"


if __name__ == "__main__":
    for component in cycles(graph()):
        print(" <-> ".join(sorted(component)))
