"""Every request body the OpenSearch adapter builds, validated against the official API spec.

The adapter's live requests against osmem are validated too (tests/contract/conftest.py);
this file covers the bodies osmem cannot run (k-NN, hybrid, search pipelines, Serverless
variants) and proves the validator rejects malformed bodies.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from evidence.records import ChunkKind
from evidence.search import opensearch_bodies as b
from tests.contract.corpus import DIM, EMBEDDER, corpus, vectors_for
from tests.unit.opensearch.spec_validator import OpenSearchSpec, SpecValidationError

SEARCH = ("post", "/{index}/_search")
FILTERS: dict[str, Any] = {
    "type": ["followup_response:1", "followup_response:2"],
    "document_id": "policy",
    "round_number": 2,
    "verified": True,
    "criterion_question_hash": "ab" * 32,
}
VEC = [0.1] * DIM


@pytest.mark.parametrize("serverless", [False, True])
def test_create_index_body(spec: OpenSearchSpec, serverless: bool) -> None:
    body = b.create_index_body(EMBEDDER, DIM, serverless=serverless)
    spec.validate_request("put", "/{index}", body)
    vector = body["mappings"]["properties"][b.VECTOR_FIELD]
    assert vector["method"] == {
        "name": "hnsw",
        "engine": "faiss",
        "space_type": "cosinesimil",
        "parameters": {"m": 16, "ef_construction": 128},
    }
    assert vector["dimension"] == DIM
    assert body["mappings"]["_meta"]["embedder_id"] == EMBEDDER
    assert body["mappings"]["properties"][b.LEXICAL_FIELD]["analyzer"] == "english"
    assert ("similarity" in body["settings"]["index"]) is not serverless


def test_lexical_only_index_has_no_vector_field(spec: OpenSearchSpec) -> None:
    body = b.create_index_body(EMBEDDER, 0)
    spec.validate_request("put", "/{index}", body)
    assert b.VECTOR_FIELD not in body["mappings"]["properties"]


def test_index_template_body(spec: OpenSearchSpec) -> None:
    spec.validate_request(
        "put", "/_index_template/{name}", b.index_template_body(["evidence-*"], EMBEDDER, DIM)
    )


@pytest.mark.parametrize(
    "body", [b.normalization_pipeline_body(), b.rrf_pipeline_body()], ids=["minmax", "rrf"]
)
def test_search_pipeline_bodies(spec: OpenSearchSpec, body: dict[str, Any]) -> None:
    spec.validate_request("put", "/_search/pipeline/{id}", body)


@pytest.mark.parametrize("with_ids", [True, False], ids=["managed", "serverless"])
def test_bulk_lines(spec: OpenSearchSpec, with_ids: bool) -> None:
    docs = corpus()
    vecs = vectors_for(docs)
    actions = [
        a for d, v in zip(docs, vecs, strict=True) for a in b.bulk_actions("idx", d, v, with_ids=with_ids)
    ]
    actions += list(b.bulk_actions("idx", docs[0], None, with_ids=with_ids))  # lexical-only
    marker = {"_op_type": "index", "_index": "idx", "_source": b.marker_source(docs[0])}
    lines = b.bulk_lines([*actions, marker])
    spec.validate_request("post", "/_bulk", lines)
    assert ("_id" in lines[0]["index"]) is with_ids
    assert len(lines[1][b.VECTOR_FIELD]) == DIM


def test_lexical_body(spec: OpenSearchSpec) -> None:
    for kind in (ChunkKind.PASSAGE, ChunkKind.SPAN, None):
        spec.validate_request(*SEARCH, b.lexical_body("encryption at rest", k=10, filters=FILTERS, kind=kind))


def test_knn_body_filters_inside_knn(spec: OpenSearchSpec) -> None:
    body = b.knn_body(VEC, k=7, filters=FILTERS, kind=ChunkKind.PASSAGE)
    spec.validate_request(*SEARCH, body)
    knn = body["query"]["knn"][b.VECTOR_FIELD]
    assert knn["k"] == 7 and body["size"] == 7
    clauses = knn["filter"]["bool"]["filter"]
    assert {"term": {"kind": "passage"}} in clauses
    assert {"terms": {"metadata.type": ["followup_response:1", "followup_response:2"]}} in clauses
    assert {"term": {"document_id": "policy"}} in clauses
    assert {"term": {"criterion_question_hash": "ab" * 32}} in clauses


def test_hybrid_body(spec: OpenSearchSpec) -> None:
    body = b.hybrid_body("encryption", VEC, k=10, filters=FILTERS, kind=None, pagination_depth=100)
    spec.validate_request(*SEARCH, body)
    hybrid = body["query"]["hybrid"]
    assert hybrid["pagination_depth"] == 100
    lexical, knn = hybrid["queries"]
    assert "bool" in lexical and "knn" in knn
    assert knn["knn"][b.VECTOR_FIELD]["k"] == 100
    # size may never exceed pagination_depth
    small = b.hybrid_body("x", VEC, k=50, filters=None, kind=None, pagination_depth=10)
    assert small["query"]["hybrid"]["pagination_depth"] == 50
    spec.validate_request(*SEARCH, small)


def test_lookup_vectors_markers_delete_count_bodies(spec: OpenSearchSpec) -> None:
    spec.validate_request(*SEARCH, b.lookup_body({"criterion_question_hash": "ab" * 32}, size=100, kind=None))
    spec.validate_request(
        *SEARCH, b.lookup_body(FILTERS, size=10, kind=ChunkKind.SPAN, search_after=["d", "span", 3, "x:s3"])
    )
    spec.validate_request(*SEARCH, b.vectors_body(["a:p0", "b:p1"]))
    spec.validate_request(*SEARCH, b.markers_body(["a", "b"]))
    spec.validate_request("post", "/{index}/_delete_by_query", b.delete_documents_body(["a"]))
    spec.validate_request(
        "post", "/{index}/_delete_by_query", b.delete_documents_body(["a", "b"], keep_chunk_ids=["x:p0"])
    )
    spec.validate_request("post", "/{index}/_count", b.count_body("document"))
    spec.validate_request("post", "/{index}/_count", b.count_body(["passage", "span"]))


# --- the validator itself must reject what OpenSearch would ---------------------------------


def _hybrid() -> dict[str, Any]:
    return b.hybrid_body("encryption", VEC, k=10, filters=None, kind=None, pagination_depth=20)


def _break_queries_object(body: dict[str, Any]) -> None:
    body["query"]["hybrid"]["queries"] = body["query"]["hybrid"]["queries"][0]


def _break_typo(body: dict[str, Any]) -> None:
    body["query"] = {"hybird": body["query"]["hybrid"]}


def _break_depth(body: dict[str, Any]) -> None:
    body["query"]["hybrid"]["pagination_depth"] = "deep"


def _break_subquery(body: dict[str, Any]) -> None:
    body["query"]["hybrid"]["queries"][1] = {"knn": {b.VECTOR_FIELD: {"k": 10}}}  # no vector


def _break_two_types(body: dict[str, Any]) -> None:
    body["query"]["hybrid"]["queries"][0]["match_all"] = {}


@pytest.mark.parametrize(
    "breaker",
    [_break_queries_object, _break_typo, _break_depth, _break_subquery, _break_two_types],
    ids=["queries-not-array", "misspelt-hybrid", "depth-not-int", "knn-without-vector", "two-query-types"],
)
def test_validator_rejects_malformed_hybrid(spec: OpenSearchSpec, breaker: Any) -> None:
    body = _hybrid()
    spec.validate_request(*SEARCH, body)  # the good one passes ...
    broken = copy.deepcopy(body)
    breaker(broken)
    with pytest.raises(SpecValidationError):  # ... and each corruption is caught
        spec.validate_request(*SEARCH, broken)


def test_validator_rejects_bad_mapping_and_pipeline(spec: OpenSearchSpec) -> None:
    body = b.create_index_body(EMBEDDER, DIM)
    del body["mappings"]["properties"][b.VECTOR_FIELD]["dimension"]
    with pytest.raises(SpecValidationError):
        spec.validate_request("put", "/{index}", body)
    typo = b.create_index_body(EMBEDDER, DIM)
    typo["mappings"]["properties"][b.VECTOR_FIELD]["type"] = "knn_vectr"
    with pytest.raises(SpecValidationError, match="knn_vectr"):
        spec.validate_request("put", "/{index}", typo)
    wrong_param = b.create_index_body(EMBEDDER, DIM)
    wrong_param["mappings"]["properties"][b.LEXICAL_FIELD]["index"] = "yes-please"
    with pytest.raises(SpecValidationError):
        spec.validate_request("put", "/{index}", wrong_param)
    pipeline = b.rrf_pipeline_body()
    pipeline["phase_results_processors"][0]["score-ranker-processor"]["combination"]["technique"] = "borda"
    with pytest.raises(SpecValidationError):
        spec.validate_request("put", "/_search/pipeline/{id}", pipeline)


@pytest.mark.slow
def test_strict_mode_is_what_catches_unknown_query_types(spec: OpenSearchSpec) -> None:
    """Why the validator closes variant containers: the spec as published lets a typo through."""
    loose = OpenSearchSpec.load(spec.root, strict=False)
    typo: dict[str, Any] = {"query": {"hybird": {"queries": []}}}
    loose.validate_request(*SEARCH, typo)
    with pytest.raises(SpecValidationError):
        spec.validate_request(*SEARCH, typo)


def test_filter_values_are_typed_as_the_spec_expects(spec: OpenSearchSpec) -> None:
    body = b.lexical_body("x", k=1, filters={"score": 1.5, "n": np.int64(3).item()}, kind=None)
    spec.validate_request(*SEARCH, body)
