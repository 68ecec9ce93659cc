"""OpenSearch-only behaviour checked over real HTTP against osmem-server: per-item bulk errors,
crash-safe upsert ordering, and how unsupported features (k-NN, hybrid) surface."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.errors import BackendError, IndexNotFoundError
from evidence.records import DocumentChunks
from evidence.search.opensearch import OpenSearchBackend
from tests.contract.corpus import DIM, EMBEDDER, axis, corpus, vectors_for

INDEX = "osmem-only"


@pytest.fixture
def osb(osmem_clone: Any) -> Iterator[OpenSearchBackend]:
    backend = OpenSearchBackend(
        Settings(backend="opensearch", opensearch_endpoint=osmem_clone.url), max_retries=0, bulk_docs=3
    )
    backend.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    yield backend
    backend.close()


def test_per_item_bulk_errors_are_surfaced_and_isolated(osb: OpenSearchBackend) -> None:
    docs = corpus()
    bad_chunk = replace(docs[1].chunks[0], page="not-a-page")  # type: ignore[arg-type]  # mapped as integer
    bad = replace(docs[1], chunks=(bad_chunk, *docs[1].chunks[1:]))
    with pytest.raises(BackendError) as err:
        osb.upsert(INDEX, [docs[0], bad, docs[2]], vectors_for([docs[0], bad, docs[2]]))
    message = err.value.message
    assert "incident" in message and bad_chunk.chunk_id in message
    # the good documents are complete; the failed one has no hash marker, so it is redone next time
    assert osb.document_hash(INDEX, "policy") == docs[0].content_hash
    assert osb.document_hash(INDEX, "followup-r1") == docs[2].content_hash
    assert osb.document_hash(INDEX, "incident") is None
    (res,) = osb.upsert(INDEX, [docs[1]], vectors_for([docs[1]]))
    assert res.status == "created"


def test_bulk_is_chunked(osb: OpenSearchBackend, osmem_clone: Any) -> None:
    docs = corpus()
    osb.upsert(INDEX, docs, vectors_for(docs))  # 9 chunks with bulk_docs=3 -> several requests
    assert osb.get_index(INDEX).chunks == sum(len(d.chunks) for d in docs)


def test_unsupported_knn_surfaces_as_backend_error(osb: OpenSearchBackend) -> None:
    docs = corpus()
    osb.upsert(INDEX, docs, vectors_for(docs))
    with pytest.raises(BackendError, match="knn"):
        osb.dense(INDEX, axis(0), k=3)
    with pytest.raises(BackendError):
        osb.hybrid(INDEX, "encryption", axis(0), k=3)


def test_upsert_into_missing_index(osb: OpenSearchBackend) -> None:
    docs = corpus()[:1]
    with pytest.raises(IndexNotFoundError):
        osb.upsert("never-created", docs, [None])


def test_vector_shape_is_checked_before_writing(osb: OpenSearchBackend) -> None:
    docs = corpus()[:1]
    with pytest.raises(Exception, match="shape"):
        osb.upsert(INDEX, docs, [np.zeros((1, DIM), dtype=np.float32)])
    assert osb.document_hash(INDEX, docs[0].document_id) is None


def test_serverless_code_path_without_ids_or_refresh(osmem_clone: Any) -> None:
    """The `aoss` path (server-assigned ids, delete-then-insert, no refresh) over real HTTP.

    osmem is not Serverless: this proves our sequencing, not Serverless's behaviour.
    """
    from tests.contract.conftest import _recording_client
    from tests.contract.corpus import edited

    log: list[tuple[str, str, Any]] = []
    settings = Settings(backend="opensearch", opensearch_endpoint=osmem_clone.url, opensearch_service="aoss")
    aoss = OpenSearchBackend(settings, client=_recording_client(osmem_clone.url, log), max_retries=0)
    aoss.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    aoss.upsert(INDEX, docs, vectors_for(docs))
    new = edited(docs[0], ["Only one passage now."])
    (res,) = aoss.upsert(INDEX, [new], [np.stack([axis(2)])])
    assert res.status == "updated"
    assert [h.chunk.text for h in aoss.lookup(INDEX, {"document_id": "policy"}, kind=None)] == [
        "Only one passage now."
    ]
    assert aoss.document_hash(INDEX, "policy") == new.content_hash
    assert aoss.get_index(INDEX).documents == len(docs)
    assert aoss.delete_document(INDEX, "incident") == 2
    bulk_lines = [
        json.loads(line)
        for method, url, body in log
        if url.split("?")[0].endswith("/_bulk")
        for line in str(body).splitlines()
        if line.strip()
    ]
    writes = [line["index"] for line in bulk_lines if "index" in line]
    deletes = [line["delete"] for line in bulk_lines if "delete" in line]
    assert writes and all("_id" not in meta for meta in writes)  # the collection assigns ids
    assert deletes and all("_id" in meta for meta in deletes)  # rows are deleted by their ids
    assert not any("refresh" in url for _m, url, _b in log)
    assert not any("_delete_by_query" in url for _m, url, _b in log)  # Serverless has none
    create = next(body for method, url, body in log if method == "PUT" and url.split("?")[0] == f"/{INDEX}")
    assert "similarity" not in create["settings"]["index"]
    aoss.close()


def _with_metadata(doc: DocumentChunks, metadata: dict[str, object]) -> DocumentChunks:
    meta = {**doc.metadata, **metadata}
    return replace(doc, metadata=meta, chunks=tuple(replace(c, metadata=meta) for c in doc.chunks))


def test_metadata_that_looks_like_a_date_or_number_stays_a_keyword(osb: OpenSearchBackend) -> None:
    """Issue 15.6: with date detection on, "2024-05-01" mapped the key as `date` and every later
    non-date value of that key failed its document."""
    docs = corpus()
    first = _with_metadata(docs[0], {"issued": "2024-05-01", "revision": "12"})
    later = _with_metadata(docs[1], {"issued": "next spring", "revision": "twelve"})
    assert [r.status for r in osb.upsert(INDEX, [first], [None])] == ["created"]
    assert [r.status for r in osb.upsert(INDEX, [later], [None])] == ["created"]
    assert {h.chunk.document_id for h in osb.lookup(INDEX, {"issued": "next spring"})} == {"incident"}
    assert {h.chunk.document_id for h in osb.lookup(INDEX, {"issued": "2024-05-01"})} == {"policy"}


def test_total_fields_limit_fails_only_the_document_that_crosses_it(osb: OpenSearchBackend) -> None:
    """What happens at index.mapping.total_fields.limit: each new metadata key is a field; the
    document that would cross the limit fails alone, with the server's reason, and gets no marker."""
    osb.client.indices.put_settings(index=INDEX, body={"index": {"mapping": {"total_fields": {"limit": 60}}}})
    docs = corpus()
    wide = _with_metadata(docs[1], {f"key_{i}": "v" for i in range(80)})
    with pytest.raises(BackendError, match="Limit of total fields") as err:
        osb.upsert(INDEX, [docs[0], wide], [None, None])
    assert "incident" in err.value.message and err.value.status == 502
    assert osb.document_hash(INDEX, "policy") == docs[0].content_hash
    assert osb.document_hash(INDEX, "incident") is None
