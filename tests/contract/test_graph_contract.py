"""Graph storage and expansion on every SearchBackend adapter: no backend-specific graph code.

Edges live in node metadata and nodes are fetched with filtered `lookup`s, so the same graph
must expand to the same paths and content on the embedded store and on OpenSearch.
"""

from __future__ import annotations

from evidence.graph import GraphReader, content_links, graph_from_obj, index_graph, prerequisite_paths
from evidence.search.base import SearchBackend
from evidence.testing import HashingEmbedder
from tests.unit.graph.graphkit import edge, lo, small_graph, small_obj

INDEX = "contract-kg"


def test_graph_round_trips_and_expands(backend: SearchBackend) -> None:
    emb = HashingEmbedder(16)
    report = index_graph(backend, emb, INDEX, small_graph(), graph_id="g.json")
    assert report.created == 8
    reader = GraphReader(backend, INDEX)
    nodes = reader.fetch("g.json", ["LO-C", "LO-NOPE"])
    assert list(nodes) == ["LO-C"]
    assert dict(nodes["LO-C"].prereqs) == {"LO-B": 0.8, "LO-D": 0.4}
    q = emb.embed_query("solve a linear equation")
    paths = prerequisite_paths(reader, "g.json", {"LO-C": 1.0}, depth=2, query_vector=q)
    assert {p.nodes for p in paths} == {
        ("LO-B", "LO-C"),
        ("LO-D", "LO-C"),
        ("LO-A", "LO-B", "LO-C"),
        ("LO-A", "LO-D", "LO-C"),
    }
    assert all(0 < p.coherence <= 1 for p in paths), "vectors came back from the backend"
    links = content_links(reader, "g.json", {"LO-C": (1.0, 0)}, content_depth=1, types=["Exercise"])
    assert [c.node.id for c in links] == ["EXR-C1", "EXR-C2"]
    hard = content_links(reader, "g.json", {"LO-C": (1.0, 0)}, content_depth=1, difficulty=["advanced"])
    assert [c.node.id for c in hard] == ["EXR-C2"]


def test_reindexing_a_changed_graph_replaces_it(backend: SearchBackend) -> None:
    emb = HashingEmbedder(16)
    index_graph(backend, emb, INDEX, small_graph(), graph_id="g.json")
    obj = small_obj()
    obj["nodes"] = [n for n in obj["nodes"] if n["id"] != "LO-D"]
    obj["edges"] = [e for e in obj["edges"] if "LO-D" not in (e["source"], e["target"])]
    obj["nodes"].append(lo("LO-E", "Check solutions", "Substitute the answer back."))
    obj["edges"].append(edge("LO-C", "LO-E"))
    report = index_graph(backend, emb, INDEX, graph_from_obj(obj), graph_id="g.json")
    assert (report.created, report.updated, report.deleted) == (1, 2, 1)
    reader = GraphReader(backend, INDEX)
    assert sorted(reader.fetch("g.json", ["LO-C", "LO-D", "LO-E"])) == ["LO-C", "LO-E"]
    paths = prerequisite_paths(reader, "g.json", {"LO-C": 1.0}, depth=2)
    assert {p.nodes for p in paths} == {("LO-B", "LO-C"), ("LO-A", "LO-B", "LO-C")}


def test_the_coach_runs_on_every_backend(backend: SearchBackend) -> None:
    """The whole coach request through the port alone (lexical-only here: osmem has no k-NN)."""
    from evidence.coach.contract import CoachRequest
    from evidence.coach.engine import CoachEngine
    from evidence.graph import parse_graph
    from tests.unit.coach.coachkit import check_invariants
    from tests.unit.graph.graphkit import sample_bytes

    index_graph(
        backend, None, INDEX, parse_graph(sample_bytes(), filename="sample.yaml"), graph_id="sample.yaml"
    )
    engine = CoachEngine(backend, embed_query=None)
    for body in (
        {"query": "solve quadratic equations by factoring", "intent": "tutoring"},
        {
            "query": "chain rule exercises",
            "constraints": {"content_types": ["Exercise"], "difficulty": "core"},
        },
        {"query": "Taylor series error bound", "constraints": {"graph_depth": {"prereq": 2, "content": 1}}},
    ):
        request = CoachRequest.model_validate(body)
        r = engine.run(INDEX, request)
        check_invariants(backend, INDEX, request, r)
        assert r.matched_los, body
    r = engine.run(INDEX, CoachRequest(query="solve quadratic equations by factoring", intent="tutoring"))
    assert r.matched_los[0].id == "LO-ALG-021"
