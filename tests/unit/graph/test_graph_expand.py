"""Bounded, acyclic graph expansion: prerequisite paths and aligned content, with their scores."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from evidence.graph import GraphReader, content_links, graph_from_obj, index_graph, prerequisite_paths
from evidence.graph.expand import best_paths, path_coherence
from evidence.search.embedded import EmbeddedBackend
from tests.unit.graph.graphkit import edge, lo, small_graph, small_obj

INDEX = "kg"
G = "g"


class AxisEmbedder:
    """Texts containing a key get that key's axis (unit vectors): similarity is under test control."""

    model_id = "test/axis"
    dimension = 4

    def __init__(self, axes: dict[str, Sequence[float]]) -> None:
        self.axes = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in axes.items()}

    def _one(self, text: str) -> np.ndarray:
        for key, v in self.axes.items():
            if key in text:
                return v
        return np.asarray([0, 0, 0, 1], dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, 4), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend(tmp_path / "store")
    yield b
    b.close()


def _reader(backend: EmbeddedBackend, graph=None, embedder=None) -> GraphReader:
    index_graph(backend, embedder, INDEX, graph or small_graph(), graph_id=G)
    return GraphReader(backend, INDEX)


def test_depth_one_finds_direct_prerequisites_only(backend: EmbeddedBackend) -> None:
    reader = _reader(backend)
    paths = prerequisite_paths(reader, G, {"LO-C": 1.0}, depth=1)
    assert [p.nodes for p in paths] == [("LO-B", "LO-C"), ("LO-D", "LO-C")]
    assert [round(p.score, 6) for p in paths] == [0.8, 0.4], "no vectors: score = strength"
    assert all(p.length == 1 for p in paths)


def test_depth_two_reaches_further_and_paths_stay_acyclic(backend: EmbeddedBackend) -> None:
    reader = _reader(backend)
    paths = prerequisite_paths(reader, G, {"LO-C": 1.0}, depth=2)
    assert {p.nodes for p in paths} == {
        ("LO-B", "LO-C"),
        ("LO-D", "LO-C"),
        ("LO-A", "LO-B", "LO-C"),
        ("LO-A", "LO-D", "LO-C"),
    }
    for p in paths:
        assert len(set(p.nodes)) == len(p.nodes) and p.length <= 2
    best = best_paths(paths)
    # via B: 0.9 * 0.8 * 0.8 (decay) = 0.576 beats via D: 0.5 * 0.4 * 0.8
    assert best["LO-A"].nodes == ("LO-A", "LO-B", "LO-C")
    assert best["LO-A"].score == pytest.approx(0.576)
    assert prerequisite_paths(reader, G, {"LO-C": 1.0}, depth=0) == []


def test_paths_do_not_pass_through_other_targets(backend: EmbeddedBackend) -> None:
    reader = _reader(backend)
    paths = prerequisite_paths(reader, G, {"LO-C": 1.0, "LO-B": 0.5}, depth=2)
    assert all("LO-B" not in p.nodes[:-1] for p in paths)
    assert ("LO-A", "LO-B") in {p.nodes for p in paths}


def test_expansion_survives_a_cyclic_index(backend: EmbeddedBackend) -> None:
    """Files with cycles are refused, but an index written by another tool might hold one."""
    from evidence.graph.documents import graph_documents
    from evidence.graph.model import EdgeType, GraphEdge, KnowledgeGraph

    g = small_graph()
    cyclic = KnowledgeGraph(
        nodes=g.nodes, edges=(*g.edges, GraphEdge("LO-C", "LO-A", EdgeType.PREREQUISITE_OF))
    )
    backend.create_index(INDEX, embedder_id="none", dimension=0)
    docs = graph_documents(cyclic, graph_id=G, source=G)
    backend.upsert(INDEX, docs, [None] * len(docs))
    paths = prerequisite_paths(GraphReader(backend, INDEX), G, {"LO-C": 1.0}, depth=5)
    assert paths and all(len(set(p.nodes)) == len(p.nodes) for p in paths)
    assert max(p.length for p in paths) <= 3


def test_coherent_paths_outrank_incoherent_ones(backend: EmbeddedBackend) -> None:
    obj = small_obj()
    # B and D equally strong into C; B is about equations like C, D about something else.
    for e in obj["edges"]:
        if e["target"] == "LO-C" and e["type"] == "PREREQUISITE_OF":
            e["strength"] = 0.7
    for n in obj["nodes"]:
        if n["id"] == "LO-B":
            n["text"] += " equation"
        if n["id"] == "LO-C":
            n["text"] += " equation"
    emb = AxisEmbedder({"equation": [1, 0, 0, 0], "undoes": [0, 1, 0, 0]})
    reader = _reader(backend, graph_from_obj(obj), emb)
    q = emb.embed_query("equation")
    paths = prerequisite_paths(reader, G, {"LO-C": 1.0}, depth=1, query_vector=q)
    assert [p.supporting for p in paths] == ["LO-B", "LO-D"]
    assert paths[0].coherence == pytest.approx(1.0)
    assert paths[1].coherence == pytest.approx(0.5)


def test_path_coherence_is_neutral_without_vectors() -> None:
    assert path_coherence(("a", "b"), {}, None) == 1.0
    v = {"a": np.array([1.0, 0.0]), "b": np.array([-1.0, 0.0])}
    assert path_coherence(("a", "b"), v, None) == 0.0


def test_content_follows_assessed_by_with_filters_and_depth(backend: EmbeddedBackend) -> None:
    reader = _reader(backend)
    reader.fetch(G, ["LO-C", "LO-B"])
    links = content_links(reader, G, {"LO-C": (1.0, 0), "LO-B": (0.5, 1)}, content_depth=1)
    assert [c.node.id for c in links] == ["EX-C1", "EXR-C1", "EXR-C2"], "B is one hop away: depth 1 stops"
    assert [c.for_lo for c in links] == ["LO-C"] * 3
    deeper = content_links(reader, G, {"LO-C": (1.0, 0), "LO-B": (0.5, 1)}, content_depth=2)
    assert "EX-B1" in [c.node.id for c in deeper]
    exercises = content_links(reader, G, {"LO-C": (1.0, 0)}, content_depth=1, types=["Exercise"])
    assert [c.node.id for c in exercises] == ["EXR-C1", "EXR-C2"]
    core = content_links(reader, G, {"LO-C": (1.0, 0)}, content_depth=1, difficulty=["core", "intro"])
    assert [c.node.id for c in core] == ["EX-C1", "EXR-C1"]
    assert content_links(reader, G, {"LO-C": (1.0, 0)}, content_depth=0) == []


def test_content_keeps_its_best_lo(backend: EmbeddedBackend) -> None:
    obj = small_obj()
    obj["nodes"].append(lo("LO-F", "Fractions", "Fractions are parts of a whole."))
    obj["edges"].append(edge("LO-F", "EX-C1", "ASSESSED_BY", 0.3))
    reader = _reader(backend, graph_from_obj(obj))
    reader.fetch(G, ["LO-C", "LO-F"])
    links = content_links(reader, G, {"LO-F": (1.0, 0), "LO-C": (0.5, 0)}, content_depth=1)
    ex = next(c for c in links if c.node.id == "EX-C1")
    assert ex.for_lo == "LO-C" and ex.score == pytest.approx(0.45), "0.5 * 0.9 beats 1.0 * 0.3"
