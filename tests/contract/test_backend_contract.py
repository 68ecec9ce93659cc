"""THE backend contract (docs/architecture.md#ports-and-adapters): every SearchBackend adapter passes these.

Parametrized over adapters by the `backend` fixture (conftest.py). Scores are compared across
backends only where they are comparable: lexical order is checked loosely (osmem's BM25 is
bleve's, not Lucene's), dense cosine exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from evidence.errors import EmbedderMismatchError, IndexNotFoundError
from evidence.records import ChunkKind
from evidence.search.base import DocumentListing, SearchBackend
from tests.contract.corpus import CRITERION_HASH, DIM, EMBEDDER, axis, corpus, edited, vectors_for

INDEX = "contract-idx"
#: A stored vector's cosine against the exact one: float16 components hold ~3 decimal digits.
COSINE_TOLERANCE = 1e-3


@pytest.fixture
def loaded(backend: SearchBackend) -> SearchBackend:
    backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    results = backend.upsert(INDEX, docs, vectors_for(docs))
    assert [r.status for r in results] == ["created"] * len(docs)
    return backend


def _ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.chunk.document_id for h in hits]


# --- index lifecycle ------------------------------------------------------------------------


def test_create_get_list_and_embedder_guard(backend: SearchBackend) -> None:
    info = backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    assert (info.name, info.embedder_id, info.dimension) == (INDEX, EMBEDDER, DIM)
    again = backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    assert again.embedder_id == EMBEDDER
    with pytest.raises(EmbedderMismatchError):
        backend.create_index(INDEX, embedder_id="titan-v2", dimension=1024)
    with pytest.raises(EmbedderMismatchError):
        backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM + 1)
    got = backend.get_index(INDEX)
    assert (got.embedder_id, got.dimension, got.documents, got.chunks) == (EMBEDDER, DIM, 0, 0)
    assert INDEX in [i.name for i in backend.list_indexes()]


def test_missing_index_is_index_not_found(backend: SearchBackend) -> None:
    with pytest.raises(IndexNotFoundError):
        backend.get_index("no-such-index")
    with pytest.raises(IndexNotFoundError):
        backend.lexical("no-such-index", "encryption", k=5)


def test_delete_index(loaded: SearchBackend) -> None:
    loaded.delete_index(INDEX)
    with pytest.raises(IndexNotFoundError):
        loaded.get_index(INDEX)
    assert INDEX not in [i.name for i in loaded.list_indexes()]


# --- upsert / delete ------------------------------------------------------------------------


def test_counts_and_document_hash(loaded: SearchBackend) -> None:
    docs = corpus()
    info = loaded.get_index(INDEX)
    assert info.documents == len(docs)
    assert info.chunks == sum(len(d.chunks) for d in docs)
    assert loaded.document_hash(INDEX, "policy") == docs[0].content_hash
    assert loaded.document_hash(INDEX, "nope") is None


def test_reindex_is_idempotent_and_replaces(loaded: SearchBackend) -> None:
    docs = corpus()
    again = loaded.upsert(INDEX, docs, vectors_for(docs))
    assert {r.status for r in again} == {"unchanged"}
    assert loaded.get_index(INDEX).chunks == sum(len(d.chunks) for d in docs)

    # A new version with fewer chunks: the old ones must not linger.
    new = edited(docs[0], ["Data at rest is encrypted with customer-managed KMS keys."])
    (res,) = loaded.upsert(INDEX, [new], [np.stack([axis(7)])])
    assert (res.status, res.passages, res.spans) == ("updated", 1, 0)
    assert loaded.document_hash(INDEX, "policy") == new.content_hash
    chunks = loaded.lookup(INDEX, {"document_id": "policy"}, kind=None)
    assert [h.chunk.text for h in chunks] == ["Data at rest is encrypted with customer-managed KMS keys."]
    assert _ids(loaded.lexical(INDEX, "backups quarter region", k=10)) == []
    assert "policy" in _ids(loaded.lexical(INDEX, "customer-managed KMS keys", k=3))


def test_delete_document(loaded: SearchBackend) -> None:
    removed = loaded.delete_document(INDEX, "policy")
    assert removed == 3  # two passages + one span
    assert loaded.document_hash(INDEX, "policy") is None
    assert loaded.lookup(INDEX, {"document_id": "policy"}, kind=None) == []
    assert "policy" not in _ids(loaded.lexical(INDEX, "encrypted AES-256 rotated", k=10))
    assert loaded.delete_document(INDEX, "policy") == 0
    assert loaded.get_index(INDEX).documents == len(corpus()) - 1


def test_list_documents(loaded: SearchBackend) -> None:
    """`evidence list --index NAME`: every document once, in id order, with its chunk counts."""
    assert isinstance(loaded, DocumentListing)
    docs = corpus()
    listed = loaded.list_documents(INDEX)
    assert [d.document_id for d in listed] == sorted(d.document_id for d in docs)
    by_id = {d.document_id: d for d in docs}
    for info in listed:
        doc = by_id[info.document_id]
        passages = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
        assert (info.source, info.passages, info.spans) == (doc.source, passages, len(doc.chunks) - passages)
    loaded.delete_document(INDEX, "policy")
    assert "policy" not in [d.document_id for d in loaded.list_documents(INDEX)]
    with pytest.raises(IndexNotFoundError):
        loaded.list_documents("no-such-index")


def test_lexical_only_upsert(backend: SearchBackend) -> None:
    backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()[:2]
    backend.upsert(INDEX, docs, [None, None])
    assert _ids(backend.lexical(INDEX, "breaches notified", k=1)) == ["incident"]
    assert backend.vectors(INDEX, [docs[0].chunks[0].chunk_id]) == {}


# --- lexical --------------------------------------------------------------------------------


def test_lexical_ranks_the_obvious_match_first(loaded: SearchBackend) -> None:
    hits = loaded.lexical(INDEX, "how quickly are customers notified of breaches", k=5)
    assert hits and hits[0].chunk.document_id == "incident"
    assert hits[0].chunk.sequence == 1
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert all(h.lexical == h.score and h.dense is None for h in hits)


def test_lexical_uses_english_analysis(loaded: SearchBackend) -> None:
    # "rotating" -> "rotat" and "keys" -> "key" only meet "rotated"/"keys" through stemming;
    # "the", "are" are stop words.
    hits = loaded.lexical(INDEX, "the keys are rotating", k=3)
    assert hits and hits[0].chunk.document_id == "policy"


def test_lexical_result_set_and_loose_order(loaded: SearchBackend) -> None:
    hits = loaded.lexical(INDEX, "encryption at rest", k=10)
    docs = set(_ids(hits))
    assert {"policy", "followup-r1", "followup-r2", "followup-doc"} <= docs
    assert "incident" not in docs
    # The two chunks that say "encrypt ... at rest" beat the ones that only say "encryption".
    assert set(_ids(hits[:2])) == {"policy", "followup-r1"}


def test_lexical_returns_whole_chunks(loaded: SearchBackend) -> None:
    original = corpus()[0].chunks[0]
    (hit,) = loaded.lexical(INDEX, "AES-256", k=1)
    chunk = hit.chunk
    assert chunk.chunk_id == original.chunk_id
    assert (chunk.text, chunk.char_start, chunk.char_end, chunk.sequence) == (
        original.text,
        original.char_start,
        original.char_end,
        original.sequence,
    )
    assert (chunk.title, chunk.section, chunk.page, chunk.source) == (
        original.title,
        original.section,
        original.page,
        original.source,
    )
    assert dict(chunk.metadata) == dict(original.metadata)
    assert chunk.kind is ChunkKind.PASSAGE


def test_lexical_filters(loaded: SearchBackend) -> None:
    q = "encryption"
    assert set(_ids(loaded.lexical(INDEX, q, k=10, filters={"type": "followup_document"}))) == {
        "followup-doc"
    }
    both = loaded.lexical(INDEX, q, k=10, filters={"type": ["followup_response:1", "followup_response:2"]})
    assert set(_ids(both)) == {"followup-r1", "followup-r2"}
    assert set(_ids(loaded.lexical(INDEX, q, k=10, filters={"document_id": "policy"}))) == {"policy"}
    assert set(_ids(loaded.lexical(INDEX, q, k=10, filters={"round_number": 2}))) == {"followup-r2"}
    assert loaded.lexical(INDEX, q, k=10, filters={"type": "nothing-like-this"}) == []
    assert set(_ids(loaded.lexical(INDEX, q, k=10, filters={"section": "Encryption"}))) == {"policy"}


def test_lexical_kind_selection(loaded: SearchBackend) -> None:
    q = "encrypted AES-256"
    passages = loaded.lexical(INDEX, q, k=10)
    spans = loaded.lexical(INDEX, q, k=10, kind=ChunkKind.SPAN)
    both = loaded.lexical(INDEX, q, k=10, kind=None)
    assert {h.chunk.kind for h in passages} == {ChunkKind.PASSAGE}
    assert [h.chunk.kind for h in spans] == [ChunkKind.SPAN]
    assert spans[0].chunk.span_type is not None and spans[0].chunk.span_type.value == "sentence"
    assert len(both) == len(passages) + len(spans)
    assert loaded.lexical(INDEX, q, k=10, kind=None, filters={"span_type": "sentence"})[0].chunk.kind is (
        ChunkKind.SPAN
    )


def test_lexical_k_limits(loaded: SearchBackend) -> None:
    assert len(loaded.lexical(INDEX, "encryption security data", k=2)) == 2


def test_term_counts_are_the_lexical_hit_counts(loaded: SearchBackend) -> None:
    texts = ["encryption", "AES-256", "keys", "rotating", "the", "nothing-like-this", "customers"]
    for filters in (None, {"type": "followup_document"}, {"type": ["followup_response:1", "policy"]}):
        for cap in (1, 3, 50):
            counts = loaded.term_counts(INDEX, texts, cap=cap, filters=filters)
            assert counts == {t: len(loaded.lexical(INDEX, t, k=cap, filters=filters)) for t in texts}
    assert loaded.term_counts(INDEX, ["encryption"], cap=50, filters={"type": "nothing-like-this"}) == {
        "encryption": 0
    }
    spans = loaded.term_counts(INDEX, ["encrypted"], cap=50, kind=ChunkKind.SPAN)
    assert (
        spans
        == {"encrypted": len(loaded.lexical(INDEX, "encrypted", k=50, kind=ChunkKind.SPAN))}
        != {"encrypted": 0}
    )
    with pytest.raises(IndexNotFoundError):
        loaded.term_counts("no-such-index", ["encryption"], cap=5)


# --- dense (k-NN) ---------------------------------------------------------------------------


@pytest.mark.needs_knn
def test_dense_nearest_and_cosine(loaded: SearchBackend) -> None:
    docs = corpus()
    vecs = vectors_for(docs)
    # Chunk 3 of the corpus (incident, passage 0... after policy's 3 chunks) points along axis 3.
    hits = loaded.dense(INDEX, axis(3), k=3)
    assert hits[0].chunk.chunk_id == docs[1].chunks[0].chunk_id
    expected = float(vecs[1][0] @ axis(3))
    # The embedded store keeps vectors as float16 (docs/scale.md): a cosine is exact to ~1e-3.
    assert hits[0].score == pytest.approx(expected, abs=COSINE_TOLERANCE)
    assert hits[0].dense == hits[0].score and hits[0].lexical is None
    assert all(-1.0 <= h.score <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.needs_knn
def test_dense_follows_writes_after_a_query(loaded: SearchBackend) -> None:
    """A query between writes must not leave the next one on the old vectors (the embedded
    store caches its matrix per write generation and rebuilds it after every write). The
    query points away from every corpus vector, so the scores are negative until a write."""
    docs = corpus()
    away = -axis(7)
    before = loaded.dense(INDEX, away, k=1)
    assert before and before[0].score < 0
    moved = edited(docs[0], ["Data at rest is encrypted with customer-managed KMS keys."])
    loaded.upsert(INDEX, [moved], [np.stack([away])])
    (hit,) = loaded.dense(INDEX, away, k=1)
    assert hit.chunk.chunk_id == moved.chunks[0].chunk_id
    assert hit.score == pytest.approx(1.0, abs=COSINE_TOLERANCE)
    loaded.delete_document(INDEX, "policy")
    after = loaded.dense(INDEX, away, k=len(docs) * 4)
    assert after and "policy" not in _ids(after)
    assert all(h.score < 0 for h in after)


@pytest.mark.needs_knn
def test_dense_filters_inside_knn(loaded: SearchBackend) -> None:
    hits = loaded.dense(INDEX, axis(3), k=2, filters={"type": "followup_document"})
    assert _ids(hits) == ["followup-doc"]  # efficient filtering: k results survive the filter
    spans = loaded.dense(INDEX, axis(2), k=5, kind=ChunkKind.SPAN)
    assert [h.chunk.kind for h in spans] == [ChunkKind.SPAN]


@pytest.mark.needs_knn
def test_dense_refuses_other_dimension(loaded: SearchBackend) -> None:
    with pytest.raises(EmbedderMismatchError):
        loaded.dense(INDEX, np.ones(DIM + 2, dtype=np.float32), k=3)


@pytest.mark.needs_knn
def test_hybrid_legs_agree_on_filters(loaded: SearchBackend) -> None:
    """Both legs of client-side hybrid honour the same filters (the ranking layer fuses them)."""
    f = {"type": ["followup_response:1", "followup_response:2"]}
    lex = loaded.lexical(INDEX, "encryption at rest", k=5, filters=f)
    den = loaded.dense(INDEX, axis(5), k=5, filters=f)
    assert set(_ids(lex)) == set(_ids(den)) == {"followup-r1", "followup-r2"}


def test_zero_vector_query_scores_zero(loaded: SearchBackend) -> None:
    """A zero query vector has no direction: a cosine space refuses it (k-NN: "zero vector is not
    supported"), the embedded backend scores every chunk 0. Both answer chunks that have a vector,
    each with similarity 0, filters and kinds honoured; OpenSearch sends no k-NN query for it."""
    zero = np.zeros(DIM, dtype=np.float32)
    hits = loaded.dense(INDEX, zero, k=3)
    assert len(hits) == 3 and all(h.score == 0.0 and h.dense == 0.0 for h in hits)
    assert {h.chunk.kind for h in hits} == {ChunkKind.PASSAGE}
    assert _ids(loaded.dense(INDEX, zero, k=5, filters={"type": "followup_document"})) == ["followup-doc"]


# --- lookup / vectors -----------------------------------------------------------------------


def test_followup_lookup_by_criterion_hash(loaded: SearchBackend) -> None:
    hits = loaded.lookup(INDEX, {"criterion_question_hash": CRITERION_HASH})
    assert sorted(_ids(hits)) == ["followup-r1", "followup-r2"]
    assert all(h.score == 0 for h in hits)
    rounds = sorted(h.chunk.metadata["round_number"] for h in hits)
    assert rounds == [1, 2]
    assert len(loaded.lookup(INDEX, {"criterion_question_hash": CRITERION_HASH}, limit=1)) == 1
    assert loaded.lookup(INDEX, {"criterion_question_hash": "0" * 64}) == []


def test_lookup_kind_and_combined_filters(loaded: SearchBackend) -> None:
    assert len(loaded.lookup(INDEX, {"document_id": "policy"})) == 3
    assert len(loaded.lookup(INDEX, {"document_id": "policy"}, kind=ChunkKind.PASSAGE)) == 2
    assert len(loaded.lookup(INDEX, {"document_id": "policy"}, kind=ChunkKind.SPAN)) == 1
    assert loaded.lookup(INDEX, {"document_id": "policy", "type": "followup_document"}) == []


def test_vectors_roundtrip(loaded: SearchBackend) -> None:
    docs = corpus()
    vecs = vectors_for(docs)
    wanted = [docs[0].chunks[1].chunk_id, docs[3].chunks[0].chunk_id, "missing:p0"]
    got = loaded.vectors(INDEX, wanted)
    assert set(got) == set(wanted[:2])
    np.testing.assert_allclose(got[wanted[0]], vecs[0][1], atol=COSINE_TOLERANCE)
    np.testing.assert_allclose(got[wanted[1]], vecs[3][0], atol=COSINE_TOLERANCE)
    assert got[wanted[0]].dtype == np.float32


def test_nan_rows_mean_no_vector(backend: SearchBackend) -> None:
    """The service stores spans without embeddings by passing NaN rows (service._mask_rows)."""
    backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    doc = corpus()[0]  # two passages + one span
    vecs = np.stack([axis(0), axis(1), np.full(DIM, np.nan, dtype=np.float32)])
    (res,) = backend.upsert(INDEX, [doc], [vecs])
    assert (res.status, res.passages, res.spans) == ("created", 2, 1)
    got = backend.vectors(INDEX, [c.chunk_id for c in doc.chunks])
    assert set(got) == {doc.chunks[0].chunk_id, doc.chunks[1].chunk_id}
    assert len(backend.lookup(INDEX, {"document_id": doc.document_id})) == 3
    assert [h.chunk.kind for h in backend.lexical(INDEX, "AES-256", k=5, kind=ChunkKind.SPAN)] == [
        ChunkKind.SPAN
    ]
