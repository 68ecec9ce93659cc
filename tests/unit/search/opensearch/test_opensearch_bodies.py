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
from evidence.search.base import AnchorVectors
from evidence.search.opensearch_responses import parse_version
from tests.contract.corpus import DIM, EMBEDDER, corpus, vectors_for
from tests.unit.search.opensearch.spec_validator import OpenSearchSpec, SpecValidationError

SEARCH = ("post", "/{index}/_search")
FILTERS: dict[str, Any] = {
    "type": ["followup_response:1", "followup_response:2"],
    "document_id": "policy",
    "round_number": 2,
    "verified": True,
    "criterion_question_hash": "ab" * 32,
}
VEC = [0.1] * DIM


#: The versions bodies are built for and checked against: the oldest supported, the last
#: before 2.19's additions, 2.19 itself, the first 3.x.
VERSIONS = ["2.10.0", "2.18.0", "2.19.0", "3.0.0"]


def _caps(version: str) -> b.Capabilities:
    return b.Capabilities(version=parse_version(version))


def _anchors() -> dict[int, AnchorVectors]:
    rng = np.random.default_rng(7)

    def unit() -> np.ndarray:
        v = rng.standard_normal(DIM).astype(np.float32)
        return np.asarray(v / np.linalg.norm(v), dtype=np.float32)

    return {
        0: AnchorVectors({3: unit(), 5: unit()}, {"Encryption": unit()}),
        1: AnchorVectors({6: unit()}, {}),
    }


def _request_bodies(caps: b.Capabilities) -> list[tuple[str, str, Any]]:
    """(method, spec path, body) for every request the adapter can send to a cluster with `caps`."""
    docs = corpus()
    vecs = vectors_for(docs)
    gen = b.new_generation()
    actions = [
        a
        for d, v in zip(docs, vecs, strict=True)
        for a in b.bulk_actions("idx", d, v, gen, with_ids=not caps.serverless)
    ]
    # A passage keeping the focus span anchor's vectors (`anchor_vectors`, schema 3).
    actions.extend(
        b.bulk_actions("idx", docs[0], vecs[0], gen, with_ids=not caps.serverless, anchors=_anchors())
    )
    actions.append(b.marker_action("idx", docs[0], gen, with_ids=not caps.serverless))
    actions.append(b.delete_action("idx", "some-id"))
    out: list[tuple[str, str, Any]] = [
        ("put", "/{index}", b.create_index_body(EMBEDDER, DIM, caps, k1=0.9, b=0.4)),
        ("put", "/{index}", b.create_index_body(EMBEDDER, 0, caps)),
        ("put", "/{index}", b.create_index_body(EMBEDDER, DIM, caps, written_with={"section_header": "off"})),
        (
            "put",
            "/_index_template/{name}",
            b.index_template_body(["evidence-*"], EMBEDDER, DIM, caps, k1=0.9, b=0.4),
        ),
        ("put", "/{index}/_mapping", b.generation_mapping()),
        ("put", "/{index}/_mapping", b.anchor_vectors_mapping()),
        ("put", "/_search/pipeline/{id}", b.normalization_pipeline_body()),
        ("post", "/_bulk", b.bulk_lines(actions)),
        (*SEARCH, b.lexical_body("encryption at rest", k=10, filters=FILTERS, kind=None)),
        (*SEARCH, b.knn_body(VEC, k=7, filters=FILTERS, kind=ChunkKind.PASSAGE)),
        (*SEARCH, b.knn_body(VEC, k=1000, filters=FILTERS, kind=ChunkKind.PASSAGE, light=True)),
        (
            *SEARCH,
            b.hybrid_body(
                "encryption", VEC, k=10, filters=FILTERS, kind=None, pagination_depth=100, caps=caps
            ),
        ),
        (*SEARCH, b.zero_vector_body(k=5, filters=FILTERS, kind=ChunkKind.PASSAGE)),
        (*SEARCH, b.zero_vector_body(k=5, filters=FILTERS, kind=ChunkKind.PASSAGE, light=True)),
        (
            *SEARCH,
            b.lookup_body(FILTERS, size=10, kind=ChunkKind.SPAN, search_after=["d", "span", 3, "x:s3"]),
        ),
        (*SEARCH, b.vectors_body(["a:p0", "b:p1"])),
        (*SEARCH, b.anchor_vectors_body([("a", 0, 1200), ("b", 300, 900)], filters=FILTERS)),
        (*SEARCH, b.markers_body(["a", "b"])),
        (*SEARCH, b.rows_body(b.stale_query(["a", "b"], [gen]), size=1000, offset=1000)),
        ("post", "/{index}/_delete_by_query", b.delete_documents_body(["a"])),
        ("post", "/{index}/_delete_by_query", b.stale_delete_body(["a", "b"], [gen])),
        ("post", "/{index}/_count", b.count_body("document")),
        ("post", "/{index}/_count", b.count_body(["passage", "span"])),
        ("post", "/{index}/_count", b.sectioned_body()),
    ]
    if caps.rrf:
        out.append(("put", "/_search/pipeline/{id}", b.rrf_pipeline_body()))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_every_body_is_valid_for_its_target_version(spec: OpenSearchSpec, version: str) -> None:
    for method, path, body in _request_bodies(_caps(version)):
        spec.validate_request(method, path, body, version=version)


