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

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.config import HybridMode, Settings
from evidence.demo import DATA
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.late import late_key
from evidence.embed.minilm import MiniLMEmbedder
from evidence.model import RetrieveRequest
from evidence.records import ChunkKind, SearchHit
from evidence.search import opensearch_bodies as bodies
from evidence.search.base import Filters, Vector
from evidence.search.embedded import EmbeddedBackend
from evidence.search.opensearch import OpenSearchBackend
from evidence.search.opensearch_responses import chunk_from_source
from evidence.service import EvidenceService
from evidence.verbatim.spans import anchor_spans
from tests.contract.conftest import _recording_client
from tests.unit.search.opensearch.spec_cache import validate_sent
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
        #: How many `dense` reads asked to be light (the focus span anchor's statistics).
        self.light_reads = 0

    def lexical(self, index: str, text: str, **kw: Any) -> list[SearchHit]:
        return self.ranking.lexical(index, text, **kw)

    def dense(self, index: str, vector: Vector, **kw: Any) -> list[SearchHit]:
        """A light read (`light=True`) answers what OpenSearch returns to its body
        (`knn_body(..., light=True)`): each hit's `_source` cut to `LIGHT_FIELDS`."""
        hits = self.ranking.dense(index, vector, **kw)
        if not kw.get("light"):
            return hits
        self.light_reads += 1
        return [
            SearchHit(
                chunk=chunk_from_source(
                    {
                        k: v
                        for k, v in bodies.chunk_source(h.chunk, "", None).items()
                        if k in bodies.LIGHT_FIELDS
                    }
                ),
                score=h.score,
                dense=h.dense,
            )
            for h in hits
        ]

    def term_counts(self, index: str, texts: Sequence[str], **kw: Any) -> dict[str, int]:
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


def _opensearch_service(
    tmp_path: Path, minilm: MiniLMEmbedder, embedded: EvidenceService, url: str, log: list[Any]
) -> tuple[EvidenceService, RankedByEmbedded]:
    settings = _settings(
        store_dir=tmp_path / "opensearch",
        backend="opensearch",
        opensearch_endpoint=url,
        opensearch_hybrid_mode=HybridMode.CLIENT,
    )
    ranking = embedded.backend
    assert isinstance(ranking, EmbeddedBackend)
    backend = RankedByEmbedded(settings, client=_recording_client(url, log), max_retries=0, ranking=ranking)
    return EvidenceService(settings, backend=backend, embedder=minilm), backend


#: A fresh OpenSearch service over osmem (one process's), ranking reads answered by `embedded`.
OpenSearchService = Callable[[], tuple[EvidenceService, RankedByEmbedded]]


@pytest.fixture
def opensearch(  # noqa: PLR0917 - fixtures
    tmp_path: Path,
    minilm: MiniLMEmbedder,
    embedded: EvidenceService,
    osmem_clone: Any,
    log: list[tuple[str, str, Any]],
    checked: None,
) -> OpenSearchService:
    """`_opensearch_service` on the test's osmem clone, every body it sends recorded and checked
    against the API spec after the test (`checked`)."""
    return lambda: _opensearch_service(tmp_path, minilm, embedded, osmem_clone.url, log)


@pytest.fixture
def checked(osmem_server: Any, log: list[tuple[str, str, Any]]) -> Iterator[None]:
    """After the test: every body sent to osmem validated against the API spec."""
    yield
    validate_sent(
        [(method, url, body) for method, url, body in log if body is not None],
        version=parse_version(osmem_server.version),
    )


def _evidence(service: EvidenceService, question: str) -> tuple[Any, ...]:
    r = service.retrieve(INDEX, RetrieveRequest(query=question, profile="default"))
    hits = [(h.chunk_id, h.citation.char_start, h.citation.char_end, h.text) for h in r.hits]
    return (tuple(hits), r.evidence_xml, r.can_answer)


def _anchor_off(embedded: EvidenceService) -> EvidenceService:
    """The embedded store's service with the anchor off (what a store with no vectors gives)."""
    settings = embedded.settings.model_copy(update={"focus_span_anchor": False})
    return EvidenceService(settings, backend=embedded.backend, embedder=embedded.embedder)


