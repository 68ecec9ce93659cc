"""The `coach` profile: the ranking layer's stages over graph nodes, plus graph expansion.

Recall (seed 004's stages A and B) is the ranking layer's own: `HybridRecall` (our fusion, or
OpenSearch's server-side hybrid) restricted to graph nodes, then the top `rerank_k` (40, the
seed's "30-50") go to the reranker when one is configured. The coach engine runs these recall
stages and takes it from there. On `POST /retrieve` with `"profile": "coach"` the same recall
is followed by `GraphExpansion` (the best LOs' prerequisites and assessed content join the
list), MMR, top-k and the guardrail every profile ends with (`rank.guardrail`: a node's
similarity is the cosine of its stored vector with the query's), so a plain retrieve over a graph
index is graph-aware too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from evidence.graph.documents import KG_ROLE, ROLE_CONTENT, ROLE_LO, NodeView
from evidence.graph.expand import content_links, prerequisite_paths
from evidence.graph.store import GraphReader
from evidence.rank.candidate import Candidate, sort_key
from evidence.rank.context import ProfileParams, RankContext, Stage
from evidence.rank.first_stage import HybridRecall
from evidence.rank.guardrail import Guardrail
from evidence.rank.pipeline import Profile
from evidence.rank.stages import MMR, CandidateLimit, Rerank, TopK

COACH_PARAMS = ProfileParams(
    first_stage_k=40,
    rerank_k=40,
    top_k=12,
    rerank_cutoff=0.0,
    followup_max_rounds=0,
    followup_boost=1.0,
    mmr_lambda=0.7,
)
#: Only graph nodes are recalled (an index may hold other documents too).
NODE_FILTER = {KG_ROLE: [ROLE_LO, ROLE_CONTENT]}


@dataclass(frozen=True)
class NodeRecall:
    """`HybridRecall` restricted to graph nodes (`NODE_FILTER`), whatever else the index holds.

    The request's own filters still apply; a request that names `kg_role` itself keeps its
    narrower choice, so the engine's per-intent filters pass through unchanged.
    """

    inner: HybridRecall = field(default_factory=HybridRecall)
    name: str = "first_stage"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        filters = {**NODE_FILTER, **(ctx.filters or {})}
        return self.inner.run(candidates, replace(ctx, filters=filters))


#: Seed 004's configuration defaults: "250ms for re-rank".
RERANK_BUDGET_MS = 250.0


def recall_stages(rerank_budget_ms: float | None = RERANK_BUDGET_MS) -> tuple[Stage, ...]:
    return (NodeRecall(), CandidateLimit(), Rerank(budget_ms=rerank_budget_ms))


class GraphExpansion:
    """The best LOs' prerequisites (depth 1) and assessed content join the candidates.

    A prerequisite scores its path's score (target score x strength x coherence); content
    scores the LO's score times the edge strength. Nodes already in the list keep their own
    candidate; everything is re-sorted by score. Stage scores are on the list's own scale, so
    the added nodes slot in relative to the LO that brought them.
    """

    name = "graph"

    def __init__(self, *, targets: int = 3, depth: int = 1) -> None:
        self.targets = targets
        self.depth = depth

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        reader = GraphReader(ctx.backend, ctx.index)
        views = {c.chunk_id: v for c in candidates if (v := NodeView.from_chunk(c.chunk)) is not None}
        reader.remember(candidates)
        los = [c for c in candidates if c.chunk_id in views and views[c.chunk_id].is_lo][: self.targets]
        if not los:
            return list(candidates)
        present = {views[c.chunk_id].id for c in candidates if c.chunk_id in views}
        out = list(candidates)
        added = 0
        by_graph: dict[str, dict[str, float]] = {}
        scale = max((c.score for c in los), default=1.0) or 1.0
        for c in los:
            v = views[c.chunk_id]
            by_graph.setdefault(v.graph, {})[v.id] = max(c.score / scale, 0.0)
        for graph, targets in by_graph.items():
            extra: dict[str, tuple[NodeView, float, str]] = {}
            for p in prerequisite_paths(
                reader, graph, targets, depth=self.depth, query_vector=ctx.query_vector
            ):
                view = reader.get(graph, p.supporting)
                if view is not None and view.id not in present and view.id not in extra:
                    extra[view.id] = (view, p.score, f"prerequisite of {p.target}")
            hops = {lo: (score, 0) for lo, score in targets.items()}
            for link in content_links(reader, graph, hops, content_depth=1):
                if link.node.id not in present and link.node.id not in extra:
                    extra[link.node.id] = (link.node, link.score, f"assesses {link.for_lo}")
            for view, score, note in extra.values():
                chunk = reader.chunk(graph, view.id)
                if chunk is None:
                    continue
                value = score * scale
                cand = Candidate(chunk=chunk, score=value, first_stage_score=0.0)
                cand = cand.with_score("graph", value, note if ctx.explain else None)
                out.append(cand)
                added += 1
        out.sort(key=sort_key)
        ctx.trace.detail["added"] = added
        return out


def coach_profile() -> Profile:
    return Profile(
        name="coach",
        description="graph nodes: hybrid recall, rerank top 40, prerequisites, content, MMR (seed 004)",
        defaults=COACH_PARAMS,
        stages=(*recall_stages(), GraphExpansion(), MMR(), TopK(), Guardrail()),
    )


def recall_profile(*, rerank: bool, rerank_budget_ms: float = RERANK_BUDGET_MS) -> Profile:
    """The coach engine's stages A and B (without rerank when the deadline cannot afford it);
    the reranker is cut at `rerank_budget_ms` (what is left of the request's time, at most 250 ms)."""
    stages = recall_stages(rerank_budget_ms) if rerank else recall_stages()[:2]
    return replace(coach_profile(), name="coach-recall", stages=stages)
