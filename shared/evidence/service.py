"""The service: what handlers, the CLI and the local server call.

index (`evidence.indexing`) / delete / retrieve / plan / format, and the coach (knowledge graphs,
seed 004). Every retrieval, the coach's included, runs one path (`run_profile`) that asks the
request's profile (`evidence.profiles`) for each step that can differ.
Dependencies (backend, embedder, reranker) are built lazily from settings on first use, or
injected by tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from evidence.config import BackendKind, HybridMode, Settings, get_settings
from evidence.embed.factory import build_embedder, drop_store_cache, with_store_cache
from evidence.errors import (
    BadRequestError,
    DocumentNotFoundError,
    EmbedderMismatchError,
)
from evidence.indexing import (
    LEXICAL_ONLY,
    Indexing,
    IndexProgress,
    IndexReport,
    check_index_name,
    content_document_id,
)
from evidence.model import (
    AnswerTelemetry,
    DeleteDocumentResponse,
    FormatRequest,
    FormatResponse,
    IndexSummary,
    ListIndexesResponse,
    Plan,
    PlanRequest,
    RetrieveRequest,
    RetrieveResponse,
    StageTelemetry,
    Telemetry,
)
from evidence.records import ChunkKind

if TYPE_CHECKING:
    import numpy as np

    from evidence.coach.contract import CoachRequest, CoachResponse
    from evidence.coach.service import CoachRuntime
    from evidence.embed.base import Embedder
    from evidence.format.evidence import EvidenceDocument
    from evidence.profiles import Extras, ProfileEnv
    from evidence.rank.candidate import Candidate
    from evidence.rank.confidence import AnswerSignal
    from evidence.rank.pipeline import RankOutcome
    from evidence.rank.rerank import Reranker
    from evidence.search.base import DocumentInfo, Filters, IndexInfo, SearchBackend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileRun:
    """One request's run through its profile (`EvidenceService.run_profile`)."""

    plan: Plan
    outcome: RankOutcome
    signal: AnswerSignal
    withheld: bool
    kept: list[Candidate]
    evidence: EvidenceDocument
    extras: Extras
    degraded: list[str]
    ms: float


def build_backend(settings: Settings) -> SearchBackend:
    from evidence.search.factory import get_backend

    return get_backend(settings)


