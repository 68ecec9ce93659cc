"""Parsing of k-NN and hybrid responses, on the response shapes of the spec's own stories.

The stories (opensearch-api-spec/stories/tests/default/...) are what the spec project runs
against real clusters; their response payloads are partial, so each shape is completed only
with the fields the spec's SearchResponse schema requires, its `_source` swapped for one of
our chunks, and the result validated against that schema before it is parsed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from evidence.errors import BackendError
from evidence.records import ChunkKind
from evidence.search import opensearch_bodies as b
from evidence.search import opensearch_responses as responses
from tests.contract.corpus import corpus, vectors_for
from tests.unit.search.opensearch.spec_validator import OpenSearchSpec

STORIES = Path("stories/tests/default")


def _story(spec: OpenSearchSpec, rel: str) -> dict[str, Any]:
    with (spec.root / STORIES / rel).open(encoding="utf-8") as fh:
        loaded: dict[str, Any] = yaml.safe_load(fh)
    return loaded


def _complete(payload: dict[str, Any]) -> dict[str, Any]:
    """Add what SearchResponse requires and the story left out (took, _shards, ...)."""
    out = copy.deepcopy(payload)
    out.setdefault("took", 3)
    out.setdefault("timed_out", False)
    out.setdefault("_shards", {"total": 1, "successful": 1, "skipped": 0, "failed": 0})
    hits = out.setdefault("hits", {})
    hits.setdefault("hits", [])
    hits.setdefault("total", {"value": len(hits["hits"]), "relation": "eq"})
    hits["total"].setdefault("value", len(hits["hits"]))
    hits.setdefault("max_score", max((h["_score"] for h in hits["hits"]), default=None))
    for i, hit in enumerate(hits["hits"]):
        hit.setdefault("_index", "movies")
        hit.setdefault("_id", f"story-{i}")
    return out


def _sources(n: int) -> list[dict[str, Any]]:
    docs = corpus()
    vecs = vectors_for(docs)
    chunks = [
        (c, d.content_hash, v[i]) for d, v in zip(docs, vecs, strict=True) for i, c in enumerate(d.chunks)
    ]
    out = []
    for chunk, doc_hash, _vec in chunks[:n]:
        source = b.chunk_source(chunk, doc_hash, None)
        del source[b.LEXICAL_FIELD]  # the adapter excludes it (and the vector) from _source
        out.append(source)
    return out


def test_knn_story_response_parses(spec: OpenSearchSpec) -> None:
    """The shape of a real k-NN answer. The story's index is `l2`, so its score says nothing
    about the cosine conversion (that is pinned per engine, from the engines' own formulas, in
    test_opensearch_adapter.py::test_knn_score_converts_back_to_cosine_per_engine)."""
    story = _story(spec, "_core/search/knn/search/search_k.yaml")
    chapter = story["chapters"][0]
    assert "knn" in chapter["request"]["payload"]["query"]
    space = story["prologues"][0]["request"]["payload"]["mappings"]["properties"]
    assert any(f.get("method", {}).get("space_type") == "l2" for f in space.values() if isinstance(f, dict))
    payload = chapter["response"]["payload"]
    response = _complete(payload)
    response["hits"]["hits"][0]["_source"] = _sources(1)[0]
    spec.validate_response("post", "/{index}/_search", 200, response)

    (hit,) = responses.parse_dense(response)
    assert hit.dense == hit.score and hit.lexical is None and -1.0 <= hit.score <= 1.0
    assert hit.chunk.chunk_id == corpus()[0].chunks[0].chunk_id


def test_knn_filter_story_with_no_hits(spec: OpenSearchSpec) -> None:
    story = _story(spec, "_core/search/knn/search/search_filter.yaml")
    chapter = story["chapters"][0]
    assert "filter" in chapter["request"]["payload"]["query"]["knn"]["embedding"]
    response = _complete(chapter["response"]["payload"])
    spec.validate_response("post", "/{index}/_search", 200, response)
    assert responses.parse_dense(response) == []


def test_hybrid_story_response(spec: OpenSearchSpec) -> None:
    story = _story(spec, "_core/search/hybrid_query_pagination.yaml")
    chapter = story["chapters"][0]
    assert chapter["request"]["payload"]["query"]["hybrid"]["pagination_depth"] == 10
    partial = chapter["response"]["payload"]
    assert (
        responses.parse_hybrid(partial) == []
    )  # the story's partial shape alone: nothing to parse, no crash

    response = _complete(partial)
    sources = _sources(3)
    # Fused scores of a min-max/arithmetic-mean pipeline lie in [0, 1], in the server's order.
    response["hits"]["hits"] = [
        {"_index": "books", "_id": s["chunk_id"], "_score": score, "_source": s}
        for s, score in zip(sources, [1.0, 0.61, 0.005], strict=True)
    ]
    response["hits"]["total"]["value"] = 3
    response["hits"]["max_score"] = 1.0
    spec.validate_response("post", "/{index}/_search", 200, response)
    hits = responses.parse_hybrid(response)
    assert [h.score for h in hits] == [1.0, 0.61, 0.005]
    assert [h.chunk.chunk_id for h in hits] == [s["chunk_id"] for s in sources]
    assert all(h.lexical is None and h.dense is None for h in hits)
    assert hits[2].chunk.kind is ChunkKind.SPAN  # policy's span is the third chunk


def test_pipeline_stories_match_our_pipeline_shapes(spec: OpenSearchSpec) -> None:
    """Our pipelines have the stories' structure (the stories ran on real clusters)."""
    norm = _story(spec, "search_pipeline/search_phase_results_processors/normalization.yaml")
    rrf = _story(spec, "search_pipeline/search_phase_results_processors/score_ranker.yaml")
    story_norm = norm["chapters"][0]["request"]["payload"]["phase_results_processors"][0]
    story_rrf = rrf["chapters"][0]["request"]["payload"]["phase_results_processors"][0]
    ours_norm = b.normalization_pipeline_body()["phase_results_processors"][0]
    ours_rrf = b.rrf_pipeline_body()["phase_results_processors"][0]
    assert ours_norm.keys() == story_norm.keys()
    assert ours_norm["normalization-processor"].keys() == story_norm["normalization-processor"].keys()
    assert ours_rrf["score-ranker-processor"]["combination"]["technique"] == "rrf"
    assert ours_rrf.keys() == story_rrf.keys()


