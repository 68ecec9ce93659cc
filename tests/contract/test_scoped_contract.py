"""The filter-bound view (`search.scoped`) on every adapter: each read stays within the bound
filters, a read's own filters narrow within them, and the view claims exactly the backend's
hybrid capability (the semantics themselves: `tests/unit/search/test_scoped.py`)."""

from __future__ import annotations

import numpy as np
import pytest

from evidence.records import ChunkKind, SearchHit
from evidence.search.base import HybridSearch, SearchBackend
from evidence.search.scoped import bind_filters
from tests.contract.corpus import DIM, EMBEDDER, axis, corpus, vectors_for

INDEX = "scoped-idx"
#: The questionnaire's documents, as a tenant's filter would bound them.
TC_FILES = {"type": "tc_files"}


@pytest.fixture
def loaded(backend: SearchBackend) -> SearchBackend:
    backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    backend.upsert(INDEX, docs, vectors_for(docs))
    return backend


def _ids(hits: list[SearchHit]) -> set[str]:
    return {h.chunk.document_id for h in hits}


def test_reads_stay_within_the_bound_filters(loaded: SearchBackend) -> None:
    view = bind_filters(loaded, TC_FILES)
    assert _ids(loaded.lexical(INDEX, "encryption", k=10)) > {"policy"}
    assert _ids(view.lexical(INDEX, "encryption", k=10)) == {"policy"}
    assert _ids(view.lexical(INDEX, "encrypted", k=10, kind=ChunkKind.SPAN)) == {"policy"}
    assert _ids(view.lookup(INDEX, {}, limit=100)) == {"policy", "incident"}
    texts = ["encryption", "customers", "laptops"]
    assert view.term_counts(INDEX, texts, cap=50) == loaded.term_counts(
        INDEX, texts, cap=50, filters=TC_FILES
    )
    assert view.term_counts(INDEX, ["laptops"], cap=50) == {"laptops": 0}


def test_a_reads_own_filters_narrow_and_never_widen(loaded: SearchBackend) -> None:
    view = bind_filters(loaded, TC_FILES)
    assert _ids(view.lookup(INDEX, {"document_id": ["policy", "followup-doc"]})) == {"policy"}
    assert view.lexical(INDEX, "encryption", k=10, filters={"document_id": "followup-doc"}) == []
    assert view.lexical(INDEX, "encryption", k=10, filters={"type": "followup_document"}) == []
    assert _ids(view.lexical(INDEX, "encryption", k=10, filters={"section": "Encryption"})) == {"policy"}


def test_vectors_only_of_chunks_within_the_bound_filters(loaded: SearchBackend) -> None:
    docs = corpus()
    inside, outside = docs[0].chunks[0].chunk_id, docs[4].chunks[0].chunk_id
    assert set(loaded.vectors(INDEX, [inside, outside])) == {inside, outside}
    assert set(bind_filters(loaded, TC_FILES).vectors(INDEX, [inside, outside])) == {inside}


def test_the_view_claims_the_backends_hybrid_capability(loaded: SearchBackend) -> None:
    assert isinstance(bind_filters(loaded, TC_FILES), HybridSearch) is isinstance(loaded, HybridSearch)


@pytest.mark.needs_knn
def test_dense_stays_within_the_bound_filters(loaded: SearchBackend) -> None:
    view = bind_filters(loaded, TC_FILES)
    hits = view.dense(INDEX, axis(0), k=10)
    assert hits and _ids(hits) <= {"policy", "incident"}
    assert view.dense(INDEX, axis(0), k=10, filters={"document_id": "followup-doc"}) == []
    assert np.isfinite([h.score for h in hits]).all()


def test_document_count_reads_within_the_filters(loaded: SearchBackend) -> None:
    """The distinct documents with a chunk within the filters; none: the index's own count."""
    assert loaded.document_count(INDEX) == loaded.get_index(INDEX).documents == len(corpus())
    assert loaded.document_count(INDEX, filters=TC_FILES) == 2
    assert loaded.document_count(INDEX, filters={"type": ["tc_files", "followup_document"]}) == 3
    assert loaded.document_count(INDEX, filters={"document_id": ["policy", "absent"], **TC_FILES}) == 1
    assert loaded.document_count(INDEX, filters={"type": "absent"}) == 0
    view = bind_filters(loaded, TC_FILES)
    assert view.document_count(INDEX) == 2
    assert view.document_count(INDEX, filters={"section": "Encryption"}) == 1
    assert view.document_count(INDEX, filters={"type": "followup_document"}) == 0