def test_serverless_bodies_are_what_every_supported_version_accepts(spec: OpenSearchSpec) -> None:
    caps = b.Capabilities.serverless_collection()
    oldest = ".".join(map(str, b.MIN_VERSION))
    for method, path, body in _request_bodies(caps):
        spec.validate_request(method, path, body, version=oldest)
    create = b.create_index_body(EMBEDDER, DIM, caps)
    assert "similarity" not in create["settings"]["index"]
    lines = b.bulk_lines(list(b.bulk_actions("idx", corpus()[0], None, "g", with_ids=False)))
    assert all("_id" not in line.get("index", {}) for line in lines)


@pytest.mark.parametrize(
    ("build", "too_old"),
    [
        (lambda: ("put", "/{index}", b.create_index_body(EMBEDDER, DIM)), "2.18.0"),  # faiss + cosinesimil
        (
            lambda: (*SEARCH, b.hybrid_body("x", VEC, k=5, filters=None, kind=None, pagination_depth=50)),
            "2.18.0",
        ),
        (lambda: ("put", "/_search/pipeline/{id}", b.rrf_pipeline_body()), "2.18.0"),
        (
            lambda: (*SEARCH, b.hybrid_body("x", VEC, k=5, filters=None, kind=None, caps=_caps("2.10.0"))),
            "2.9.0",
        ),
        (lambda: ("put", "/_search/pipeline/{id}", b.normalization_pipeline_body()), "2.9.0"),
    ],
    ids=["faiss-cosine", "pagination-depth", "rrf", "hybrid", "normalization"],
)
def test_a_body_using_a_later_feature_fails_on_an_older_target(
    spec: OpenSearchSpec, build: Any, too_old: str
) -> None:
    method, path, body = build()
    spec.validate_request(method, path, body, version="3.0.0")  # fine where it exists ...
    with pytest.raises(SpecValidationError, match=r"2\.19|2\.10"):  # ... refused before
        spec.validate_request(method, path, body, version=too_old)


@pytest.mark.parametrize("version", VERSIONS)
def test_index_body_per_version(spec: OpenSearchSpec, version: str) -> None:
    caps = _caps(version)
    body = b.create_index_body(EMBEDDER, DIM, caps, k1=0.9, b=0.4)
    vector = body["mappings"]["properties"][b.VECTOR_FIELD]
    assert vector["method"] == {
        "name": "hnsw",
        "engine": "faiss" if caps.version >= (2, 19) else "lucene",
        "space_type": "cosinesimil",
        "parameters": {"m": 16, "ef_construction": 128},
    }
    assert vector["dimension"] == DIM
    assert body["mappings"]["_meta"]["embedder_id"] == EMBEDDER
    assert body["mappings"]["_meta"]["engine"] == vector["method"]["engine"]
    assert body["mappings"]["properties"][b.LEXICAL_FIELD]["analyzer"] == "english"
    assert body["mappings"]["properties"]["generation"] == {"type": "keyword"}
    assert body["settings"]["index"]["similarity"]["default"] == {"type": "BM25", "k1": 0.9, "b": 0.4}


