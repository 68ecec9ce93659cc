"""Retrieval: hybrid search over LO and content nodes, subject and content-type filters, the
conversation's prior nodes, the LO ranking (content votes, follow-up boosts) and MMR over it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from evidence.coach import compress as cmp
from evidence.coach.common import (
    _ID_IN_TEXT,
    CONTENT_VOTE,
    FOLLOWUP_BOOST,
    FOLLOWUP_FLOOR,
    _coverage,
    _Run,
    _Scored,
)
from evidence.coach.confidence import Decision, node_relevance
from evidence.coach.contract import (
    CoachRequest,
    CoachResponse,
)
from evidence.coach.understand import Understanding
from evidence.config import CoachGuard
from evidence.errors import EvidenceError
from evidence.graph.documents import KG_ID, KG_ROLE, KG_TYPE, ROLE_CONTENT, ROLE_LO, SUBJECT, NodeView
from evidence.rank.similarity import cosine, mmr
from evidence.records import ChunkKind

log = logging.getLogger(__name__)


class Retrieval(Understanding):
    """Candidate LOs and content from the index, ranked and diversified."""

    @staticmethod
    def _filters(
        req: CoachRequest, subject: bool = True, guard: CoachGuard | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        c = req.constraints
        filters: dict[str, Any] = {KG_ROLE: [ROLE_LO, ROLE_CONTENT]}
        applied: list[str] = []
        if req.subject and subject:
            filters[SUBJECT] = req.subject.strip().lower()
            applied.append(f"subject:{req.subject}")
        elif guard is not None and guard.subjects is not None:
            # The index's subject allowlist bounds every search, a widened one included.
            allowed = sorted({x.strip().lower() for x in guard.subjects})
            filters[SUBJECT] = allowed
            applied.append("subjects:" + ",".join(allowed))
        if c.content_types:
            filters[KG_TYPE] = ["LO", *c.content_types]
            applied.append("types:" + ",".join(c.content_types))
        diffs = c.difficulties()
        if diffs:
            applied.append("difficulty:" + ",".join(diffs))
        return filters, applied

    def _scored(self, run: _Run, view: NodeView, cos: float | None) -> _Scored:
        s = _Scored(
            view,
            cos=cos,
            cov_text=_coverage(run.terms, f"{view.title} {view.text}"),
            cov_title=_coverage(run.terms, view.title),
        )
        s.rel = node_relevance(s.cos, s.cov_text, s.cov_title)
        return s

    def _hybrid(self, run: _Run, text: str, *, subject: bool = True) -> list[_Scored]:
        """Stages A and B through the ranking layer: hybrid recall over graph nodes (our fusion,
        or OpenSearch's pipeline), then the reranker on the top 40 when one is configured and
        the deadline affords it."""
        from evidence.coach.profile import recall_profile
        from evidence.rank.context import RankContext

        filters, applied = self._filters(run.request, subject, self.settings.guard)
        run.detail["applied_filters"] = applied
        diffs = set(run.request.constraints.difficulties() or [])
        rerank = self.reranker is not None and run.affordable("rerank")
        budget = min(self.settings.rerank_budget_ms, run.deadline.remaining_ms)
        profile = recall_profile(rerank=rerank, rerank_budget_ms=budget)
        if rerank:
            run.detail["rerank_budget_ms"] = round(budget, 1)
        outcome = profile.run(
            RankContext(
                index=run.index,
                query=text,
                query_vector=run.vector,
                criterion_question=None,
                criterion_hash=None,
                params=replace(
                    profile.defaults,
                    first_stage_k=self.settings.first_stage_k,
                    rerank_k=self.settings.rerank_k,
                ),
                filters=filters,
                explain=False,
                backend=self.backend,
                reranker=self.reranker if rerank else None,
                server_hybrid=self.server_hybrid,
            )
        )
        for record in outcome.stages:
            name = {"first_stage": "hybrid"}.get(record.name, record.name)
            if name in ("hybrid", "rerank") and (name != "rerank" or rerank):
                run.stages[name] = round(run.stages.get(name, 0.0) + record.ms, 3)
                self.costs.observe(name, record.ms)
        run.degraded.extend(outcome.degraded)
        missing = [c for c in outcome.hits if "dense" not in c.scores]
        # Server-side hybrid reports a cosine only for what its dense leg returned.
        stored = (
            self.backend.vectors(run.index, [c.chunk_id for c in missing])
            if missing and run.vector is not None
            else {}
        )
        out: list[_Scored] = []
        for cand in outcome.hits:
            view = NodeView.from_chunk(cand.chunk)
            if view is None or (not view.is_lo and diffs and view.difficulty not in diffs):
                continue
            if self._blocked(run, view):
                continue
            cos = cand.scores.get("dense")
            if cos is None:
                cos = cosine(run.vector, stored.get(cand.chunk_id))
            s = self._scored(run, view, cos)
            s.lexical = float(cand.scores.get("lexical", 0.0))
            s.fused = float(cand.first_stage_score)
            if "rerank" in cand.scores:
                s.rerank = s.rel = float(cand.scores["rerank"])
                s.reason = "semantic match + rerank"
            out.append(s)
        run.reader.remember(outcome.hits)
        out = self._floor(run, out)
        run.detail["candidates"] = len(out)
        return out

    def _floor(self, run: _Run, nodes: list[_Scored]) -> list[_Scored]:
        """The guardrail's similarity floor (`rank.guardrail.at_or_above`): a node's similarity is
        the cosine of its stored vector with the query's; a node without one is kept."""
        from evidence.rank.guardrail import at_or_above

        floor = self.settings.min_similarity
        if not floor:
            return nodes
        kept = [s for s in nodes if s.cos is None or at_or_above(s.cos, floor)]
        if len(kept) < len(nodes):
            run.detail["below_floor"] = int(run.detail.get("below_floor", 0)) + len(nodes) - len(kept)
        return kept

    def _blocked(self, run: _Run, view: NodeView) -> bool:
        """The unsafe-content guard: a blocked content type is never recalled, linked or cited."""
        if view.is_lo or not self.settings.guard.blocks_type(view.type):
            return False
        blocked = run.detail.setdefault("blocked", [])
        if view.id not in blocked:
            blocked.append(view.id)
        return True

    def _subjects(self, run: _Run, limit: int = 2000) -> list[str]:
        """The subjects the index's graphs declare (read from up to `limit` LO nodes)."""
        try:
            hits = self.backend.lookup(run.index, {KG_ROLE: ROLE_LO}, limit=limit, kind=ChunkKind.PASSAGE)
        except EvidenceError:
            return []
        return sorted({str(h.chunk.metadata[SUBJECT]) for h in hits if h.chunk.metadata.get(SUBJECT)})

    def _off_subject(self, run: _Run, why: str, subjects: list[str]) -> CoachResponse:
        """A subject the index lacks (`unmatched`) or its guard refuses (`not_allowed`): never
        answered from another subject. One question naming the subjects there are; the closest
        LOs of those, if any were searched, are suggestions only (not cited, no facts)."""
        asked = (run.request.subject or "").strip()
        run.degraded.append(f"subject:{why}")
        run.detail["subject_matched"] = False
        run.detail["subjects"] = subjects
        # The filters as requested, the subject marked with what became of it.
        _, applied = self._filters(run.request, True)
        run.detail["applied_filters"] = [
            f"{f} ({why.replace('_', ' ')})" if f == f"subject:{asked}" else f for f in applied
        ]
        where = "is not allowed on this index" if why == "not_allowed" else "matches nothing in this index"
        if subjects:
            listing = ", ".join(subjects[:-1]) + (" or " if len(subjects) > 1 else "") + subjects[-1]
            question = f"The subject \u201c{asked}\u201d {where}; did you mean {listing}?"
        else:
            question = f"The subject \u201c{asked}\u201d {where}, which names no subjects; ask without one?"
        matched = run.los[: min(3, run.request.constraints.top_k.lo)]
        for m in matched:
            m.reason = f"closest LO outside the subject ({m.view.subject or 'no subject'})"
        return self._respond(
            run, Decision("off_subject", 0.0, 0.0, [f"subject_{why}"]), matched=matched, question=question
        )

    def _prior(self, run: _Run) -> dict[tuple[str, str], NodeView]:
        """Nodes whose ids appear in the conversation snippet."""
        ids = list(dict.fromkeys(m.group(0) for m in _ID_IN_TEXT.finditer(run.followup)))[:20]
        if not ids:
            return {}
        try:
            hits = self.backend.lookup(run.index, {KG_ID: ids}, limit=len(ids) * 4, kind=ChunkKind.PASSAGE)
        except EvidenceError:
            return {}
        views = [v for v in run.reader.remember(hits) if not self._blocked(run, v)]
        if views:
            run.detail["prior"] = sorted({v.id for v in views})
        return {(v.graph, v.id): v for v in views}

    def _lo_ranking(self, run: _Run) -> list[_Scored]:
        """LOs by relevance: their own, or a content item's vote, or the conversation's."""
        los: dict[tuple[str, str], _Scored] = {
            (s.view.graph, s.view.id): s for s in run.scored if s.view.is_lo
        }
        votes: dict[tuple[str, str], tuple[float, NodeView]] = {}
        for s in run.scored:
            if s.view.is_lo:
                continue
            for lo_id in s.view.assesses:
                key = (s.view.graph, lo_id)
                vote = CONTENT_VOTE * s.rel
                if key not in votes or vote > votes[key][0]:
                    votes[key] = (vote, s.view)
        favoured: set[tuple[str, str]] = set()
        for (graph, node_id), view in run.prior.items():
            if view.is_lo:
                favoured.add((graph, node_id))
            else:
                favoured.update((graph, lo) for lo in view.assesses)
        missing: dict[str, list[str]] = {}
        for graph, node_id in (*votes, *favoured):
            if (graph, node_id) not in los:
                missing.setdefault(graph, []).append(node_id)
        for graph, ids in missing.items():
            views = [v for v in run.reader.fetch(graph, ids).values() if v.is_lo]
            vectors = run.reader.vectors(views) if run.vector is not None else {}
            for v in views:
                los[(graph, v.id)] = self._scored(run, v, cosine(run.vector, vectors.get(v.id)))
        for key, (vote, via) in votes.items():
            lo = los.get(key)
            if lo is not None and vote > lo.rel:
                lo.rel = vote
                lo.reason = f"content match ({via.id})"
                lo.via = via
        for key in favoured:
            lo = los.get(key)
            if lo is not None:
                # The query refers back to it ("that last step"): it is what the student means.
                lo.rel = min(1.0, max(lo.rel * FOLLOWUP_BOOST, FOLLOWUP_FLOOR))
                lo.reason = "cited earlier in the conversation"
        return sorted(self._floor(run, list(los.values())), key=lambda s: (-s.rel, -s.fused, s.view.id))

    def _mmr(self, run: _Run, los: list[_Scored]) -> list[_Scored]:
        """Reorder the head of the LO list so that near-duplicates do not crowd out other topics."""
        head = los[:10]
        lam = self.settings.mmr_lambda
        if len(head) < 3 or lam >= 1.0 or not run.affordable("mmr"):
            return los
        with run.stage("mmr"):
            vecs = run.reader.vectors([s.view for s in head])
            if not vecs:
                return los
            rows = [vecs.get(s.view.id) for s in head]

            def similarity(j: int) -> np.ndarray:
                return np.array([cosine(v, rows[j]) or 0.0 for v in rows])

            # The head is sorted by relevance, so the first pick is head[0]; equal values go to
            # the more relevant LO, then to the earlier one.
            order = mmr(
                [s.rel for s in head], similarity, lam=lam, k=len(head), tie_break=lambda i: (head[i].rel,)
            )
            picked = [head[i] for i, _ in order]
        return picked + los[10:]

    def _load_sentences(self, run: _Run, views: Sequence[NodeView]) -> dict[str, list[cmp.Sentence]]:
        todo = [v for v in views if v.id not in run.sentences]
        if todo:
            try:
                run.sentences.update(cmp.load_sentences(self.backend, run.index, todo))
            except EvidenceError as exc:
                log.warning("coach: sentences unavailable (%s); splitting node text", exc)
                run.degraded.append("sentences:unavailable")
                run.sentences.update({v.id: cmp.split_node(v) for v in todo})
        return {v.id: run.sentences.get(v.id, []) for v in views}
