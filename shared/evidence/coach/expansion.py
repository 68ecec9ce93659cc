"""Expansion: the matched LOs' prerequisite paths and linked content, and the sources the
bullets are drawn from.
"""

from __future__ import annotations

from evidence.coach import compress as cmp
from evidence.coach.common import (
    SLOTS,
    _is_pitfall,
    _Run,
    _Scored,
    content_family,
)
from evidence.coach.contract import (
    MAX_CONTENT_ITEMS,
    Intent,
)
from evidence.coach.retrieval import Retrieval
from evidence.graph.documents import NodeView
from evidence.graph.expand import ContentLink, PrereqPath, content_links, prerequisite_paths


class Expansion(Retrieval):
    """From the matched LOs to prerequisites, linked content and the bullet sources."""

    def _matched(self, run: _Run) -> list[_Scored]:
        if not run.los:
            return []
        cap = min(self.settings.max_matched, run.request.constraints.top_k.lo)
        broad = run.intent.intent in (Intent.PRACTICE, Intent.TROUBLESHOOTING)
        ratio = self.settings.broad_keep_ratio if broad else self.settings.keep_ratio
        top = run.los[0].rel
        out = [run.los[0]]
        for s in sorted(run.los[1:], key=lambda s: -s.rel):
            if len(out) >= cap:
                break
            if s.rel >= max(ratio * top, self.settings.min_relevance):
                out.append(s)
        return out

    @staticmethod
    def _closest(run: _Run) -> list[_Scored]:
        out = run.los[: min(3, run.request.constraints.top_k.lo)]
        for s in out:
            s.reason = "closest in-scope LO"
        return out

    @staticmethod
    def _prereq_depth(run: _Run) -> int:
        constraints = run.request.constraints
        explicit = "graph_depth" in constraints.model_fields_set
        # Seed 004: practice skips prerequisite expansion, and a follow-up ("that last step")
        # wants what is adjacent to the nodes just discussed, not their prerequisites, unless asked.
        if not explicit and (run.intent.intent is Intent.PRACTICE or run.followup):
            return 0
        return constraints.graph_depth.prereq

    def _expand(
        self, run: _Run, matched: list[_Scored]
    ) -> tuple[list[tuple[NodeView, PrereqPath]], list[ContentLink]]:
        c = run.request.constraints
        depth = self._prereq_depth(run)
        graph = matched[0].view.graph
        targets = {s.view.id: s.rel for s in matched if s.view.graph == graph}
        room = max(0, c.top_k.lo - len(matched))
        supporting: list[tuple[NodeView, PrereqPath]] = []
        if depth > 0 and room > 0:
            paths = prerequisite_paths(run.reader, graph, targets, depth=depth, query_vector=run.vector)
            # One prerequisite per level of depth, whole paths only: a chain keeps its middle.
            limit = min(room, depth)
            chosen: dict[str, PrereqPath] = {}
            for p in paths:
                new = [n for n in p.nodes[:-1] if n not in chosen]
                if not new or len(chosen) + len(new) > limit:
                    continue
                for i, node_id in enumerate(p.nodes[:-1]):
                    # Each node is shown with the part of the path that starts at it.
                    chosen.setdefault(node_id, PrereqPath(p.nodes[i:], p.strengths[i:], p.coherence, p.score))
                if len(chosen) >= limit:
                    break
            for node_id, p in chosen.items():
                view = run.reader.get(graph, node_id)
                if view is not None:
                    supporting.append((view, p))
        if c.top_k.content == 0:
            return supporting, []
        lo_hops = {s.view.id: (s.rel, 0) for s in matched if s.view.graph == graph}
        for view, p in supporting:
            lo_hops.setdefault(view.id, (p.score, p.length))
        links = content_links(
            run.reader,
            graph,
            lo_hops,
            content_depth=c.graph_depth.content,
            types=c.content_types,
            difficulty=c.difficulties(),
        )
        return supporting, [x for x in links if not self._blocked(run, x.node)]

    def _select_content(
        self,
        run: _Run,
        links: list[ContentLink],
        matched: list[_Scored],
        supporting: list[tuple[NodeView, PrereqPath]],
    ) -> list[tuple[NodeView, str, float]]:
        c = run.request.constraints
        k = min(MAX_CONTENT_ITEMS, c.top_k.content)
        if k == 0 or not matched:
            return []
        cited = {s.view.id for s in matched} | {v.id for v, _ in supporting}
        types = set(c.content_types or [])
        diffs = set(c.difficulties() or [])

        def allowed(v: NodeView) -> bool:
            if v.is_lo or self.settings.guard.blocks_type(v.type):
                return False
            return (not types or v.type in types) and (not diffs or v.difficulty in diffs)

        # A follow-up starts from the content the conversation cites ("that last step" of EX-342).
        chosen: list[tuple[NodeView, str, float]] = []
        for view in run.prior.values():
            owner = next((lo for lo in view.assesses if lo in cited), next(iter(view.assesses), ""))
            if allowed(view) and owner and len(chosen) < k:
                chosen.append((view, owner, 1.0))
        rel = {s.view.id: s.rel for s in run.scored if not s.view.is_lo}
        taken = {v.id for v, _, _ in chosen}
        pool: dict[str, tuple[NodeView, str, float]] = {}
        for link in links:
            if link.node.id not in taken:
                # Graph link strength times how well the item itself matches the question.
                pool[link.node.id] = (
                    link.node,
                    link.for_lo,
                    link.score * (0.5 + 0.5 * rel.get(link.node.id, 0.5)),
                )
        for s in run.scored:
            owners = [lo for lo in s.view.assesses if lo in cited]
            if allowed(s.view) and owners and s.view.id not in pool and s.view.id not in taken:
                pool[s.view.id] = (s.view, owners[0], 0.8 * s.rel)
        # The best candidates by score, then slot by slot for the intent.
        ranked = sorted(pool.values(), key=lambda x: (-x[2], x[0].id))[: max(c.top_k.content, k)]
        for family in SLOTS[run.intent.intent][len(chosen) :]:
            if len(chosen) >= k:
                break
            options = [x for x in ranked if x not in chosen and self._fits(x[0], family, types)]
            if family == "practice" and run.intent.intent is Intent.PRACTICE:
                options.sort(key=lambda x: (self._novelty(x, chosen), x[2]), reverse=True)
            if options:
                chosen.append(options[0])
        if not chosen and ranked and run.intent.intent is not Intent.PRACTICE:
            chosen.append(ranked[0])
        return chosen

    @staticmethod
    def _fits(view: NodeView, family: str, requested: set[str] | frozenset[str] = frozenset()) -> bool:
        if family == "pitfall":
            return _is_pitfall(view)
        got = content_family(view.type)
        # A quiz fills a practice slot only when the request names its type.
        return got == family or (family == "practice" and got == "assessment" and view.type in requested)

    @staticmethod
    def _novelty(item: tuple[NodeView, str, float], chosen: list[tuple[NodeView, str, float]]) -> int:
        """Practice sets spread over difficulties and LOs: count what this item adds."""
        diffs = {v.difficulty for v, _, _ in chosen}
        los = {lo for _, lo, _ in chosen}
        return int(item[0].difficulty not in diffs) + int(item[1] not in los)

    @staticmethod
    def _sources(
        matched: list[_Scored],
        supporting: list[tuple[NodeView, PrereqPath]],
        items: list[tuple[NodeView, str, float]],
    ) -> list[cmp.Source]:
        """Cited nodes in learning order: deepest prerequisites, matched LOs (prerequisites of
        others first), then content."""
        sources: list[cmp.Source] = []
        for view, p in sorted(supporting, key=lambda x: (-x[1].length, -x[1].score)):
            sources.append(cmp.Source(view, "supporting", p.score, len(sources)))
        ids = {s.view.id for s in matched}
        for s in sorted(matched, key=lambda s: (sum(1 for p in s.view.prereqs if p in ids), -s.rel)):
            sources.append(cmp.Source(s.view, "matched", s.rel, len(sources)))
        for view, _, score in items:
            sources.append(cmp.Source(view, "content", min(1.0, score), len(sources)))
        return sources