@pytest.mark.parametrize("score, cos", [(1.0, 1.0), (0.5, 0.0), (0.0, -1.0), (1.0000001, 1.0)])
def test_cosine_from_score(score: float, cos: float) -> None:
    assert responses.cosine_from_score(score) == pytest.approx(cos)


def test_parse_lexical_and_lookup_and_vectors() -> None:
    sources = _sources(2)
    response = {
        "hits": {"hits": [{"_score": 3.5, "_source": sources[0]}, {"_score": 1.25, "_source": sources[1]}]}
    }
    lex = responses.parse_lexical(response)
    assert [(h.score, h.lexical, h.dense) for h in lex] == [(3.5, 3.5, None), (1.25, 1.25, None)]
    look = responses.parse_lookup(response)
    assert [h.score for h in look] == [0.0, 0.0]
    vec_resp = {
        "hits": {
            "hits": [
                {"_source": {"chunk_id": "a:p0", b.VECTOR_FIELD: [0.5] * 4}},
                {"_source": {"chunk_id": "b:p0"}},
            ]
        }
    }
    got = responses.parse_vectors(vec_resp)
    assert list(got) == ["a:p0"] and got["a:p0"].dtype.name == "float32"


def test_a_document_count_reads_its_cardinality_aggregation_or_names_its_absence() -> None:
    name = b.DOCUMENT_COUNT_AGG
    body = b.document_count_body({"tenant": "a"})
    assert body["size"] == 0 and body["aggs"][name]["cardinality"]["precision_threshold"] == 40_000
    assert {"term": {"metadata.tenant": "a"}} in body["query"]["bool"]["filter"]
    assert responses.parse_cardinality({"aggregations": {name: {"value": 7}}}, name) == 7
    with pytest.raises(BackendError, match=name):
        responses.parse_cardinality({"hits": {"hits": []}}, name)
