"""Selection: the compression plan and bullets of an answer, and the heads and question of a
clarification.
"""

from __future__ import annotations

from evidence.coach import compress as cmp
from evidence.coach.common import (
    _analyze,
    _Run,
    _Scored,
    content_family,
)
from evidence.coach.confidence import Decision
from evidence.coach.contract import (
    MAX_CONTENT_ITEMS,
    CoachResponse,
    Intent,
)
from evidence.coach.expansion import Expansion
from evidence.graph.documents import NodeView
from evidence.graph.expand import ContentLink, PrereqPath, content_links


class Selection(Expansion):
    """The answer's bullets and the clarification's question."""

    def _answer(self, run: _Run, decision: Decision) -> CoachResponse:
        matched = self._matched(run)
        supporting: list[tuple[NodeView, PrereqPath]] = []
        links: list[ContentLink] = []
        if matched and run.affordable("graph"):
            with run.stage("graph"):
                supporting, links = self._expand(run, matched)
        items = self._select_content(run, links, matched, supporting)
        sources = self._sources(matched, supporting, items)
        bullets = self._compress(run, sources, self._plan(run, len(matched), len(supporting)))
        return self._respond(
            run, decision, matched=matched, supporting=supporting, items=items, bullets=bullets
        )

    @staticmethod
    def _plan(run: _Run, n_matched: int, n_supporting: int) -> cmp.Plan:
        """Seed 004's playbooks: practice "no long bullets", troubleshooting "short bullets on
        checks", a chain's bullets follow its path, a follow-up gets "short delta-only bullets"."""
        i = run.intent.intent
        if run.followup:
            return cmp.Plan(max_bullets=3, min_bullets=3, max_tokens=60, exclude=(run.followup,), per_node=2)
        if i is Intent.PRACTICE:
            return cmp.Plan(max_bullets=3, min_bullets=3, max_tokens=40, per_node=1)
        if i is Intent.TROUBLESHOOTING:
            return cmp.Plan(max_bullets=5, min_bullets=3, max_tokens=60, checks=True)
        if i is Intent.DEFINITION:
            return cmp.Plan(max_bullets=4, min_bullets=3)
        if n_supporting >= 2:
            return cmp.Plan(max_bullets=min(7, 2 + n_matched + n_supporting), min_bullets=3, per_node=2)
        return cmp.Plan(max_bullets=5, min_bullets=3)

    def _compress(self, run: _Run, sources: list[cmp.Source], plan: cmp.Plan) -> list[cmp.Bullet]:
        if not sources:
            return []
        if not run.deadline.allows(self.costs.estimate("compress")):
            # No time to score sentences: the first sentence of each cited LO, verbatim.
            run.degraded.append("compress:skipped_timeout")
            out = []
            for src in sources:
                sents = cmp.split_node(src.node) if src.role != "content" else []
                if sents:
                    out.append(cmp.Bullet(sents[0].text, src.node.id, src.weight, (src.order, 0)))
            return out[: plan.max_bullets]
        with run.stage("compress"):
            sentences = self._load_sentences(run, [s.node for s in sources])
            return cmp.compress(
                sources,
                sentences,
                query_terms=run.terms,
                query_vector=run.vector,
                plan=plan,
                tokens=self.tokens,
                analyze=_analyze,
            )

    @staticmethod
    def _adjacent(a: NodeView, b: NodeView) -> bool:
        return b.id in a.prereqs or b.id in a.unlocks or a.id in b.prereqs or a.id in b.unlocks

    def _clarify(self, run: _Run, decision: Decision) -> CoachResponse:
        """Seed 004's ambiguous and low-confidence playbooks: the top two LO clusters, one
        example each, one bullet each, and one concise question."""
        heads = self._heads(run, decision)
        items: list[tuple[NodeView, str, float]] = []
        c = run.request.constraints
        if heads and c.top_k.content > 0 and run.affordable("graph"):
            with run.stage("graph"):
                for s in heads:
                    links = content_links(
                        run.reader,
                        s.view.graph,
                        {s.view.id: (s.rel, 0)},
                        content_depth=max(1, c.graph_depth.content),
                        types=c.content_types,
                        difficulty=c.difficulties(),
                    )
                    links = [x for x in links if not self._blocked(run, x.node)]
                    pick = next((x for x in links if content_family(x.node.type) == "example"), None)
                    pick = pick or (links[0] if links else None)
                    if pick is not None and len(items) < min(MAX_CONTENT_ITEMS, c.top_k.content):
                        items.append((pick.node, s.view.id, pick.score))
        sources = [cmp.Source(s.view, "matched", s.rel, i) for i, s in enumerate(heads)]
        plan = cmp.Plan(max_bullets=len(heads), min_bullets=len(heads), per_node=1)
        bullets = self._compress(run, sources, plan) if heads else []
        return self._respond(
            run,
            decision,
            matched=heads,
            items=items,
            bullets=bullets,
            question=self._question(decision, heads),
        )

    def _heads(self, run: _Run, decision: Decision) -> list[_Scored]:
        """One LO per interpretation, at most two."""
        if not run.los or not run.words:
            return []
        top = run.los[0]
        heads = [top]
        partner = run.detail.get("sense_partner") if "split" in decision.reasons else None
        for s in run.los[1:8]:
            if partner is not None and s.view.id == partner:
                heads.append(s)
                break
            # Otherwise a second cluster: not one edge away from the first, and plausible itself.
            if partner is None and not self._adjacent(top.view, s.view) and s.rel >= max(0.1, 0.5 * top.rel):
                heads.append(s)
                break
        for s in heads:
            s.reason = "candidate interpretation"
        return heads

    @staticmethod
    def _question(decision: Decision, heads: list[_Scored]) -> str:
        titles = [f"\u201c{s.view.title}\u201d" for s in heads]
        reasons = set(decision.reasons)
        if "unresolved_reference" in reasons:
            return "Which step or topic do you mean?"
        if "vague" in reasons or not heads:
            return "Which topic would you like help with?"
        if ("split" in reasons or "broad" in reasons) and len(titles) == 2:
            return f"Do you mean {titles[0]} or {titles[1]}?"
        if reasons & {"bare_topic", "seek_clarification", "broad"}:
            return f"Do you want a definition, an example, or practice on {titles[0]}?"
        return f"Is your question about {titles[0]}? If not, could you say which topic you mean?"
