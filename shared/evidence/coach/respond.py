"""The coach's response: the parts of an answer or a clarification, fitted to the token budget,
with telemetry (the base of the engine: it holds the engine's collaborators).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from evidence.coach import compress as cmp
from evidence.coach.budget import StageCosts, TokenCounter
from evidence.coach.common import (
    CoachSettings,
    Vector,
    _Run,
    _Scored,
)
from evidence.coach.confidence import Decision
from evidence.coach.contract import (
    CoachCitation,
    CoachResponse,
    CoachTelemetry,
    ContentItem,
    Intent,
    MatchedLO,
    SupportingLO,
)
from evidence.coach.hyde import HydeGenerator
from evidence.coach.intent import (
    IntentClassifier,
)
from evidence.graph.documents import NodeView
from evidence.graph.expand import PrereqPath

if TYPE_CHECKING:
    from evidence.rank.rerank import Reranker
    from evidence.search.base import SearchReader


class Responder:
    """The engine's collaborators and its responses."""

    def __init__(
        self,
        backend: SearchReader,
        *,
        embed_query: Callable[[str], Vector | None] | None,
        reranker: Reranker | None = None,
        intent_classifier: IntentClassifier | None = None,
        hyde: HydeGenerator | None = None,
        tokens: TokenCounter | None = None,
        costs: StageCosts | None = None,
        settings: CoachSettings | None = None,
        clock: Callable[[], float] = time.perf_counter,
        observer: Callable[[str, Any], None] | None = None,
        server_hybrid: bool = False,
    ) -> None:
        self.backend = backend
        #: Use OpenSearch's server-side hybrid query when the backend offers one.
        self.server_hybrid = server_hybrid
        self.embed_query = embed_query
        self.reranker = reranker
        self.intent_classifier = intent_classifier
        self.hyde = hyde
        self.tokens = tokens or TokenCounter()
        self.costs = costs or StageCosts()
        self.settings = settings or CoachSettings()
        self.clock = clock
        #: Sees ("nodes", [...]), ("context", {...}) and ("features", QueryFeatures) per request:
        #: what the calibration script fits on.
        self.observer = observer

    def _respond(
        self,
        run: _Run,
        decision: Decision,
        *,
        matched: list[_Scored],
        supporting: Sequence[tuple[NodeView, PrereqPath]] = (),
        items: Sequence[tuple[NodeView, str, float]] = (),
        bullets: Sequence[cmp.Bullet] = (),
        question: str | None = None,
    ) -> CoachResponse:
        supporting, items, bullets = self._floor_expansion(run, supporting, items, bullets)
        parts = _Parts(
            decision=decision,
            intent=run.intent.intent,
            question=question,
            matched=[
                MatchedLO(id=s.view.id, title=s.view.title, reason=s.reason, score=round(s.rel, 4))
                for s in matched
            ],
            supporting=[
                SupportingLO(
                    id=v.id, title=v.title, path_len=p.length, score=round(p.score, 4), path=list(p.nodes)
                )
                for v, p in supporting
            ],
            items=[
                ContentItem(
                    id=v.id,
                    type=v.type,
                    title=v.title,
                    for_lo=lo,
                    score=round(score, 4),
                    difficulty=v.difficulty,
                    snippet=_snippet(v, self.tokens),
                )
                for v, lo, score in items
            ],
            bullets=list(bullets),
            types={
                **{s.view.id: s.view.citation_type for s in matched},
                **{v.id: v.citation_type for v, _ in supporting},
                **{v.id: v.citation_type for v, _, _ in items},
            },
        )
        budget = run.request.constraints.token_budget
        had_facts = bool(parts.bullets)
        max_chars = self.settings.max_chars
        _fit_chars(parts, max_chars)
        by_chars = had_facts and not parts.bullets
        if max_chars:
            run.detail["max_chars"] = max_chars
        response, tokens = _fit_budget(parts, budget, self.tokens)
        if decision.can_answer and not parts.bullets:
            # "can_answer" with nothing to teach from is no answer: decline and say why.
            limit = f"max_chars {max_chars}" if by_chars else f"token_budget {budget}"
            reason = (
                f"{limit} is too small for one cited fact"
                if had_facts
                else "no cited fact was found for the matched learning objectives"
            )
            too_small = "max_chars:too_small" if by_chars else "token_budget:too_small"
            run.degraded.append(too_small if had_facts else "facts:none")
            run.detail["reason"] = reason
            parts.decision = replace(decision, mode="decline", reasons=[*decision.reasons, "no_fact"])
            response, tokens = _fit_budget(parts, budget, self.tokens)
        telemetry = CoachTelemetry(
            stages=dict(run.stages),
            applied_filters=list(run.detail.get("applied_filters", [])),
            degraded=list(dict.fromkeys(run.degraded)),
            total_ms=round(run.deadline.elapsed_ms, 3),
            tokens=tokens,
            intent_source=run.intent.source,
            detail={k: v for k, v in run.detail.items() if k != "applied_filters"},
        )
        return response.model_copy(update={"telemetry": telemetry})

    def _floor_expansion(
        self,
        run: _Run,
        supporting: Sequence[tuple[NodeView, PrereqPath]],
        items: Sequence[tuple[NodeView, str, float]],
        bullets: Sequence[cmp.Bullet],
    ) -> tuple[
        Sequence[tuple[NodeView, PrereqPath]], Sequence[tuple[NodeView, str, float]], Sequence[cmp.Bullet]
    ]:
        """The guardrail's floor on what graph expansion added (prerequisites, content): their
        similarity is their stored vector's cosine with the query's, as for recalled nodes; the
        bullets quoted from a dropped node go with it."""
        from evidence.errors import EvidenceError
        from evidence.rank.guardrail import at_or_above
        from evidence.rank.similarity import cosines

        floor = self.settings.min_similarity
        views = [v for v, _ in supporting] + [v for v, _, _ in items]
        if not floor or run.vector is None or not views:
            return supporting, items, bullets
        try:
            sims = cosines(run.vector, run.reader.vectors(views))
        except EvidenceError:
            run.degraded.append("min_similarity:vectors_unavailable")
            return supporting, items, bullets
        below = {v.id for v in views if v.id in sims and not at_or_above(sims[v.id], floor)}
        if not below:
            return supporting, items, bullets
        run.detail["below_floor"] = int(run.detail.get("below_floor", 0)) + len(below)
        return (
            [(v, p) for v, p in supporting if v.id not in below],
            [x for x in items if x[0].id not in below],
            [b for b in bullets if b.node_id not in below],
        )