def test_default_evidence_on_opensearch_is_the_embedded_stores(
    embedded: EvidenceService, opensearch: OpenSearchService
) -> None:
    service, backend = opensearch()
    assert not service.index_paths(INDEX, [DOCS / "lipravex.md"]).failed
    want = {q: _evidence(embedded, q) for q in QUESTIONS}
    got = {q: _evidence(service, q) for q in QUESTIONS}
    assert got == want
    # The anchor's k-NN read over the hits' documents was light (ids and offsets, no text).
    assert backend.light_reads >= len(QUESTIONS)
    # The questions are ones the anchor moves: without it the evidence differs.
    assert {q: _evidence(_anchor_off(embedded), q) for q in QUESTIONS} != want
    # Indexing kept each span's late vector once, the embedded cache's rounded to float16
    # (`opensearch_bodies.ANCHOR_DTYPE`), and each kept heading's vector so too.
    passages = [h.chunk for h in backend.lookup(INDEX, {}, limit=1000, kind=ChunkKind.PASSAGE)]
    spans = [h.chunk for h in backend.lookup(INDEX, {}, limit=5000, kind=ChunkKind.SPAN)]
    kept = backend.anchor_vectors(INDEX, passages)
    assert kept and set(kept) <= {p.chunk_id for p in passages}
    stored = [(a.document_id, q, v) for a in kept.values() for q, v in a.spans.items()]
    assert len(stored) == len({(d, q) for d, q, _ in stored})
    cache = embedded.document_embedder(INDEX)
    assert isinstance(cache, CachedEmbedder)
    by_seq = {(c.document_id, c.sequence): c for c in spans}
    hashes = {d: embedded.backend.document_hash(INDEX, d) or "" for d, _, _ in stored}
    cached = cache.cached_late([late_key(by_seq[(d, q)], hashes[d]) for d, q, _ in stored])
    assert all(c is not None and _f16(c) == v.tobytes() for c, (_, _, v) in zip(cached, stored, strict=True))
    anchors = anchor_spans(spans)
    keys = [late_key(c, embedded.backend.document_hash(INDEX, c.document_id) or "") for c in anchors]
    in_cache = sum(v is not None for v in cache.cached_late(keys))
    assert in_cache == len(stored)
    heads = {h: v for a in kept.values() for h, v in a.headings.items()}
    assert heads
    for h, v in zip(heads, cache.cached_documents(list(heads)), strict=True):
        assert v is not None and _f16(v) == heads[h].tobytes()


def _f16(v: Any) -> bytes:
    return bytes(np.asarray(v).astype(np.float16).astype(np.float32).tobytes())


def test_an_index_written_before_keeps_working_without_the_anchor(
    embedded: EvidenceService, opensearch: OpenSearchService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index the code before schema 3 wrote (no `anchor_vectors` mapped or kept) answers
    `default` as before: no error, the anchor reads nothing (the anchor-off evidence). A document
    written again by this code (the field then mapped first) gets the vectors."""
    service, backend = opensearch()
    with monkeypatch.context() as old:
        mappings = bodies.mappings

        def schema_2(*args: Any, **kwargs: Any) -> dict[str, Any]:
            out = mappings(*args, **kwargs)
            del out["properties"][bodies.ANCHOR_FIELD]
            out["_meta"]["evidence_schema"] = 2
            return out

        old.setattr(bodies, "mappings", schema_2)
        old.setattr(type(service), "_late_kept", lambda *_: False)
        assert not service.index_paths(INDEX, [DOCS / "lipravex.md"]).failed
    assert backend._info(INDEX).extra["schema"] == 2
    passages = [h.chunk for h in backend.lookup(INDEX, {}, limit=1000, kind=ChunkKind.PASSAGE)]
    assert backend.anchor_vectors(INDEX, passages) == {}
    off = _anchor_off(embedded)
    for q in QUESTIONS:
        assert _evidence(service, q) == _evidence(off, q)
    # Written again by this code, in a fresh process (its first write puts the mapping).
    (document,) = {p.document_id for p in passages}
    service.delete_document(INDEX, document)
    again, backend = opensearch()
    assert not again.index_paths(INDEX, [DOCS / "lipravex.md"]).failed
    mapping = backend.client.indices.get_mapping(index=INDEX)[INDEX]["mappings"]["properties"]
    assert mapping[bodies.ANCHOR_FIELD].get("enabled") in (False, "false")
    for q in QUESTIONS:
        assert _evidence(again, q) == _evidence(embedded, q)
