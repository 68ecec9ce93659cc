"""Hostile input on the API (issue 26): each attack answered with a small 4xx naming the field,
quickly, and the documents already indexed all still there afterwards (RELIABILITY.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidence.service import EvidenceService
from evidence.testing import LambdaContext
from tests.functional.test_bad_input import (
    DOCS,
    INDEX,
    RETRIEVE,
    call,
    seeded,  # noqa: F401 (the fixture)
    still_there,
)

_LOL = '["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'


def alias_bomb(levels: int = 8) -> str:
    """A YAML "billion laughs": each level lists the previous one nine times (9^levels strings)."""
    lines = [f"a0: &a0 {_LOL}"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"nodes: *a{levels}")
    return "\n".join(lines) + "\n"


def graph_upload(text: str, filename: str = "graph.yaml") -> dict[str, Any]:
    return {"filename": filename, "text": text, "metadata": {"kind": "graph"}}


def test_yaml_alias_bomb_gets_a_small_422(
    seeded: EvidenceService,  # noqa: F811 (the imported fixture)
    context: LambdaContext,
) -> None:
    payload = graph_upload(alias_bomb())
    assert len(json.dumps(payload)) < 600  # the 508-byte request of the report, give or take
    status, answer = call("POST", DOCS, payload, False, context)
    assert status == 422, answer
    assert answer["error"]["code"] == "invalid_graph"
    assert "anchors and aliases are not accepted" in answer["error"]["message"]
    assert len(json.dumps(answer)) < 64 * 1024
    still_there(context)


def test_yaml_anchor_alone_is_refused(
    seeded: EvidenceService,  # noqa: F811 (the imported fixture)
    context: LambdaContext,
) -> None:
    text = "nodes: &n\n  - {id: a, type: LO, text: x}\nedges: []\n"
    status, answer = call("POST", DOCS, graph_upload(text), False, context)
    assert (status, answer["error"]["code"]) == (422, "invalid_graph"), answer
    assert "line 1 column 8" in answer["error"]["message"]


@pytest.mark.parametrize(
    ("label", "nodes", "edges"),
    [
        ("a huge id in a missing-field message", [{"id": "i" * 100_000, "type": "LO"}], []),
        (
            "a huge strength",
            [{"id": "a", "type": "LO", "text": "x"}],
            [{"source": "a", "target": "a", "type": "ASSESSED_BY", "strength": [["x" * 1000] * 10] * 10}],
        ),
        (
            "a huge edge type",
            [{"id": "a", "type": "LO", "text": "x"}],
            [{"source": "a", "target": "a", "type": "T" * 100_000}],
        ),
        (
            "a huge dangling end",
            [{"id": "a", "type": "LO", "text": "x"}],
            [{"source": "a", "target": "b" * 100_000, "type": "PREREQUISITE_OF"}],
        ),
        ("a huge difficulty", [{"id": "a", "type": "LO", "text": "x", "difficulty": "d" * 100_000}], []),
    ],
)
def test_graph_errors_quote_at_most_200_characters_of_a_value(
    seeded: EvidenceService,  # noqa: F811 (the imported fixture)
    context: LambdaContext,
    label: str,
    nodes: Any,
    edges: Any,
) -> None:
    text = json.dumps({"nodes": nodes, "edges": edges})
    status, answer = call("POST", DOCS, graph_upload(text, "graph.json"), False, context)
    assert (status, answer["error"]["code"]) == (422, "invalid_graph"), label
    assert len(answer["error"]["message"]) < 1_000, label


# --- filters (item 4) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "filters", "named"),
    [
        ("1,000 keys", {f"k{i}": "x" for i in range(1_000)}, "1,000 keys; at most 64"),
        ("250,001 values", {"document_id": ["x"] * 250_001}, "more than 4,096 values"),
        ("a 300-character key", {"k" * 300: "x"}, "300 characters; at most 256"),
        ("a 2,000-character value", {"team": "v" * 2_000}, "2,000 characters; at most 1,024"),
    ],
)
def test_filters_past_a_limit_get_a_422_naming_the_field(
    seeded: EvidenceService,  # noqa: F811 (the imported fixture)
    context: LambdaContext,
    label: str,
    filters: dict[str, Any],
    named: str,
) -> None:
    status, answer = call("POST", RETRIEVE, {"query": "encryption", "filters": filters}, False, context)
    assert (status, answer["error"]["code"], answer["error"]["field"]) == (422, "validation_error", "filters")
    assert named in answer["error"]["message"], label
    status, answer = call("POST", "/v1/plan", {"query": "encryption", "filters": filters}, False, context)
    assert (status, answer["error"].get("field")) == (422, "filters"), label


def test_the_store_answers_any_number_of_filter_keys_and_values(
    seeded: EvidenceService,  # noqa: F811 (the imported fixture)
) -> None:
    """Below the API (batch tasks, the CLI): no SQLite limit turns a filter into a 500."""
    from evidence.search.embedded import EmbeddedBackend

    backend = seeded.backend
    assert isinstance(backend, EmbeddedBackend)
    store = backend.index_store(INDEX)
    many_keys: dict[str, Any] = {f"k{i}": "x" for i in range(1_500)}
    assert store.filtered_rowids(many_keys, None) == set()
    ids = ["acme/soc2", *(f"missing-{i}" for i in range(300_000))]
    allowed = store.filtered_rowids({"document_id": ids}, None)
    assert allowed and {c.document_id for c in store.chunks_by_rowid(sorted(allowed)).values()} == {
        "acme/soc2"
    }


def _post_ambiguous_keys(context: LambdaContext) -> None:
    """Two documents that unescaped `key=value` terms confuse: `team=red: secret`, `team: red`."""
    for doc_id, meta in [("secret", {"team=red": "secret"}), ("red", {"team": "red"})]:
        payload = {
            "document_id": doc_id,
            "filename": "a.txt",
            "text": "Encryption at rest.",
            "metadata": meta,
        }
        assert call("POST", DOCS, payload, False, context)[0] == 200


def test_filter_keys_and_values_match_exactly(service: EvidenceService, context: LambdaContext) -> None:
    """`{"team=red": "secret"}` is not `{"team": "red=secret"}`: lexically (tantivy's `key=value`
    terms), in the records (dense, lookup) and through the API (hybrid)."""
    _post_ambiguous_keys(context)
    backend = service.backend
    vector = service.embedder.embed_query("encryption")
    cases: list[tuple[dict[str, Any], set[str]]] = [
        ({"team": "red=secret"}, set()),
        ({"team": "red"}, {"red"}),
        ({"team=red": "secret"}, {"secret"}),
        ({"team=red": ["secret", "x"]}, {"secret"}),
        ({"team\\": "=red"}, set()),
    ]
    for filters, expected in cases:
        found = {
            "lexical": {
                h.chunk.document_id for h in backend.lexical(INDEX, "encryption", k=10, filters=filters)
            },
            "dense": {h.chunk.document_id for h in backend.dense(INDEX, vector, k=10, filters=filters)},
            "lookup": {h.chunk.document_id for h in backend.lookup(INDEX, filters)},
        }
        query = {"query": "encryption", "filters": filters, "top_k": 10}
        status, answer = call("POST", RETRIEVE, query, False, context)
        assert status == 200, answer
        found["api"] = {h["document_id"] for h in answer["hits"]}
        assert found == dict.fromkeys(found, expected), filters


def test_a_store_written_with_unescaped_terms_matches_exactly_after_an_upgrade(
    service: EvidenceService, context: LambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store built before keys were escaped: its documents with `=` in a key re-sync once."""
    from evidence.search import store_lexical
    from evidence.search.embedded import EmbeddedBackend

    monkeypatch.setattr(store_lexical, "meta_term", lambda key, value: f"{key}={value}")  # the old terms
    _post_ambiguous_keys(context)
    backend = service.backend
    assert isinstance(backend, EmbeddedBackend)
    old = {
        h.chunk.document_id
        for h in backend.lexical(INDEX, "encryption", k=10, filters={"team": "red=secret"})
    }
    assert old == {"secret"}  # the ambiguity, as the old terms had it
    backend.index_store(INDEX).set_info("meta_terms", "")  # as a store of the old code has no marker
    backend.close()
    monkeypatch.undo()
    for filters, expected in [({"team": "red=secret"}, set()), ({"team=red": "secret"}, {"secret"})]:
        found = {h.chunk.document_id for h in backend.lexical(INDEX, "encryption", k=10, filters=filters)}
        assert found == expected, filters