def _snippet(view: NodeView, tokens: TokenCounter, limit: int = 48) -> str | None:
    """The item's first sentence (two when the first is short), verbatim, within `limit` tokens."""
    sents = cmp.split_node(view)
    if not sents:
        return None
    text = sents[0].text
    if len(sents) > 1 and tokens.count(text) < 12:
        end = view.text.find(sents[1].text)
        joined = view.text[: end + len(sents[1].text)] if end >= 0 else text
        if tokens.count(joined) <= limit:
            text = joined
    return text if tokens.count(text) <= limit else None


@dataclass
class _Parts:
    """What a response is built from; `_fit_budget` removes parts until it fits."""

    decision: Decision
    intent: Intent
    question: str | None
    matched: list[MatchedLO]
    supporting: list[SupportingLO]
    items: list[ContentItem]
    bullets: list[cmp.Bullet]
    types: dict[str, str]

    def build(self) -> CoachResponse:
        cited: dict[str, str] = {}
        if self.decision.mode not in ("out_of_scope", "off_subject"):
            for m in self.matched:
                cited.setdefault(m.id, "LO")
        for s in self.supporting:
            cited.setdefault(s.id, "LO")
        for b in self.bullets:
            cited.setdefault(b.node_id, self.types.get(b.node_id, "LO"))
        for i in self.items:
            cited.setdefault(i.id, "Content")
        citations = [CoachCitation(type="LO", id=k) for k, t in cited.items() if t == "LO"]
        citations += [CoachCitation(type="Content", id=k) for k, t in cited.items() if t == "Content"]
        return CoachResponse(
            can_answer=self.decision.can_answer,
            needs_clarification=self.decision.needs_clarification,
            confidence=self.decision.confidence,
            matched_los=list(self.matched),
            supporting_los=list(self.supporting),
            content_items=list(self.items),
            minimal_context=[b.text for b in self.bullets],
            minimal_context_sources=[b.node_id for b in self.bullets],
            citations=citations,
            telemetry=CoachTelemetry(stages={}, applied_filters=[]),
            clarification_question=self.question,
            intent=self.intent,
        )


