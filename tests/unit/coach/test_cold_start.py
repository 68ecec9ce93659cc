"""Cold start (issue 25 item 2): model loading is never charged to a coach request's budget.

A fresh process used to load the embedding model inside the first request's 1.2 s, which then
skipped graph expansion and compression and returned one bullet. The fake embedder here takes
longer to "load" than the request's whole budget, so the difference is deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from evidence.api import runtime
from evidence.coach.contract import CoachRequest
from evidence.config import Settings
from evidence.graph import index_graph, parse_graph
from evidence.search.embedded import EmbeddedBackend
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, LambdaContext, load_event
from tests.unit.graph.graphkit import sample_bytes

INDEX = "tutor"
#: Longer than the requests' whole budget (1 s), so a load charged to one always shows.
LOAD_S = 1.2


class ColdEmbedder:
    """HashingEmbedder whose first call pays a model load, like MiniLM in a fresh process."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)
        self.model_id = self.inner.model_id
        self.dimension = self.inner.dimension
        self.loaded_at: float | None = None

    def _load(self) -> None:
        if self.loaded_at is None:
            time.sleep(LOAD_S)  # the simulated model load itself, not a wait for something
            self.loaded_at = time.perf_counter()

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self._load()
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self._load()
        return self.inner.embed_documents(texts)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A graph indexed by an earlier process."""
    backend = EmbeddedBackend(tmp_path / "store")
    graph = parse_graph(sample_bytes(), filename="sample.yaml")
    index_graph(backend, HashingEmbedder(64), INDEX, graph, graph_id="sample.yaml")
    backend.close()
    return tmp_path / "store"


@pytest.fixture
def fresh(store: Path) -> Iterator[tuple[EvidenceService, ColdEmbedder]]:
    """A fresh process: a new service whose model is not loaded yet."""
    embedder = ColdEmbedder()
    service = EvidenceService(
        Settings(store_dir=store, default_index=INDEX), backend=EmbeddedBackend(store), embedder=embedder
    )
    yield service, embedder
    service.close()


def test_the_first_request_gets_the_same_bullets_as_the_second(
    fresh: tuple[EvidenceService, ColdEmbedder],
) -> None:
    service, embedder = fresh
    request = CoachRequest.model_validate(
        {"query": "How do I solve a quadratic equation by factoring?", "constraints": {"timeout_ms": 1000}}
    )
    first = service.coach(INDEX, request)
    second = service.coach(INDEX, request)
    assert embedder.loaded_at is not None
    assert first.telemetry.degraded == [] and second.telemetry.degraded == []
    assert first.minimal_context == second.minimal_context and len(first.minimal_context) >= 3
    assert first.model_dump(exclude={"telemetry"}) == second.model_dump(exclude={"telemetry"})


def test_the_retriever_handler_warms_before_its_first_event(
    fresh: tuple[EvidenceService, ColdEmbedder], context: LambdaContext
) -> None:
    from functions.retriever.handler import handler

    service, embedder = fresh
    runtime.configure(service=service, settings=service.settings)
    try:
        handler(load_event("apigw/health"), context)
        assert embedder.loaded_at is not None, "the model is loaded before the first event is handled"
        assert INDEX in service.coach_runtime._warm_indexes
    finally:
        runtime.reset()


@pytest.fixture
def context() -> LambdaContext:
    from evidence.testing import lambda_context

    return lambda_context()
