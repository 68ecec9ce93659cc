"""The knowledge graph of the coach profile (seed 004): nodes, edges, and what makes a file valid.

A node is a learning objective (`type: LO`) or a piece of content (`Example`, `Exercise`, ...:
any other type). `A PREREQUISITE_OF B`: learn A before B. `A ASSESSED_BY C`: content C teaches or
tests LO A. A graph is refused, naming the problem, when its `PREREQUISITE_OF` edges form a
cycle, an edge end is not a node, a node id repeats or an edge type is unknown; nothing of a
refused graph is indexed (the checks run before any write).
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from evidence.errors import RequestValidationError

LO_TYPE = "LO"
DIFFICULTIES = ("intro", "core", "advanced")
DEFAULT_STRENGTH = 1.0


#: At most this many characters of any value from a file go into a message: a 508-byte YAML file
#: can expand to a value whose repr() is 72 MB.
QUOTE_CHARS = 200
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = QUOTE_CHARS
_REPR.maxlevel = 3


def quote(value: object) -> str:
    """`repr(value)` bounded in size and in cost (reprlib stops at a depth and a length)."""
    return clip(_REPR.repr(value))


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class EdgeType(StrEnum):
    PREREQUISITE_OF = "PREREQUISITE_OF"
    ASSESSED_BY = "ASSESSED_BY"


class GraphValidationError(RequestValidationError):
    """A graph file that cannot be indexed; `problems` lists every problem found, in file order."""

    code = "invalid_graph"

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        # (field path, message) pairs; the first names the field of the envelope.
        shown = "; ".join(
            f"{clip(where)}: {clip(msg, 4 * QUOTE_CHARS)}" if where else clip(msg, 4 * QUOTE_CHARS)
            for where, msg in problems[:5]
        )
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"graph refused, nothing indexed: {shown}{more}", field=problems[0][0] or "graph")
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class GraphNode:
    id: str
    type: str
    title: str
    text: str
    subject: str | None = None
    difficulty: str | None = None

    @property
    def is_lo(self) -> bool:
        return self.type == LO_TYPE


@dataclass(frozen=True, slots=True)
class GraphEdge:
    source: str
    target: str
    type: EdgeType
    strength: float = DEFAULT_STRENGTH


@dataclass(frozen=True)
class KnowledgeGraph:
    """A validated graph: unique ids, known edge types, no dangling ends, acyclic prerequisites.

    `warnings` are oddities that are accepted (a repeated edge, an `ASSESSED_BY` edge that does
    not go from an LO to content): the ingestion report shows them.
    """

    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    warnings: tuple[str, ...] = ()
    _by_id: dict[str, GraphNode] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_id.update((n.id, n) for n in self.nodes)

    def node(self, node_id: str) -> GraphNode:
        return self._by_id[node_id]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id

    @property
    def los(self) -> list[GraphNode]:
        return [n for n in self.nodes if n.is_lo]

    @property
    def content(self) -> list[GraphNode]:
        return [n for n in self.nodes if not n.is_lo]

    def edges_of(self, edge_type: EdgeType) -> list[GraphEdge]:
        return [e for e in self.edges if e.type is edge_type]


def find_cycle(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[str] | None:
    """A directed cycle as a closed walk `[a, b, ..., a]`, or None. Iterative DFS: deep chains
    cannot overflow the stack; nodes are visited in the given order, so the answer is deterministic."""
    succ: dict[str, list[str]] = {}
    order: list[str] = []
    for n in nodes:
        if n not in succ:
            succ[n] = []
            order.append(n)
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(succ, white)
    for root in order + [n for n in succ if n not in set(order)]:
        if color[root] != white:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        color[root] = grey
        while stack:
            node, i = stack[-1]
            nexts = succ[node]
            if i < len(nexts):
                stack[-1] = (node, i + 1)
                nxt = nexts[i]
                if color[nxt] == grey:
                    return [*path[path.index(nxt) :], nxt]
                if color[nxt] == white:
                    color[nxt] = grey
                    stack.append((nxt, 0))
                    path.append(nxt)
            else:
                color[node] = black
                stack.pop()
                path.pop()
    return None


def validate_graph(
    nodes: Sequence[GraphNode], edges: Sequence[tuple[int, GraphEdge | str]]
) -> KnowledgeGraph:
    """Check the rules of the file format; raise `GraphValidationError` listing every problem.

    `edges` are (position in the file, edge) pairs; an edge whose type is unknown arrives as the
    raw type string so that it can be refused by name together with the other problems.
    """
    problems: list[tuple[str, str]] = []
    first_seen: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.id in first_seen:
            problems.append(
                (f"nodes[{i}].id", f"duplicate node id {quote(n.id)} (first at nodes[{first_seen[n.id]}])")
            )
        else:
            first_seen[n.id] = i
    kinds = {n.id: n for n in nodes}
    valid = ", ".join(t.value for t in EdgeType)
    good: list[GraphEdge] = []
    warnings: list[str] = []
    seen_edges: dict[tuple[str, str, EdgeType], int] = {}
    for pos, edge in edges:
        if isinstance(edge, str):
            problems.append((f"edges[{pos}].type", f"unknown edge type {quote(edge)}; valid: {valid}"))
            continue
        dangling = False
        for end in ("source", "target"):
            node_id = getattr(edge, end)
            if node_id not in kinds:
                problems.append((f"edges[{pos}].{end}", f"{end} {quote(node_id)} is not a node of the graph"))
                dangling = True
        if dangling:
            continue
        key = (edge.source, edge.target, edge.type)
        if key in seen_edges:
            warnings.append(
                f"edges[{pos}]: repeats edges[{seen_edges[key]}] "
                f"({clip(edge.source)} {edge.type} {clip(edge.target)}); "
                "the stronger one is kept"
            )
            earlier = next(i for i, e in enumerate(good) if (e.source, e.target, e.type) == key)
            if edge.strength > good[earlier].strength:
                good[earlier] = edge
            continue
        seen_edges[key] = pos
        if edge.type is EdgeType.ASSESSED_BY and (not kinds[edge.source].is_lo or kinds[edge.target].is_lo):
            warnings.append(
                f"edges[{pos}]: ASSESSED_BY should go from an LO to content "
                f"({clip(edge.source)} is {clip(kinds[edge.source].type)}, "
                f"{clip(edge.target)} is {clip(kinds[edge.target].type)})"
            )
        good.append(edge)
    prereq = [(e.source, e.target) for e in good if e.type is EdgeType.PREREQUISITE_OF]
    cycle = find_cycle([n.id for n in nodes], prereq)
    if cycle is not None:
        shown = [clip(c, 40) for c in cycle[:8]]
        if len(cycle) > 8:
            shown += [f"\u2026 ({len(cycle) - 1} edges in all)", clip(cycle[-1], 40)]
        problems.append(("edges", "PREREQUISITE_OF cycle: " + " -> ".join(shown)))
    if problems:
        raise GraphValidationError(problems)
    return KnowledgeGraph(nodes=tuple(nodes), edges=tuple(good), warnings=tuple(warnings))


def adjacency(graph: KnowledgeGraph) -> dict[str, dict[str, dict[str, float]]]:
    """Per node: `prereqs` (its PREREQUISITE_OF sources), `unlocks` (targets), `content` (its
    ASSESSED_BY targets) and `assesses` (ASSESSED_BY sources), each id → strength, in file order."""
    out: dict[str, dict[str, dict[str, float]]] = {
        n.id: {"prereqs": {}, "unlocks": {}, "content": {}, "assesses": {}} for n in graph.nodes
    }
    for e in graph.edges:
        if e.type is EdgeType.PREREQUISITE_OF:
            out[e.target]["prereqs"][e.source] = e.strength
            out[e.source]["unlocks"][e.target] = e.strength
        else:
            out[e.source]["content"][e.target] = e.strength
            out[e.target]["assesses"][e.source] = e.strength
    return out
