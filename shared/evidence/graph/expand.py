"""Bounded graph expansion over a `GraphReader`: prerequisite paths and aligned content.

Prerequisites: from each target LO, walk `PREREQUISITE_OF` edges backwards (towards what must be
learnt first) up to `depth` edges, never revisiting a node on the same path, so every path is
acyclic even if an index held a cyclic graph (files with cycles are refused at ingestion). A path
`p_k -> ... -> p_1 -> target` scores

    score = target_score * prod(strength_i) * decay^(k-1) * coherence

where `coherence` is the geometric mean of (1 + cos)/2 over each step's two nodes and over the
query and the path's first node `p_k` (how well the path stays on one topic and on the question).
Without vectors (a lexical-only index) coherence is 1. Each supporting LO keeps its best path.

Content: `ASSESSED_BY` targets of the given LOs, reached in `hops + 1` edges where `hops` is the
LO's distance from a target (0 for a matched LO); only content within `content_depth` edges is
taken. Type and difficulty filters are applied by the backend in the lookup.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evidence.graph.documents import DIFFICULTY, KG_TYPE, NodeView
from evidence.graph.store import GraphReader
from evidence.rank.similarity import cosine

DEFAULT_DECAY = 0.8


@dataclass(frozen=True, slots=True)
class PrereqPath:
    """`nodes[0]` is the supporting LO (learn first), `nodes[-1]` the target it leads to."""

    nodes: tuple[str, ...]
    strengths: tuple[float, ...]
    coherence: float
    score: float

    @property
    def supporting(self) -> str:
        return self.nodes[0]

    @property
    def target(self) -> str:
        return self.nodes[-1]

    @property
    def length(self) -> int:
        return len(self.nodes) - 1


@dataclass(frozen=True, slots=True)
class ContentLink:
    node: NodeView
    for_lo: str
    strength: float
    hops: int
    score: float


def _unit(cos: float | None) -> float:
    return 1.0 if cos is None else min(1.0, max(0.0, (1.0 + cos) / 2.0))


def path_coherence(
    path: Sequence[str], vectors: Mapping[str, np.ndarray], query_vector: np.ndarray | None
) -> float:
    """Geometric mean of (1 + cos)/2 over consecutive nodes and over (query, first node)."""
    factors = [_unit(cosine(vectors.get(a), vectors.get(b))) for a, b in itertools.pairwise(path)]
    if query_vector is not None:
        factors.append(_unit(cosine(query_vector, vectors.get(path[0]))))
    if not factors:
        return 1.0
    if any(f <= 0.0 for f in factors):
        return 0.0
    return float(math.exp(sum(math.log(f) for f in factors) / len(factors)))


def prerequisite_paths(
    reader: GraphReader,
    graph: str,
    targets: Mapping[str, float],
    *,
    depth: int,
    query_vector: np.ndarray | None = None,
    decay: float = DEFAULT_DECAY,
    exclude: frozenset[str] = frozenset(),
) -> list[PrereqPath]:
    """Every acyclic prerequisite path of 1..depth edges into the targets, best first.

    `targets` maps target LO ids (already known to the reader) to their scores. Paths do not pass
    through another target or an `exclude`d id: those are shown in their own right.
    """
    if depth <= 0 or not targets:
        return []
    blocked = set(targets) | set(exclude)
    # Partial paths, each stored from the target backwards: (target, p1, p2, ...).
    frontier: list[tuple[tuple[str, ...], tuple[float, ...]]] = [((t,), ()) for t in targets]
    reader.fetch(graph, targets)
    found: list[tuple[tuple[str, ...], tuple[float, ...]]] = []
    for _ in range(depth):
        wanted: list[str] = []
        for back, _s in frontier:
            view = reader.get(graph, back[-1])
            if view is not None:
                wanted.extend(p for p in view.prereqs if p not in blocked and p not in back)
        nodes = reader.fetch(graph, wanted)
        nxt: list[tuple[tuple[str, ...], tuple[float, ...]]] = []
        for back, strengths in frontier:
            view = reader.get(graph, back[-1])
            if view is None:
                continue
            for pid, strength in view.prereqs.items():
                node = nodes.get(pid)
                if pid in blocked or pid in back or node is None or not node.is_lo:
                    continue
                item = ((*back, pid), (*strengths, strength))
                nxt.append(item)
                found.append(item)
        frontier = nxt
        if not frontier:
            break
    if not found:
        return []
    ids = {i for back, _ in found for i in back}
    views = [v for i in ids if (v := reader.get(graph, i)) is not None]
    vectors = reader.vectors(views) if query_vector is not None or len(views) > 1 else {}
    q = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
    paths: list[PrereqPath] = []
    for back, strengths in found:
        forward = tuple(reversed(back))  # supporting first, target last
        coherence = path_coherence(forward, vectors, q)
        k = len(strengths)
        score = targets[back[0]] * math.prod(strengths) * decay ** (k - 1) * coherence
        paths.append(PrereqPath(forward, tuple(reversed(strengths)), round(coherence, 6), score))
    paths.sort(key=lambda p: (-p.score, p.length, p.nodes))
    return paths


def best_paths(paths: Sequence[PrereqPath]) -> dict[str, PrereqPath]:
    """The best path per supporting LO (paths arrive best first)."""
    out: dict[str, PrereqPath] = {}
    for p in paths:
        out.setdefault(p.supporting, p)
    return out


def content_links(
    reader: GraphReader,
    graph: str,
    los: Mapping[str, tuple[float, int]],
    *,
    content_depth: int,
    types: Sequence[str] | None = None,
    difficulty: Sequence[str] | None = None,
) -> list[ContentLink]:
    """Content ASSESSED_BY the given LOs (id → (score, hops from a target)), best link per item.

    A link's score is the LO's score times the edge strength, times `DEFAULT_DECAY` per extra hop.
    """
    wanted: dict[str, list[tuple[str, float, int, float]]] = {}
    for lo_id, (lo_score, hops) in los.items():
        if hops + 1 > content_depth:
            continue
        view = reader.get(graph, lo_id)
        if view is None:
            continue
        for cid, strength in view.content.items():
            score = lo_score * strength * DEFAULT_DECAY**hops
            wanted.setdefault(cid, []).append((lo_id, strength, hops + 1, score))
    if not wanted:
        return []
    filters: dict[str, Any] = {}
    if types:
        filters[KG_TYPE] = list(types)
    if difficulty:
        filters[DIFFICULTY] = list(difficulty)
    nodes = reader.fetch(graph, wanted, filters=filters or None)
    out: list[ContentLink] = []
    for cid, options in wanted.items():
        node = nodes.get(cid)
        if node is None or node.is_lo:
            continue
        lo_id, strength, hops, score = max(options, key=lambda o: (o[3], -o[2], o[0]))
        out.append(ContentLink(node=node, for_lo=lo_id, strength=strength, hops=hops, score=score))
    out.sort(key=lambda c: (-c.score, c.node.id))
    return out
