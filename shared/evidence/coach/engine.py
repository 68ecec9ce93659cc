"""The coach profile (seed 004): graph-aware retrieval, compression with citations, answer or clarify.

Stages, each timed in `telemetry.stages` (optional ones skipped when the deadline cannot afford
them, and named in `telemetry.degraded`):

1. intent      the request's, else the Bedrock classifier's (optional), else the rules
2. embed       the query (with the conversation when the query refers back to it)
3. hyde        optional: a hypothetical answer's embedding blended into the query vector
4. hybrid      BM25 + dense over LO and content nodes, fused; filters: subject, content types
5. rerank      the top `rerank_k` (40) when a reranker is configured
6. mmr         diversity among the candidate LOs (stored vectors)
7. graph       prerequisite paths within `graph_depth.prereq`, content within `graph_depth.content`
8. compress    3-7 verbatim bullets, <= 3 content items, everything under `token_budget`

Content hits vote for the LOs they assess (a strong example match is evidence for its LO), and
ids cited in `conversation_snippet` are favoured when the query refers back ("that last step").

The engine is assembled from one module per responsibility, each a base of the next:
`respond` (collaborators, the response), `understand` (intent, embedding, HyDE),
`retrieval` (hybrid search, LO ranking, MMR), `expansion` (prerequisites, content, sources),
`selection` (answer bullets, clarification); this module runs them and decides.
"""

from __future__ import annotations

from evidence.coach.budget import Deadline
from evidence.coach.common import (
    _WORDS,
    BARE_TOPIC_WORDS,
    CONTENT_VOTE,
    CoachSettings,
    _Run,
    _stems,
    content_family,
)
from evidence.coach.confidence import QueryFeatures, decide
from evidence.coach.contract import (
    CoachRequest,
    CoachResponse,
    Intent,
)
from evidence.coach.intent import (
    asks_question,
)
from evidence.coach.selection import Selection
from evidence.graph.documents import NodeView
from evidence.graph.store import GraphReader
from evidence.rank.similarity import cosine