class EvidenceService(Indexing):
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: SearchBackend | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self._backend = backend
        self._embedder = embedder
        #: Whether `_embedder` is this service's own (built from settings): its cache files are
        #: closed with the service; an embedder passed in belongs to the caller.
        self._own_embedder = False
        self._reranker = reranker
        self._reranker_built = reranker is not None
        self._lock = threading.Lock()
        self._coach: CoachRuntime | None = None

    # --- dependencies, built on first use -------------------------------------------------

    @property
    def backend(self) -> SearchBackend:
        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    self._backend = build_backend(self.settings)
        return self._backend

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = with_store_cache(self.settings, build_embedder(self.settings))
                    self._own_embedder = True
        return self._embedder

    def document_embedder(self, index: str) -> Embedder:
        """The embedder for `index`'s documents: its cache reads and writes `index`'s vectors only,
        unless EVIDENCE_EMBEDDING_CACHE_SCOPE=shared."""
        from evidence.config import EmbeddingCacheScope
        from evidence.embed.cache import CachedEmbedder

        emb = self.embedder
        if (
            isinstance(emb, CachedEmbedder)
            and self.settings.embedding_cache_scope is EmbeddingCacheScope.INDEX
        ):
            return emb.scoped(f"index:{index}")
        return emb

    @property
    def reranker(self) -> Reranker | None:
        if not self._reranker_built:
            with self._lock:
                if not self._reranker_built:
                    from evidence.rank.rerank import build_reranker

                    self._reranker = build_reranker(self.settings)
                    self._reranker_built = True
        return self._reranker

    @property
    def coach_runtime(self) -> CoachRuntime:
        if self._coach is None:
            with self._lock:
                if self._coach is None:
                    from evidence.coach.service import CoachRuntime

                    self._coach = CoachRuntime(self)
        return self._coach

    def warm(self) -> None:
        """Load the coach's models and the default index before the first request (the Lambda
        handler before its first event, `evidence serve` at start): docs/coach.md#cold-start."""
        self.coach_runtime.warm(self.settings.default_index)

    def coach(self, index: str, request: CoachRequest) -> CoachResponse:
        """Seed 004's coach request against a knowledge-graph index (docs/coach.md): the `coach`
        profile on the one path of every profile, its response the profile's extras."""
        from evidence.coach.contract import CoachResponse

        run = self.run_profile(
            index, RetrieveRequest.model_construct(query=request.query, profile="coach"), payload=request
        )
        response = run.extras.response
        if not isinstance(response, CoachResponse):
            raise TypeError("the coach profile returned no coach response")
        return response

    def delete_document(self, index: str, document_id: str) -> DeleteDocumentResponse:
        check_index_name(index)
        self.backend.get_index(index)
        n = self.backend.delete_document(index, document_id)
        if n == 0:
            # A knowledge graph is one document to its caller, stored as one document per node.
            n = self.coach_runtime.delete_graph(index, document_id)
        if n == 0:
            raise DocumentNotFoundError(
                f"document {document_id!r} is not in index {index!r}", field="document_id"
            )
        return DeleteDocumentResponse(index=index, document_id=document_id, deleted_chunks=n)

    def list_indexes(self) -> list[IndexInfo]:
        return self.backend.list_indexes()

    def list_documents(self, index: str) -> list[DocumentInfo]:
        """The documents of `index` with their passage and span counts (`evidence list --index`)."""
        from evidence.search.base import DocumentListing

        check_index_name(index)
        backend = self.backend
        if not isinstance(backend, DocumentListing):
            raise BadRequestError(
                f"the {self.settings.backend.value} backend cannot list documents; "
                "list them on the embedded store",
                field="index",
            )
        return backend.list_documents(index)

    def delete_index(self, index: str) -> IndexInfo:
        """Delete a whole index; returns what it held."""
        check_index_name(index)
        info = self.backend.get_index(index)
        self.backend.delete_index(index)
        from evidence.embed.cache import CachedEmbedder

        if isinstance(self._embedder, CachedEmbedder):
            self._embedder.cache.drop_scope(f"index:{index}")
        else:
            drop_store_cache(self.settings, f"index:{index}")
        return info

    def index_summaries(
        self, visible: Callable[[Iterable[str]], list[str]] | None = None
    ) -> ListIndexesResponse:
        """`GET /v1/indexes`: every index, or those `visible` keeps (the access policy's filter)."""
        infos = {i.name: i for i in self.backend.list_indexes()}
        names = sorted(infos) if visible is None else sorted(visible(infos))
        return ListIndexesResponse(
            indexes=[
                IndexSummary(name=n, documents=infos[n].documents, chunks=infos[n].chunks) for n in names
            ]
        )

    # --- querying -------------------------------------------------------------------------

    def query_vector(self, index: str, text: str) -> np.ndarray | None:
        info = self.backend.get_index(index)
        if info.embedder_id in ("", LEXICAL_ONLY) or info.dimension == 0:
            return None
        emb = self.embedder
        if info.embedder_id != emb.model_id or info.dimension != emb.dimension:
            raise EmbedderMismatchError(
                f"index {index!r} was built with {info.embedder_id} ({info.dimension} dims) but this "
                f"service embeds queries with {emb.model_id} ({emb.dimension} dims); set "
                "EVIDENCE_EMBEDDER to match the index",
                field="index",
            )
        return emb.embed_query(text)

    def plan(self, request: PlanRequest) -> Plan:
        return self.plan_with_markers(request)[0]

    def plan_with_markers(self, request: PlanRequest, *, index: str | None = None) -> tuple[Plan, list[str]]:
        """The plan and any degradation markers (an LLM planner that fell back to the rules).
        `/v1/plan` plans any profile name (its schema has no enum): an unknown one gets the rules."""
        from evidence.profiles import PipelinePlugin, get_plugin, unknown_profile

        request = _clean_questions(request)

        plugin = PipelinePlugin() if unknown_profile(request.profile) else get_plugin(request.profile)
        return plugin.plan(request, self._env(index, request.filters))

    def _env(self, index: str | None, filters: Filters | None, **more: Any) -> ProfileEnv:
        """What a profile is given: the backend seen through the request's `filters` (a tenant's,
        a caller's metadata filter), so every read of the request stays within them
        (`search.scoped`), and the rest of the request's environment."""
        from evidence.profiles import ProfileEnv, ProfileServices
        from evidence.search.scoped import bind_filters

        # Closures, not the service: no attribute the profile is given is the backend itself (nor a
        # bound method, whose `__self__` is the service), nor the coach's runtime (whose service
        # holds the backend): the profile gets its `coach` alone.
        services = ProfileServices(
            document_embedder=lambda name: self.document_embedder(name),  # noqa: PLW0108
            coach_runtime=lambda: self.coach_runtime.answering(),  # noqa: PLW0108
        )
        return ProfileEnv(
            backend=bind_filters(self.backend, filters),
            settings=self.settings,
            index=index,
            services=services,
            **more,
        )

    def retrieve(self, index: str, request: RetrieveRequest) -> RetrieveResponse:
        """Run the request's profile and build the response from its outcome."""
        from evidence.format.hits import to_followups, to_hits
        from evidence.plan.conversation import with_conversation

        # A follow-up gains what it refers back to (docs/api.md, conversation).
        run = self.run_profile(index, with_conversation(request))
        return RetrieveResponse(
            hits=to_hits(run.kept, explain=request.explain),
            followups=to_followups(run.outcome.followups),
            evidence_xml=run.evidence.xml,
            valid_indexes=run.evidence.valid_indexes,
            plan=run.plan,
            telemetry=Telemetry(
                stages=[
                    StageTelemetry(
                        name=r.name,
                        candidates_in=r.candidates_in,
                        candidates_out=r.candidates_out,
                        ms=r.ms,
                        detail=dict(r.detail) if r.detail else None,
                    )
                    for r in run.outcome.stages
                ],
                path_used=run.extras.path_used,
                degraded=run.degraded,
                total_ms=run.ms,
                answer=AnswerTelemetry(
                    basis=run.signal.basis, features=run.signal.features, withheld=run.withheld
                ),
            ),
            can_answer=run.signal.can_answer,
            confidence=run.signal.confidence,
            needs_clarification=run.extras.needs_clarification,
        )

    def run_profile(self, index: str, request: RetrieveRequest, *, payload: Any = None) -> ProfileRun:
        """The one path of every request, whatever its profile: plan, scope, stages, answer signal,
        withhold floor, span check, evidence bundle, extras; each step the profile's (its plug-in,
        `evidence.profiles`). `payload`: the request of the profile's own endpoint (the coach's)."""
        from evidence.profiles import get_plugin
        from evidence.rank.context import RankContext
        from evidence.rank.guardrail import withhold
        from evidence.verbatim.check import verify_spans

        check_index_name(index)
        started = time.perf_counter()
        # Read as the documents were (format characters out): plan, lexical, dense, cascade alike.
        request = _clean_questions(request)
        info = self.backend.get_index(index)
        plugin = get_plugin(request.profile)
        env = self._env(
            index, request.filters, embedder_id=info.embedder_id, reranker=self.reranker, payload=payload
        )
        plan, plan_degraded = plugin.plan(
            PlanRequest(
                query=request.query,
                criterion_question=request.criterion_question,
                profile=request.profile,
                filters=request.filters,
            ),
            env,
        )
        plan = plugin.scope(request.query, plan, env)
        profile = plugin.pipeline(env)
        params = profile.params({**self._deployment_defaults(profile.name), **request.overrides()})
        criterion = request.criterion_question or (request.query if plan.criterion_hash else None)
        s = self.settings
        ctx = RankContext(
            index=index,
            query=request.query,
            query_vector=None,
            criterion_question=criterion,
            criterion_hash=plan.criterion_hash,
            params=params,
            filters=plan.filters or None,
            explain=request.explain,
            backend=env.backend,
            reranker=env.reranker,
            server_hybrid=s.backend is BackendKind.OPENSEARCH
            and s.opensearch_hybrid_mode is HybridMode.SERVER,
            plan=plan,
        )
        # The first stage's lexical leg runs while the query is embedded (rank/ahead.py).
        ahead = profile.start(ctx) if profile.embeds_query else None
        try:
            env.query_vector = self.query_vector(index, request.query) if profile.embeds_query else None
            outcome = profile.run(replace(ctx, query_vector=env.query_vector, ahead=ahead))
        finally:
            if ahead is not None:
                ahead.abandon()  # used already, or not needed after an error: nothing left running
        env.degraded = [*plan_degraded, *outcome.degraded]
        signal = plugin.answer_signal(request.query, outcome, env)
        # Off unless a request or deployment asks for it: defaults never change which hits are
        # returned (seed 003), `can_answer` and `confidence` say the rest.
        kept, withheld = withhold(params, signal, outcome.hits)
        # The verbatim guarantee: no span leaves unless it is its source's text at its offsets.
        # Read from the backend itself: a span's covering passages may lie outside a chunk-level
        # filter of the request (`section`), and the check returns nothing but pass or fail.
        verify_spans(self.backend, index, [c.chunk for c in kept if c.chunk.kind is ChunkKind.SPAN])
        return ProfileRun(
            plan=plan,
            outcome=outcome,
            signal=signal,
            withheld=withheld,
            kept=kept,
            evidence=plugin.bundle(kept, outcome.followups),
            extras=plugin.extras(outcome),
            degraded=env.degraded,
            ms=round((time.perf_counter() - started) * 1000.0, 3),
        )

    def _deployment_defaults(self, profile: str) -> dict[str, Any]:
        """Knob defaults this deployment sets (EVIDENCE_MIN_SIMILARITY, …, PROFILE_DEFAULTS)."""
        from evidence.rank.guardrail import deployment_defaults

        return deployment_defaults(self.settings, profile)

    def format(self, request: FormatRequest) -> FormatResponse:
        from evidence.format import format_request

        return format_request(request)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
        from evidence.embed.cache import CachedEmbedder

        if self._own_embedder and isinstance(self._embedder, CachedEmbedder):
            # its SQLite files (vectors, word pieces); the next use builds a new one
            with self._lock:
                self._embedder.cache.close()
                self._embedder, self._own_embedder = None, False


# IndexProgress, IndexReport and content_document_id live in `evidence.indexing`; callers
# import them from here, where they were first.
__all__ = [
    "LEXICAL_ONLY",
    "EvidenceService",
    "IndexProgress",
    "IndexReport",
    "ProfileRun",
    "build_backend",
    "build_embedder",
    "check_index_name",
    "content_document_id",
]


_Asked = TypeVar("_Asked", RetrieveRequest, PlanRequest)


def _clean_questions(request: _Asked) -> _Asked:
    """`request` with its query and criterion question cleaned of format characters as documents
    are at parse time (`ingest/parsers/invisible.py`); the same object when they have none.
    `plan.query`, the effective query (docs/api.md), shows the cleaned text."""
    from evidence.ingest.parsers.invisible import clean_question

    query, criterion = clean_question(request.query), clean_question(request.criterion_question)
    if not (query or "").strip():
        query = request.query  # nothing but format characters: left as sent (it matches nothing)
    if query == request.query and criterion == request.criterion_question:
        return request
    return request.model_copy(update={"query": query, "criterion_question": criterion})
