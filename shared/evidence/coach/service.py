"""The coach behind `EvidenceService`: graph indexing and coach requests with the service's parts.

`EvidenceService` keeps one `CoachRuntime` and delegates to it, so that the backend, embedder,
reranker and settings are the service's own, and the per-stage cost estimates that the
deadline logic uses live as long as the process. The service owns its runtime; the runtime
refers back to it weakly (a strong reference made the two a cycle: a dropped service, with its
backend and model, waited for the cyclic collector instead of going with its last reference).
A profile is handed the runtime's `coach` alone (`CoachRuntime.answering`), never the runtime.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from evidence.coach.budget import StageCosts
from evidence.coach.contract import CoachRequest, CoachResponse
from evidence.config import BackendKind, CoachIntentKind, EmbedderKind, HybridMode, coach_guard
from evidence.graph.load import parse_graph
from evidence.graph.store import GraphIndexReport, existing_node_documents, index_graph

if TYPE_CHECKING:
    import numpy as np

    from evidence.coach.hyde import HydeGenerator
    from evidence.coach.intent import IntentClassifier
    from evidence.config import Settings
    from evidence.embed.base import Embedder
    from evidence.rank.context import ProfileParams
    from evidence.rank.rerank import Reranker
    from evidence.search.base import SearchBackend, SearchReader

log = logging.getLogger(__name__)

#: How an indexed document says "this is a knowledge graph" (API metadata, S3 `x-amz-meta-kind`).
GRAPH_KIND = "graph"


def is_graph(metadata: Mapping[str, Any]) -> bool:
    return str(metadata.get("kind", "")).strip().lower() == GRAPH_KIND


class ServiceParts(Protocol):
    """What the coach uses of `EvidenceService` (the service layer sits above this one)."""

    settings: Settings

    @property
    def backend(self) -> SearchBackend: ...

    @property
    def embedder(self) -> Embedder: ...

    def document_embedder(self, index: str) -> Embedder: ...

    @property
    def reranker(self) -> Reranker | None: ...

    def query_vector(self, index: str, text: str) -> np.ndarray | None: ...


class CoachAnswering(Protocol):
    """What a profile may use of the coach's runtime: answering one request through the view it
    is handed. Not the runtime itself, whose `service` holds the unfiltered backend (graph
    writes and warm-ups go through it, never a request)."""

    def coach(
        self, index: str, request: CoachRequest, *, guardrail: ProfileParams, backend: SearchReader
    ) -> CoachResponse: ...


class _Answering:
    """A runtime's `coach` and nothing else of it: no attribute of this leads to the runtime, whose
    service holds the unfiltered backend (a closure's cell does: Python is no sandbox, as
    `profiles.ProfileServices` says)."""

    __slots__ = ("_coach",)

    def __init__(self, coach: Callable[..., CoachResponse]) -> None:
        self._coach = coach

    def coach(
        self, index: str, request: CoachRequest, *, guardrail: ProfileParams, backend: SearchReader
    ) -> CoachResponse:
        return self._coach(index, request, guardrail=guardrail, backend=backend)


class CoachRuntime:
    def __init__(self, service: ServiceParts) -> None:
        # Weakly: the service owns this runtime (`EvidenceService.coach_runtime`).
        self._service = weakref.ref(service)
        self.costs = StageCosts()
        self._lock = threading.Lock()
        self._llm_built = False
        self._intent: IntentClassifier | None = None
        self._hyde: HydeGenerator | None = None
        self._warm_lock = threading.Lock()
        self._warmed = False
        self._warm_indexes: set[str] = set()

    @property
    def service(self) -> ServiceParts:
        service = self._service()
        if service is None:
            raise ReferenceError("the coach runtime outlived the service it belongs to")
        return service

    def answering(self) -> CoachAnswering:
        """What a profile may use of this runtime: `coach` through the view it is handed."""

        def coach(
            index: str, request: CoachRequest, *, guardrail: ProfileParams, backend: SearchReader
        ) -> CoachResponse:
            return self.coach(index, request, guardrail=guardrail, backend=backend)

        return _Answering(coach)

    def warm(self, index: str | None = None) -> None:
        """Load what a coach request needs before any request's time budget starts.

        Once per process: the local embedding model, the WordPiece tokenizer and the analyzer.
        Once per index: a throwaway request that opens the index's search structures and reads
        its sentences. Its timings go to a discarded `StageCosts`, so a cold start never inflates
        the estimates that decide which stages a real request can afford. Failures are left to
        the real request (which reports them); the warm-up itself never raises.
        """
        if not self._warmed:
            with self._warm_lock:
                if not self._warmed:
                    self._warm_process()
                    self._warmed = True
        if index is not None and index not in self._warm_indexes:
            with self._warm_lock:
                if index not in self._warm_indexes:
                    self._warm_index(index)
                    self._warm_indexes.add(index)

    def _warm_process(self) -> None:
        from evidence.coach.budget import TokenCounter
        from evidence.search.analysis import get_analyzer

        try:
            if self.service.settings.embedder is EmbedderKind.MINILM:  # a remote model has nothing to load
                self.service.embedder.embed_query("warm up")
            TokenCounter().count("warm up")
            get_analyzer().analyze("warm up")
        except Exception as exc:  # the first request reports the real failure
            log.warning("coach warm-up failed: %s", exc)

    def _warm_index(self, index: str) -> None:
        from evidence.coach.engine import CoachEngine
        from evidence.errors import EvidenceError

        svc = self.service
        # A remote embedder (Titan) has no model to load: the warm-up never calls it.
        local = svc.settings.embedder is EmbedderKind.MINILM
        engine = CoachEngine(
            svc.backend,
            embed_query=(lambda text: svc.query_vector(index, text)) if local else None,
            costs=StageCosts(),
        )
        try:
            engine.run(index, CoachRequest(query="warm up"))
        except EvidenceError:
            pass  # no such index (yet), or no graph: nothing to warm
        except Exception as exc:
            log.warning("coach warm-up of %s failed: %s", index, exc)

    def _llm(self) -> tuple[IntentClassifier | None, HydeGenerator | None]:
        """The optional Bedrock steps the settings ask for, built once."""
        if not self._llm_built:
            with self._lock:
                if not self._llm_built:
                    s = self.service.settings
                    if s.coach_intent is CoachIntentKind.BEDROCK:
                        from evidence.coach.intent import BedrockIntentClassifier
                        from evidence.coach.llm import ConverseClient

                        self._intent = BedrockIntentClassifier(
                            ConverseClient(
                                region=s.aws_region,
                                model_id=s.bedrock_coach_model,
                                timeout_s=s.coach_intent_budget_ms / 1000.0,
                            )
                        )
                    if s.coach_hyde:
                        from evidence.coach.hyde import HydeGenerator
                        from evidence.coach.llm import ConverseClient

                        self._hyde = HydeGenerator(
                            ConverseClient(
                                region=s.aws_region,
                                model_id=s.bedrock_coach_model,
                                timeout_s=s.coach_hyde_budget_ms / 1000.0,
                            )
                        )
                    self._llm_built = True
        return self._intent, self._hyde

    def coach(
        self, index: str, request: CoachRequest, *, guardrail: ProfileParams, backend: SearchReader
    ) -> CoachResponse:
        """`guardrail`: the knobs of the guardrail every profile shares (`min_similarity`,
        `max_chars`): the `coach` profile's, with this deployment's defaults (the service's one
        path resolves them). `backend`: the request's view of the index (`search.scoped`), so a
        coach request reads within its filters as every profile does, not the service's own."""
        from evidence.coach.engine import CoachEngine, CoachSettings

        # Model loading and cold index structures are never charged to a request's budget.
        self.warm(index)
        svc = self.service
        s = svc.settings
        intent, hyde = self._llm()
        engine = CoachEngine(
            backend,
            embed_query=lambda text: svc.query_vector(index, text),
            reranker=svc.reranker,
            intent_classifier=intent,
            hyde=hyde,
            costs=self.costs,
            settings=CoachSettings(
                intent_budget_ms=float(s.coach_intent_budget_ms),
                hyde_budget_ms=float(s.coach_hyde_budget_ms),
                guard=coach_guard(s, index),
                min_similarity=guardrail.min_similarity,
                max_chars=guardrail.max_chars,
            ),
            server_hybrid=s.backend is BackendKind.OPENSEARCH
            and s.opensearch_hybrid_mode is HybridMode.SERVER,
        )
        return engine.run(index, request)

    def index_graph(
        self,
        index: str,
        data: bytes,
        *,
        filename: str,
        graph_id: str,
        metadata: Mapping[str, Any] | None = None,
        embed: bool = True,
    ) -> GraphIndexReport:
        """Validate, then write or replace the graph (GraphValidationError: nothing written)."""
        graph = parse_graph(data, filename=filename)
        embedder = self.service.document_embedder(index) if embed else None
        return index_graph(
            self.service.backend,
            embedder,
            index,
            graph,
            graph_id=graph_id,
            source=filename,
            metadata=metadata,
        )

    def delete_graph(self, index: str, graph_id: str) -> int:
        """Remove every node of a graph; the number of chunks removed (0 if it is not there)."""
        backend = self.service.backend
        removed = 0
        for doc_id in sorted(existing_node_documents(backend, index, graph_id)):
            removed += backend.delete_document(index, doc_id)
        return removed
