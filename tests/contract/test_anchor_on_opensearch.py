"""The `default` profile's focus span anchor on OpenSearch (osmem-server) gives the embedded store's
evidence (docs/opensearch.md#anchor-vectors).

The same documents are indexed through the service into an embedded store (late span vectors in
its embedding cache) and into osmem (the same vectors kept on the passage documents,
`anchor_vectors`), both with the real MiniLM under `EVIDENCE_EMBED_SPANS_AT_INDEX=late`, and the
same questions asked of `default`. osmem has no k-NN and its BM25 is bleve's, not Lucene's, so
the OpenSearch backend here answers the *ranking* reads (lexical, dense, term counts, document
counts) from the embedded store holding the same documents, and everything else from osmem: the
spans the anchor reads (`lookup`), the anchor's own read of the hits' `anchor_vectors`, the
index, the markers and every write. The hits are then the same by construction, and the evidence
can differ only through what the anchor reads from OpenSearch. Every body sent to osmem is
validated against the API spec, as in the contract suite.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from evidence.config import HybridMode, Settings
from evidence.demo import DATA
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.minilm import MiniLMEmbedder
from evidence.model import RetrieveRequest
from evidence.records import ChunkKind, SearchHit
from evidence.search import opensearch_bodies as bodies
from evidence.search.base import Filters, Vector
from evidence.search.embedded import EmbeddedBackend
from evidence.search.opensearch import OpenSearchBackend
from evidence.service import EvidenceService
from tests.contract.conftest import _recording_client
from tests.prerequisites import missing
from tests.unit.search.opensearch.spec_cache import SPEC_HINT, load_spec, validate_recorded
from tests.unit.search.opensearch.spec_validator import parse_version

INDEX = "label"
DOCS = DATA / "label"
#: `default` questions whose evidence the anchor moves on this label (70 of its 80 QA questions do).
QUESTIONS = (
    "Does Lipravex interact with warfarin?",
    "What is the maximum Lipravex dose with cyclosporine?",
    "Can the Lipravex tablet be crushed or split?",
    "Why is the Lipravex dose reduced in patients with severe renal impairment?",
    "What was the hazard ratio in the FERLO-CV trial?",
    "How many tablets are in a Lipravex bottle?",
)


def _settings(**more: Any) -> Settings:
    return Settings(embed_spans_at_index="late", focus_span_anchor=True, **more)


class RankedByEmbedded(OpenSearchBackend):
    """OpenSearch (osmem) for every read and write but the ranking ones, which osmem cannot give
    as OpenSearch does (no k-NN; bleve's BM25): those come from an embedded store holding the same
    documents, so both services rank the same hits."""

    def __init__(self, *args: Any, ranking: EmbeddedBackend, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ranking = ranking

    def lexical(self, index: str, text: str, **kw: Any) -> list[SearchHit]:  # type: ignore[override]
        return self.ranking.lexical(index, text, **kw)

    def dense(self, index: str, vector: Vector, **kw: Any) -> list[SearchHit]:  # type: ignore[override]
        return self.ranking.dense(index, vector, **kw)

    def term_counts(self, index: str, texts: Sequence[str], **kw: Any) -> dict[str, int]:  # type: ignore[override]
        return self.ranking.term_counts(index, texts, **kw)

    def document_count(self, index: str, *, filters: Filters | None = None) -> int:
        return self.ranking.document_count(index, filters=filters)

    def initialisms(self, index: str) -> Any:
        return self.ranking.initialisms(index)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def embedded(tmp_path: Path, minilm: MiniLMEmbedder) -> Iterator[EvidenceService]:
    store = tmp_path / "embedded"
    cache = CachedEmbedder(minilm, EmbeddingCache(store / "embeddings.sqlite3"))
    service = EvidenceService(_settings(store_dir=store), embedder=cache)
    assert not service.index_paths(INDEX, [DOCS / "lipravex.md"]).failed
    yield service
    service.close()


@pytest.fixture
def log() -> list[tuple[str, str, Any]]:
    return []


@pytest.fixture
def opensearch(  # noqa: PLR0917 - pytest fixtures arrive as arguments
    tmp_path: Path,
    minilm: MiniLMEmbedder,
    embedded: EvidenceService,
    osmem_clone: Any,
    osmem_server: Any,
    log: list[tuple[str, str, Any]],
) -> Iterator[tuple[EvidenceService, RankedByEmbedded]]:
    settings = _settings(
        store_dir=tmp_path / "opensearch",
        backend="opensearch",
        opensearch_endpoint=osmem_clone.url,
        opensearch_hybrid_mode=HybridMode.CLIENT,
    )
    ranking = embedded.backend
    assert isinstance(ranking, EmbeddedBackend)
    backend = RankedByEmbedded(
        settings, client=_recording_client(osmem_clone.url, log), max_retries=0, ranking=ranking
    )
    service = EvidenceService(settings, backend=backend, embedder=minilm)
    assert not service.index_paths(INDEX, [DOCS / "lipravex.md"]).failed
    yield service, backend
    backend.close()
    spec = load_spec()
    if spec is None:  # pragma: no cover - the spec ships next to the repo
        missing("opensearch-api-spec", SPEC_HINT)
    version = parse_version(osmem_server.version)
    checked = 0
    for method, url, body in log:
        if body is not None:
            validate_recorded(spec, method, url, body, version=version)
            checked += 1
    assert checked > 0


def _evidence(service: EvidenceService, question: str) -> tuple[Any, ...]:
    r = service.retrieve(INDEX, RetrieveRequest(query=question, profile="default"))
    hits = [(h.chunk_id, h.citation.char_start, h.citation.char_end, h.text) for h in r.hits]
    return (tuple(hits), r.evidence_xml, r.can_answer)


def test_default_evidence_on_opensearch_is_the_embedded_stores(
    embedded: EvidenceService,
    opensearch: tuple[EvidenceService, RankedByEmbedded],
    log: list[tuple[str, str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service, backend = opensearch
    # Indexing kept the vectors with the passages (and only there).
    written = [
        line
        for method, url, body in log
        if method == "POST" and "_bulk" in url
        for line in (body if isinstance(body, list) else [])
        if isinstance(line, dict) and "chunk_id" in line
    ]
    assert any(bodies.ANCHOR_FIELD in line for line in written) or _bulk_has_anchor(log)
    passages = [h.chunk for h in backend.lookup(INDEX, {}, limit=1000, kind=ChunkKind.PASSAGE)]
    kept = backend.anchor_vectors(INDEX, passages)
    assert kept and all(k in {p.chunk_id for p in passages} for k in kept)
    want = {q: _evidence(embedded, q) for q in QUESTIONS}
    got = {q: _evidence(service, q) for q in QUESTIONS}
    assert got == want
    # Without the vectors kept on OpenSearch (the code before them, or an index written before),
    # the anchor reads nothing there and the evidence differs for some of these questions.
    monkeypatch.setattr(RankedByEmbedded, "anchor_vectors", lambda *_a, **_k: {})
    off = {q: _evidence(service, q) for q in QUESTIONS}
    assert off != want


def _bulk_has_anchor(log: list[tuple[str, str, Any]]) -> bool:
    """Whether some bulk request carried `anchor_vectors` (its body as the client sent it)."""
    for method, url, body in log:
        if method == "POST" and "_bulk" in url and body is not None:
            text = body if isinstance(body, str | bytes) else str(body)
            if (bodies.ANCHOR_FIELD.encode() if isinstance(text, bytes) else bodies.ANCHOR_FIELD) in text:
                return True
    return False
