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
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from evidence.coach import compress as cmp
from evidence.coach.budget import Deadline, StageCosts, TokenCounter
from evidence.coach.confidence import Decision, QueryFeatures, decide, node_relevance
from evidence.coach.contract import (
    MAX_CONTENT_ITEMS,
    CoachCitation,
    CoachRequest,
    CoachResponse,
    CoachTelemetry,
    ContentItem,
    Intent,
    MatchedLO,
    SupportingLO,
)
from evidence.coach.hyde import HydeGenerator, blend
from evidence.coach.intent import (
    IntentClassifier,
    IntentResult,
    asks_question,
    classify,
    content_words,
    has_reference,
)
from evidence.coach.llm import LLMError
from evidence.config import CoachGuard
from evidence.errors import EvidenceError
from evidence.graph.documents import KG_ID, KG_ROLE, KG_TYPE, ROLE_CONTENT, ROLE_LO, SUBJECT, NodeView
from evidence.graph.expand import ContentLink, PrereqPath, content_links, prerequisite_paths
from evidence.graph.store import GraphReader
from evidence.rank.similarity import cosine, mmr
from evidence.records import ChunkKind

if TYPE_CHECKING:
    from evidence.rank.rerank import Reranker
    from evidence.search.base import SearchBackend

log = logging.getLogger(__name__)

Vector = np.ndarray
#: Node ids as graphs write them: "LO-ALG-021", "ex_342", "calc.lo.7", "LO42".
_ID_IN_TEXT = re.compile(r"\b(?:[A-Za-z][A-Za-z0-9]*(?:[-_.:/][A-Za-z0-9]+)+|[A-Z]{1,6}\d{1,6})\b")
_PITFALL = re.compile(
    r"\b(mistake|mistakes|misconception|pitfall|wrong|error|errors|incorrect)\b", re.IGNORECASE
)
#: A content vote counts for its LO at this fraction of the content's own relevance.
CONTENT_VOTE = 0.9
#: Prior LOs cited in the conversation are multiplied by this when the query refers back.
FOLLOWUP_BOOST = 1.25
#: ...and rated at least this relevant: a conversation that cites a node has settled the topic.
FOLLOWUP_FLOOR = 0.8
#: At most this many words make an utterance a bare topic.
BARE_TOPIC_WORDS = 4
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class CoachSettings:
    """Plain arguments (the service maps `Settings` onto them)."""

    first_stage_k: int = 40
    rerank_k: int = 40
    mmr_lambda: float = 0.7
    max_matched: int = 3
    #: Keep further LOs whose relevance is at least this share of the best one's...
    keep_ratio: float = 0.85
    #: ...or this share for practice and troubleshooting, which want the topic's neighbourhood
    #: (exercises across it; the pitfalls of the sibling skill that actually fails).
    broad_keep_ratio: float = 0.75
    min_relevance: float = 0.5
    intent_budget_ms: float = 200.0
    hyde_budget_ms: float = 200.0
    snippet_chars: int = 600
    #: Seed 004's re-rank budget: the reranker call is cut when it takes longer.
    rerank_budget_ms: float = 250.0
    #: Seed 004's guardrails for the index (subject allowlist, unsafe content types).
    guard: CoachGuard = field(default_factory=CoachGuard)


@dataclass
class _Scored:
    view: NodeView
    cos: float | None = None
    lexical: float = 0.0
    fused: float = 0.0
    cov_text: float = 0.0
    cov_title: float = 0.0
    rerank: float | None = None
    rel: float = 0.0
    reason: str = "semantic match"
    #: The content node whose match lifted this LO (parent-child attribution), if any.
    via: NodeView | None = None


@dataclass
class _Run:
    """Everything one request knows; the engine itself holds no per-request state (it is shared
    by the threads of a server)."""

    index: str
    request: CoachRequest
    deadline: Deadline
    costs: StageCosts
    reader: GraphReader
    intent: IntentResult = field(default_factory=lambda: IntentResult(Intent.TUTORING, "default", False))
    #: The query's topic words (and the conversation's, in a follow-up) and their stems.
    words: list[str] = field(default_factory=list)
    terms: frozenset[str] = frozenset()
    vector: Vector | None = None
    #: The conversation snippet when the query refers back to it, else "".
    followup: str = ""
    unresolved: bool = False
    scored: list[_Scored] = field(default_factory=list)
    los: list[_Scored] = field(default_factory=list)
    #: Nodes the conversation cites by id, when the query refers back.
    prior: dict[tuple[str, str], NodeView] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    #: Sentences of nodes loaded so far (node id → sentences): loaded once per request.
    sentences: dict[str, list[cmp.Sentence]] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - t0) * 1000.0
            self.stages[name] = round(self.stages.get(name, 0.0) + ms, 3)
            self.costs.observe(name, ms)

    def affordable(self, name: str, cost: float | None = None) -> bool:
        """Whether the stage fits the time left; if not, it is named in `degraded`."""
        need = self.costs.estimate(name) if cost is None else cost
        if self.deadline.allows(need):
            return True
        self.degraded.append(f"{name}:skipped_timeout")
        return False


@lru_cache(maxsize=8192)
def _stems(text: str) -> frozenset[str]:
    from evidence.search.analysis import get_analyzer

    return frozenset(get_analyzer().analyze(text))


def _analyze(text: str) -> list[str]:
    return list(_stems(text))


def _coverage(terms: frozenset[str], text: str) -> float:
    return len(terms & _stems(text)) / len(terms) if terms else 0.0