def test_metadata_never_maps_as_date_or_number(spec: OpenSearchSpec) -> None:
    mapping = b.mappings(EMBEDDER, DIM)
    assert mapping["date_detection"] is False and mapping["numeric_detection"] is False
    templates = {
        next(iter(t.values()))["match_mapping_type"]: next(iter(t.values()))
        for t in mapping["dynamic_templates"]
    }
    assert set(templates) == {"string", "long", "double", "boolean", "date"}
    assert all(
        t["mapping"]["type"] == "keyword" and t["path_match"] == "metadata.*" for t in templates.values()
    )


def test_template_honours_k1_and_b(spec: OpenSearchSpec) -> None:
    """Defect 10: the template ignored the configured BM25 parameters."""
    body = b.index_template_body(["a*"], EMBEDDER, DIM, k1=1.6, b=0.3)
    assert body["template"]["settings"]["index"]["similarity"]["default"] == {
        "type": "BM25",
        "k1": 1.6,
        "b": 0.3,
    }


def test_lexical_only_index_has_no_vector_field(spec: OpenSearchSpec) -> None:
    body = b.create_index_body(EMBEDDER, 0)
    spec.validate_request("put", "/{index}", body)
    assert b.VECTOR_FIELD not in body["mappings"]["properties"]


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
    # before 2.19: no pagination_depth at all, the k-NN leg still goes as deep
    old = b.hybrid_body("x", VEC, k=10, filters=None, kind=None, pagination_depth=60, caps=_caps("2.18.0"))
    assert "pagination_depth" not in old["query"]["hybrid"]
    assert old["query"]["hybrid"]["queries"][1]["knn"][b.VECTOR_FIELD]["k"] == 60


def test_every_lexical_read_asks_hyphenated_compounds_joined_too(spec: OpenSearchSpec) -> None:
    """The text OpenSearch matches is the text the embedded backend analyses
    (`analysis.with_joined_compounds`): ranked, hybrid and counted reads alike."""

    def matched(query: dict[str, Any]) -> str:
        return str(query["bool"]["must"][0]["match"][b.LEXICAL_FIELD]["query"])

    lexical = b.lexical_body("non-opioid pain", k=10, filters=FILTERS, kind=None)
    spec.validate_request(*SEARCH, lexical)
    assert matched(lexical["query"]) == "non-opioid pain nonopioid"
    hybrid = b.hybrid_body("non-opioid pain", VEC, k=10, filters=None, kind=None, pagination_depth=10)
    assert matched(hybrid["query"]["hybrid"]["queries"][0]) == "non-opioid pain nonopioid"
    counted = b.term_count_lines(["e-mail", "COVID-19"], cap=5, filters=None, kind=None)
    assert [matched(line["query"]) for line in counted[1::2]] == ["e-mail email", "COVID-19"]


def test_stale_rows_are_one_term_per_generation_not_per_chunk() -> None:
    """Defect 4: the keep-list was one term per chunk id and could pass index.max_terms_count."""
    ids = [f"doc-{i}" for i in range(b.MAX_TERMS)]
    body = b.stale_delete_body(ids, ["g1"])
    (keep,) = body["query"]["bool"]["must_not"]
    assert keep == {"terms": {"generation": ["g1"]}}
    assert len(body["query"]["bool"]["filter"][0]["terms"]["document_id"]) == b.MAX_TERMS < 65_536


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


