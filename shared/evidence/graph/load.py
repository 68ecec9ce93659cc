"""Reading a knowledge-graph file (JSON or YAML) into a validated `KnowledgeGraph`.

Lenient where the format is silent (ids and titles written as numbers are read as text, a
missing title is the id, unknown keys are ignored), strict where it speaks: every problem is
reported with the path of the field (`nodes[3].difficulty`, `edges[7].target`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from evidence.graph.model import (
    DEFAULT_STRENGTH,
    DIFFICULTIES,
    LO_TYPE,
    EdgeType,
    GraphEdge,
    GraphNode,
    GraphValidationError,
    KnowledgeGraph,
    clip,
    quote,
    validate_graph,
)

GRAPH_SUFFIXES = (".json", ".yaml", ".yml")


def is_graph_filename(name: str) -> bool:
    return name.lower().endswith(GRAPH_SUFFIXES)


def _decode(data: bytes, filename: str) -> Any:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GraphValidationError([("graph", f"{clip(filename)}: not UTF-8 text ({exc.reason})")]) from None
    low = filename.lower()
    as_json = low.endswith(".json") or (not low.endswith((".yaml", ".yml")) and text.lstrip()[:1] in "{[")
    if as_json:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise GraphValidationError(
                [
                    (
                        "graph",
                        f"{clip(filename)}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                    )
                ]
            ) from None
    import yaml

    # libyaml's loader when the wheel has it: 10x faster than the pure-Python one on a large graph.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _refuse_aliases(yaml, text, loader, filename)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise GraphValidationError(
            [("graph", f"{clip(filename)}: invalid YAML{where}: {clip(problem)}")]
        ) from None


def _refuse_aliases(yaml: Any, text: str, loader: Any, filename: str) -> None:
    """Refuse anchors (`&a`) and aliases (`*a`) from the event stream, before any node is built.

    A graph never needs them, and nine levels of aliases in 514 bytes expand to 10^9 values
    ("billion laughs"): whatever reads the loaded value walks every one of them."""
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            mark = event.start_mark
            raise GraphValidationError(
                [
                    (
                        "graph",
                        f"{clip(filename)}: YAML anchors and aliases are not accepted (line {mark.line + 1} "
                        f"column {mark.column + 1}); write each value out",
                    )
                ]
            )


def _text(value: Any) -> str | None:
    """Strings as they are; numbers as text (YAML reads `id: 342` as an int)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _node(i: int, raw: Any, problems: list[tuple[str, str]]) -> GraphNode | None:
    where = f"nodes[{i}]"
    if not isinstance(raw, dict):
        problems.append((where, "a node must be an object with id, type, title and text"))
        return None
    ok = True
    values: dict[str, str | None] = {}
    for key in ("id", "type", "text"):
        v = _text(raw.get(key))
        if v is None or not v.strip():
            problems.append((f"{where}.{key}", f"required, a non-empty string (node {quote(raw.get('id'))})"))
            ok = False
        values[key] = v.strip() if v is not None and key != "text" else v
    for key in ("title", "subject", "difficulty"):
        v = raw.get(key)
        if v is None:
            values[key] = None
            continue
        t = _text(v)
        if t is None:
            problems.append((f"{where}.{key}", f"must be a string, got {type(v).__name__}"))
            ok = False
        values[key] = t.strip() if t is not None else None
    difficulty = values["difficulty"]
    if difficulty is not None:
        difficulty = difficulty.lower()
        if difficulty not in DIFFICULTIES:
            problems.append(
                (
                    f"{where}.difficulty",
                    f"{quote(values['difficulty'])} is not one of {', '.join(DIFFICULTIES)}",
                )
            )
            ok = False
    if not ok:
        return None
    node_id = str(values["id"])
    node_type = str(values["type"])
    return GraphNode(
        id=node_id,
        # "lo" and "Lo" are the learning-objective type too; content types are kept as written.
        type=LO_TYPE if node_type.upper() == LO_TYPE else node_type,
        title=values["title"] or node_id,
        text=str(values["text"]),
        subject=values["subject"] or None,
        difficulty=difficulty,
    )


def _edge(i: int, raw: Any, problems: list[tuple[str, str]]) -> GraphEdge | str | None:
    where = f"edges[{i}]"
    if not isinstance(raw, dict):
        problems.append((where, "an edge must be an object with source, target and type"))
        return None
    ends: dict[str, str] = {}
    for key in ("source", "target"):
        v = _text(raw.get(key))
        if v is None or not v.strip():
            problems.append((f"{where}.{key}", "required, a node id"))
        else:
            ends[key] = v.strip()
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind.strip():
        problems.append((f"{where}.type", f"required, one of {', '.join(t.value for t in EdgeType)}"))
        return None
    strength = raw.get("strength", DEFAULT_STRENGTH)
    if strength is None:
        strength = DEFAULT_STRENGTH
    if (
        isinstance(strength, bool)
        or not isinstance(strength, int | float)
        or not math.isfinite(strength)
        or not 0.0 <= strength <= 1.0
    ):
        problems.append((f"{where}.strength", f"must be a number in [0, 1], got {quote(strength)}"))
        return None
    try:
        edge_type = EdgeType(kind.strip().upper())
    except ValueError:
        return kind  # refused by name in validate_graph, with the other problems
    if len(ends) < 2:
        return None
    return GraphEdge(ends["source"], ends["target"], edge_type, float(strength))


def graph_from_obj(obj: Any, *, filename: str = "graph") -> KnowledgeGraph:
    """A decoded JSON/YAML document → a validated graph (GraphValidationError otherwise)."""
    if not isinstance(obj, dict):
        raise GraphValidationError(
            [("graph", f"{clip(filename)}: expected an object with 'nodes' and 'edges'")]
        )
    raw_nodes = obj.get("nodes")
    raw_edges = obj.get("edges", [])
    problems: list[tuple[str, str]] = []
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise GraphValidationError([("nodes", "required, a non-empty list of nodes")])
    if raw_edges is None:
        raw_edges = []
    if not isinstance(raw_edges, list):
        raise GraphValidationError([("edges", "must be a list of edges")])
    nodes = [n for i, raw in enumerate(raw_nodes) if (n := _node(i, raw, problems)) is not None]
    edges = [(i, e) for i, raw in enumerate(raw_edges) if (e := _edge(i, raw, problems)) is not None]
    if problems:
        # Graph-level checks on a partial node list would report ends of the refused nodes as
        # dangling: the field problems come first.
        unknown = [
            (f"edges[{i}].type", f"unknown edge type {quote(e)}") for i, e in edges if isinstance(e, str)
        ]
        raise GraphValidationError(problems + unknown)
    return validate_graph(nodes, edges)


def parse_graph(data: bytes, *, filename: str = "graph.json") -> KnowledgeGraph:
    """Bytes of a `.json`, `.yaml` or `.yml` graph file (sniffed when the name says neither)."""
    return graph_from_obj(_decode(data, filename), filename=filename)