def content_family(node_type: str) -> str:
    """Content types as a graph names them, grouped by what they are for."""
    t = node_type.lower()
    # Quizzes and tests assess; seed 004's practice playbook asks for exercises, and tutoring's
    # "quick exercise" is one too: an assessment is only given when a request names its type.
    if re.search(r"quiz|\btests?\b|\bexams?\b|assessment", t):
        return "assessment"
    if re.search(r"exercise|problem|practi[cs]e|question|drill|worksheet|homework", t):
        return "practice"
    if re.search(r"mistake|misconception|pitfall|error", t):
        return "pitfall"
    if re.search(r"example|worked|demo|walkthrough|sample|illustration", t):
        return "example"
    return "explanation"


#: Content families wanted per intent, slot by slot (seed 004: tutoring gets "1 example + 1 quick
#: exercise", practice exercises, troubleshooting examples of common pitfalls).
SLOTS: Mapping[Intent, tuple[str, ...]] = {
    Intent.TUTORING: ("example", "practice"),
    Intent.PRACTICE: ("practice", "practice", "practice"),
    Intent.DEFINITION: ("explanation", "example"),
    Intent.COMPARISON: ("explanation", "example", "example"),
    Intent.TROUBLESHOOTING: ("pitfall", "example", "practice"),
}


def _is_pitfall(view: NodeView) -> bool:
    return content_family(view.type) == "pitfall" or bool(_PITFALL.search(view.title))


class CoachEngine:
    """One coach request against one index, through the SearchBackend port only."""

    def __init__(
        self,
        backend: SearchBackend,
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

    # --- the request ----------------------------------------------------------------------

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

    def _understand(self, run: _Run) -> None:
        query = run.request.query
        snippet = (run.request.conversation_snippet or "").strip()
        run.words = content_words(query)
        reference = has_reference(query)
        if reference and snippet:
            # The question's topic is in the conversation ("that last step" of EX-342).
            run.followup = snippet
            run.words = list(dict.fromkeys([*run.words, *content_words(snippet)]))
        run.unresolved = reference and not snippet and len(run.words) <= 1
        run.terms = _stems(" ".join(run.words)) if run.words else frozenset()

    # --- stages ---------------------------------------------------------------------------

    def _intent(self, run: _Run) -> IntentResult:
        req = run.request
        requested = Intent(req.intent) if req.intent is not None else None
        classifier = self.intent_classifier
        with run.stage("intent"):
            if classifier is None or requested is not None:
                return classify(req.query, requested)
            budget = min(self.settings.intent_budget_ms, run.deadline.remaining_ms / 4)
            if not run.affordable("intent", cost=min(self.costs.estimate("intent"), budget)):
                classifier = None
            return classify(
                req.query, requested, classifier=classifier, timeout_s=budget / 1000.0, degraded=run.degraded
            )

    def _embed(self, run: _Run, text: str, *, dense: bool) -> Vector | None:
        if not dense or self.embed_query is None:
            return None
        if not run.affordable("embed"):
            run.degraded.append("dense:skipped_timeout")
            return None
        with run.stage("embed"):
            vector = self.embed_query(text)
            return None if vector is None else np.asarray(vector, dtype=np.float32)

    def _hyde(self, run: _Run) -> Vector | None:
        vector = run.vector
        if self.hyde is None or vector is None or self.embed_query is None:
            return vector
        # Its own budget: at most `hyde_budget_ms`, and never more than a quarter of what is left.
        budget = min(self.settings.hyde_budget_ms, run.deadline.remaining_ms / 4)
        if not run.affordable(
            "hyde", cost=min(self.costs.estimate("hyde"), budget) + self.costs.estimate("embed")
        ):
            return vector
        with run.stage("hyde"):
            try:
                passage = self.hyde.passage(
                    run.request.query, subject=run.request.subject, timeout_s=budget / 1000.0
                )
            except LLMError as exc:
                run.degraded.append(f"hyde:{exc.reason}")
                return vector
            hyde_vector = self.embed_query(passage)
            if hyde_vector is None:
                return vector
            run.detail["hyde"] = True
            return blend(vector, np.asarray(hyde_vector, dtype=np.float32))

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
        run.detail["candidates"] = len(out)
        return out

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
        return sorted(los.values(), key=lambda s: (-s.rel, -s.fused, s.view.id))

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

    # --- features and decision ------------------------------------------------------------

    @staticmethod
    def _adjacent(a: NodeView, b: NodeView) -> bool:
        return b.id in a.prereqs or b.id in a.unlocks or a.id in b.prereqs or a.id in b.unlocks

    @staticmethod
    def _distinct(a: NodeView, b: NodeView) -> bool:
        """Distinct topics: no prerequisite edge links the two LOs and they share no neighbour
        (siblings of one prerequisite are one topic family: factoring out a GCF, factoring trinomials)."""
        na = {*a.prereqs, *a.unlocks}
        nb = {*b.prereqs, *b.unlocks}
        return b.id not in na and a.id not in nb and not (na & nb)

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

    # --- answer ---------------------------------------------------------------------------

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

    # --- clarify --------------------------------------------------------------------------

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

    # --- the response ---------------------------------------------------------------------

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
        response, tokens = _fit_budget(parts, budget, self.tokens)
        if decision.can_answer and not parts.bullets:
            # "can_answer" with nothing to teach from is no answer: decline and say why.
            reason = (
                f"token_budget {budget} is too small for one cited fact"
                if had_facts
                else "no cited fact was found for the matched learning objectives"
            )
            run.degraded.append("token_budget:too_small" if had_facts else "facts:none")
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


__all__ = ["CoachEngine", "CoachSettings", "content_family"]