def test_filter_keys_and_values_stay_apart_in_opensearch_terms() -> None:
    """Issue 26: `{"team": "red=secret"}` must not match `{"team=red": "secret"}`. OpenSearch keeps
    each key a keyword field of its own, so the key and the value never share one string."""
    assert b.filter_clauses({"team": "red=secret"}, None)[1:] == [{"term": {"metadata.team": "red=secret"}}]
    assert b.filter_clauses({"team=red": "secret"}, None)[1:] == [{"term": {"metadata.team=red": "secret"}}]


def test_anchor_vectors_round_trip_and_stay_out_of_every_other_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """`anchor_vectors` on a passage: each vector back as its float16 rounding (as float32; a
    value written as float32 reads back bit for bit), an object OpenSearch neither parses nor
    indexes, put on an older index before its first write, and excluded from every read but the
    anchor's own (docs/opensearch.md#anchor-vectors)."""
    from evidence.search.opensearch_responses import parse_anchor_vectors

    doc = corpus()[0]
    anchors = _anchors()
    actions = list(b.bulk_actions("idx", doc, None, "g", anchors=anchors))
    sources = [a["_source"] for a in actions]
    assert [b.ANCHOR_FIELD in src for src in sources] == [i in anchors for i in range(len(doc.chunks))]
    keep = ("chunk_id", "document_id", b.ANCHOR_FIELD)
    hits = [{"_id": src["chunk_id"], "_source": {k: src[k] for k in keep if k in src}} for src in sources]
    hits.append({"_id": "old", "_source": {"chunk_id": "old", "document_id": "d"}})  # before schema 3
    got = parse_anchor_vectors({"hits": {"hits": hits}})
    assert set(got) == {doc.chunks[i].chunk_id for i in anchors}
    for i, want in anchors.items():
        back = got[doc.chunks[i].chunk_id]
        assert back.document_id == doc.document_id
        assert set(back.spans) == set(want.spans) and set(back.headings) == set(want.headings)
        for q, v in want.spans.items():
            want16 = v.astype(np.float16).astype(np.float32)
            assert back.spans[q].dtype == np.float32 and back.spans[q].tobytes() == want16.tobytes()
        for h, v in want.headings.items():
            assert back.headings[h].tobytes() == v.astype(np.float16).astype(np.float32).tobytes()
    # Written as float32, read back bit for bit.
    with monkeypatch.context() as m:
        m.setattr(b, "ANCHOR_DTYPE", "<f4")
        wide = b.anchor_source(anchors[0])
    (back32,) = parse_anchor_vectors(
        {"hits": {"hits": [{"_source": {"chunk_id": "c", "document_id": "d", b.ANCHOR_FIELD: wide}}]}}
    ).values()
    assert all(back32.spans[q].tobytes() == v.tobytes() for q, v in anchors[0].spans.items())
    # A value this code cannot read is no vector (the anchor then reads nothing for it), not an error.
    bad = copy.deepcopy(hits[0])
    bad["_source"][b.ANCHOR_FIELD]["late"] = "not base64!"
    assert parse_anchor_vectors({"hits": {"hits": [bad]}}) == {}
    mapping = b.mappings(EMBEDDER, DIM)["properties"][b.ANCHOR_FIELD]
    assert (
        mapping
        == {"type": "object", "enabled": False}
        == b.anchor_vectors_mapping()["properties"][b.ANCHOR_FIELD]
    )
    for body in (
        b.lexical_body("x", k=3, filters=None, kind=None),
        b.knn_body(VEC, k=3, filters=None, kind=None),
        b.hybrid_body("x", VEC, k=3, filters=None, kind=None),
        b.zero_vector_body(k=3, filters=None, kind=None),
        b.lookup_body({}, size=3, kind=None),
    ):
        assert b.ANCHOR_FIELD in body["_source"]["excludes"]
    read = b.anchor_vectors_body([("a", 10, 20)])
    assert read["_source"] == {"includes": ["chunk_id", "document_id", b.ANCHOR_FIELD]}