class CoachEngine(Selection):
    """One coach request against one index, through the read-only SearchReader port only (on a
    request, the index seen through its filters)."""

    def run(self, index: str, request: CoachRequest) -> CoachResponse:
        info = self.backend.get_index(index)
        run = _Run(
            index,
            request,
            Deadline(request.constraints.timeout_ms, clock=self.clock),
            self.costs,
            GraphReader(self.backend, index),
        )
        run.intent = self._intent(run)
        subject = request.subject.strip().lower() if request.subject else None
        guard = self.settings.guard
        if subject is not None and not guard.allows_subject(subject):
            return self._off_subject(
                run, "not_allowed", sorted({x.strip().lower() for x in guard.subjects or []})
            )
        self._understand(run)
        text = request.query
        if run.followup:
            text = f"{request.query} {run.followup[-self.settings.snippet_chars :]}"
        run.vector = self._embed(run, text, dense=info.dimension > 0)
        run.vector = self._hyde(run)
        run.scored = self._hybrid(run, text)
        if subject is not None and not any(s.view.is_lo for s in run.scored):
            known = self._subjects(run)
            if subject not in known:
                # A filter that matches nothing never widens the search silently: ask back,
                # naming the subjects there are, with the closest LOs of those as suggestions.
                run.scored = self._hybrid(run, text, subject=False)
                run.los = self._lo_ranking(run)
                return self._off_subject(run, "unmatched", known)
            run.detail["subject_matched"] = True
        if run.followup:
            run.prior = self._prior(run)
        run.los = self._mmr(run, self._lo_ranking(run))

        with run.stage("confidence"):
            features = self._features(run)
            decision = decide(features)
        if self.observer is not None:
            self.observer("nodes", list(run.scored) + [s for s in run.los if s not in run.scored])
            self.observer(
                "context", {"los": run.los, "vector": run.vector, "terms": run.terms, "index": index}
            )
            self.observer("features", features)
        run.detail.update(
            in_domain=decision.in_domain,
            words=len(run.words),
            top=round(features.top, 4),
            cos_max=round(features.cos_max, 4),
            coverage=round(features.coverage, 4),
            sense_gap=round(features.sense_gap, 4),
            confidence_reasons=decision.reasons,
        )
        if decision.mode == "out_of_scope":
            return self._respond(run, decision, matched=self._closest(run))
        if decision.mode == "clarify":
            return self._clarify(run, decision)
        return self._answer(run, decision)

    @staticmethod
    def _distinct(a: NodeView, b: NodeView) -> bool:
        """Distinct topics: no prerequisite edge links the two LOs and they share no neighbour
        (siblings of one prerequisite are one topic family: factoring out a GCF, factoring trinomials)."""
        na = {*a.prereqs, *a.unlocks}
        nb = {*b.prereqs, *b.unlocks}
        return b.id not in na and a.id not in nb and not (na & nb)

    def _sense_scores(self, run: _Run) -> dict[str, float]:
        """Per candidate LO, how well its best sentence answers the query (0.5 cos + 0.5 overlap)."""
        head = run.los[:6]
        views = [s.view for s in head] + [s.via for s in head if s.via is not None]
        sentences = self._load_sentences(run, views)

        def best(view: NodeView) -> float:
            top = 0.0
            for sent in sentences.get(view.id, []):
                cos = cosine(run.vector, sent.vector)
                overlap = len(run.terms & _stems(sent.text)) / len(run.terms) if run.terms else 0.0
                top = max(top, 0.5 * (cos if cos is not None else 0.0) + 0.5 * overlap)
            return top

        # An LO lifted by its content answers as well as that content does (at the vote's weight).
        return {
            s.view.id: max(best(s.view), CONTENT_VOTE * best(s.via) if s.via is not None else 0.0)
            for s in head
        }

    def _features(self, run: _Run) -> QueryFeatures:
        los = run.los
        gap = 1.0
        # In a follow-up, the ids cited earlier decide between senses: no split.
        if los and run.words and not run.prior:
            senses = self._sense_scores(run)
            head = los[0]
            first = senses.get(head.view.id, 0.0)
            others = [
                (senses[s.view.id], s.view.id)
                for s in los[1:6]
                if s.view.id in senses and self._distinct(head.view, s.view)
            ]
            if others:
                second, partner = max(others)
                gap = first - second
                run.detail["sense_partner"] = partner
            run.detail["sense_top"] = round(first, 4)
        best = sorted(run.scored, key=lambda s: -s.rel)[:5]
        subjects = {s.view.subject for s in run.scored if s.view.subject}
        subject_terms = _stems(" ".join(subjects)) if subjects else frozenset()
        return QueryFeatures(
            cos_max=float(max((s.cos for s in run.scored if s.cos is not None), default=0.0)),
            coverage=max((s.cov_text for s in best), default=0.0),
            top=los[0].rel if los else 0.0,
            sense_gap=gap,
            words=len(run.words),
            vague=not run.words,
            unresolved_reference=run.unresolved,
            prior=bool(run.prior),
            # A short utterance that names a topic and nothing else ("derivatives?", "do
            # derivatives use limits?"): a longer yes/no question states what it asks.
            bare_topic=(
                not run.intent.explicit
                and not asks_question(run.request.query)
                and len(run.words) <= 2
                and len(_WORDS.findall(run.request.query)) <= BARE_TOPIC_WORDS
                and not run.request.conversation_snippet
            ),
            # A whole subject ("teach me algebra"); practice over a subject is a fine request.
            broad=bool(run.terms) and run.terms <= subject_terms and run.intent.intent is not Intent.PRACTICE,
            seek_clarification=run.request.seek_clarification,
        )


__all__ = ["CoachEngine", "CoachSettings", "content_family"]