def _pop_weakest(bullets: list[cmp.Bullet]) -> None:
    """Drop the weakest bullet of a node that has another one (each cited LO keeps its bullet
    while it can: a chain's progression survives a tight budget), else the weakest."""
    per_node: dict[str, int] = {}
    for b in bullets:
        per_node[b.node_id] = per_node.get(b.node_id, 0) + 1
    i = min(range(len(bullets)), key=lambda j: (per_node[bullets[j].node_id] == 1, bullets[j].score, -j))
    bullets.pop(i)


def _drop_snippet(items: list[ContentItem]) -> bool:
    for i in range(len(items) - 1, -1, -1):
        if items[i].snippet is not None:
            items[i] = items[i].model_copy(update={"snippet": None})
            return True
    return False


def quoted_chars(response: CoachResponse) -> int:
    """What `max_chars` counts in a coach response: the characters it quotes from the graph
    (its `minimal_context` bullets and its content items' snippets)."""
    return sum(len(b) for b in response.minimal_context) + sum(
        len(i.snippet or "") for i in response.content_items
    )


def _fit_chars(parts: _Parts, max_chars: int | None) -> None:
    """The guardrail's `max_chars` on the quoted text (`quoted_chars`): content snippets go
    first, then bullets, weakest first (`_pop_weakest`); None or 0: off."""

    def chars() -> int:
        return sum(len(b.text) for b in parts.bullets) + sum(len(i.snippet or "") for i in parts.items)

    while max_chars and chars() > max_chars:
        if _drop_snippet(parts.items):
            continue
        if not parts.bullets:
            return
        _pop_weakest(parts.bullets)


def _fit_budget(parts: _Parts, budget: int, tokens: TokenCounter) -> tuple[CoachResponse, int]:
    """Drop the least needed parts until the response (telemetry aside) fits `budget` tokens.

    Order: bullets beyond 3 (weakest first), content snippets, content beyond 1, supporting LOs
    beyond 1, matched LOs beyond 1, then the rest down to the flags. Citations follow what stays.
    """

    def size(r: CoachResponse) -> int:
        return tokens.count(r.model_dump_json(exclude={"telemetry"}))

    def shrink(keep: int, seq: list[Any], weakest: bool = False) -> Callable[[], bool]:
        def step() -> bool:
            if len(seq) <= keep:
                return False
            if weakest:
                _pop_weakest(seq)
                return True
            # LOs that a bullet quotes go last: the bullet and its LO stay together.
            quoted = {b.node_id for b in parts.bullets}
            i = next(
                (j for j in range(len(seq) - 1, -1, -1) if getattr(seq[j], "id", None) not in quoted),
                len(seq) - 1,
            )
            seq.pop(i)
            return True

        return step

    steps: list[Callable[[], bool]] = [
        shrink(3, parts.bullets, weakest=True),
        lambda: _drop_snippet(parts.items),
        shrink(1, parts.items),
        shrink(1, parts.supporting),
        shrink(1, parts.matched),
        shrink(1, parts.bullets, weakest=True),
        shrink(0, parts.items),
        shrink(0, parts.supporting),
        shrink(0, parts.bullets),
        shrink(0, parts.matched),
    ]
    current = parts.build()
    n = size(current)
    for step in steps:
        while n > budget and step():
            current = parts.build()
            n = size(current)
        if n <= budget:
            return current, n
    if parts.question is not None:
        parts.question = "Could you say more about what you need?"
        current = parts.build()
        n = size(current)
    return current, n
