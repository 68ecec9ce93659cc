"""Graph ingestion into a real embedded store and reading nodes back through the backend port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evidence.graph import GraphReader, NodeView, graph_from_obj, index_graph
from evidence.graph.documents import KG_EDGES, KG_ID, graph_documents
from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend
from evidence.testing import HashingEmbedder
from tests.unit.graph.graphkit import edge, lo, small_graph, small_obj

INDEX = "kg"


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend(tmp_path / "store")
    yield b
    b.close()


def test_each_node_is_a_document_with_its_edges_as_metadata() -> None:
    docs = graph_documents(small_graph(), graph_id="g.json", source="g.json")
    assert [d.document_id for d in docs][:2] == ["g.json#LO-A", "g.json#LO-B"]
    c = {d.document_id: d for d in docs}["g.json#LO-C"]
    passage = c.chunks[0]
    assert passage.kind is ChunkKind.PASSAGE and passage.title == "Solve linear equations"
    assert [s.text for s in c.chunks[1:]] == [
        "A linear equation has the form ax + b = c.",
        "Subtract b and divide by a.",
    ]
    meta = passage.metadata
    assert meta["kg_prereqs"] == ["LO-B", "LO-D"]
    assert meta["kg_content"] == ["EX-C1", "EXR-C1", "EXR-C2"]
    assert meta["kg_role"] == "lo" and meta["subject"] == "algebra"
    view = NodeView.from_chunk(passage)
    assert view is not None
    assert dict(view.prereqs) == {"LO-B": 0.8, "LO-D": 0.4}
    assert dict(view.content) == {"EX-C1": 0.9, "EXR-C1": 0.8, "EXR-C2": 0.7}
    assert view.citation_type == "LO"
    assert NodeView.from_chunk(c.chunks[1]) is None  # spans are not nodes


def test_caller_metadata_cannot_replace_graph_keys() -> None:
    docs = graph_documents(small_graph(), graph_id="g", source="g", metadata={KG_ID: "x", "owner": "t"})
    assert docs[0].metadata[KG_ID] == "LO-A" and docs[0].metadata["owner"] == "t"


def test_index_graph_writes_passages_spans_and_vectors(backend: EmbeddedBackend) -> None:
    report = index_graph(backend, HashingEmbedder(16), INDEX, small_graph(), graph_id="g.json")
    assert (report.nodes, report.los, report.content, report.edges) == (8, 4, 4, 8)
    assert (report.created, report.updated, report.unchanged, report.deleted) == (8, 0, 0, 0)
    assert report.status == "created"
    info = backend.get_index(INDEX)
    assert info.documents == 8 and info.embedder_id == HashingEmbedder.model_id
    spans = backend.lookup(INDEX, {"document_id": "g.json#LO-C"}, kind=ChunkKind.SPAN)
    assert len(spans) == 2
    stored = backend.vectors(INDEX, [h.chunk.chunk_id for h in spans])
    assert len(stored) == 2, "sentence vectors are stored for compression"
    hits = backend.lexical(INDEX, "linear equation", k=3)
    assert hits[0].chunk.document_id == "g.json#LO-C"


def test_reindexing_unchanged_graph_changes_nothing(backend: EmbeddedBackend) -> None:
    index_graph(backend, HashingEmbedder(16), INDEX, small_graph(), graph_id="g.json")
    again = index_graph(backend, HashingEmbedder(16), INDEX, small_graph(), graph_id="g.json")
    assert (again.created, again.updated, again.unchanged, again.deleted) == (0, 0, 8, 0)
    assert again.status == "unchanged"


def test_reindexing_a_changed_graph_replaces_it(backend: EmbeddedBackend) -> None:
    index_graph(backend, HashingEmbedder(16), INDEX, small_graph(), graph_id="g.json")
    obj = small_obj()
    obj["nodes"] = [n for n in obj["nodes"] if n["id"] != "LO-D"]
    obj["edges"] = [e for e in obj["edges"] if "LO-D" not in (e["source"], e["target"])]
    obj["nodes"].append(lo("LO-E", "Check solutions", "Substitute the answer back into the equation."))
    obj["edges"].append(edge("LO-C", "LO-E", strength=0.6))
    report = index_graph(backend, HashingEmbedder(16), INDEX, graph_from_obj(obj), graph_id="g.json")
    # LO-A and LO-C lost an edge to D, C gained one to E; E is new; D is gone.
    assert (report.created, report.deleted) == (1, 1)
    assert report.updated == 2 and report.status == "updated"
    reader = GraphReader(backend, INDEX)
    nodes = reader.fetch("g.json", ["LO-A", "LO-C", "LO-D", "LO-E"])
    assert sorted(nodes) == ["LO-A", "LO-C", "LO-E"]
    assert dict(nodes["LO-C"].prereqs) == {"LO-B": 0.8}
    assert dict(nodes["LO-C"].unlocks) == {"LO-E": 0.6}
    assert backend.lookup(INDEX, {"document_id": "g.json#LO-D"}) == []


def test_graphs_in_one_index_are_kept_apart(backend: EmbeddedBackend) -> None:
    index_graph(backend, HashingEmbedder(16), INDEX, small_graph(), graph_id="one")
    index_graph(backend, HashingEmbedder(16), INDEX, small_graph(), graph_id="two")
    obj = small_obj()
    obj["nodes"] = obj["nodes"][:1]
    obj["edges"] = []
    index_graph(backend, HashingEmbedder(16), INDEX, graph_from_obj(obj), graph_id="two")
    reader = GraphReader(backend, INDEX)
    assert sorted(reader.fetch("one", ["LO-A", "LO-B"])) == ["LO-A", "LO-B"]
    assert sorted(reader.fetch("two", ["LO-A", "LO-B"])) == ["LO-A"]


def test_reader_caches_and_filters(backend: EmbeddedBackend) -> None:
    index_graph(backend, None, INDEX, small_graph(), graph_id="g")
    reader = GraphReader(backend, INDEX)
    assert sorted(reader.fetch("g", ["LO-A", "LO-B", "NOPE"])) == ["LO-A", "LO-B"]
    assert reader.lookups == 1
    reader.fetch("g", ["LO-A", "NOPE"])
    assert reader.lookups == 1, "known and known-missing ids are not asked again"
    got = reader.fetch(
        "g", ["EX-C1", "EXR-C1", "EXR-C2"], filters={"kg_type": ["Exercise"], "difficulty": ["core"]}
    )
    assert list(got) == ["EXR-C1"]
    assert reader.vectors(got.values()) == {}, "a lexical-only index has no vectors"


def test_edge_json_is_optional_when_reading(backend: EmbeddedBackend) -> None:
    docs = graph_documents(small_graph(), graph_id="g", source="g")
    passage = docs[2].chunks[0]
    from dataclasses import replace

    bare = replace(passage, metadata={k: v for k, v in passage.metadata.items() if k != KG_EDGES})
    view = NodeView.from_chunk(bare)
    assert view is not None and dict(view.prereqs) == {"LO-B": 1.0, "LO-D": 1.0}
    assert np.isclose(sum(view.content.values()), 3.0)


def test_a_long_node_is_one_passage_and_its_sentences_stay_quotable(backend: EmbeddedBackend) -> None:
    from evidence.coach.compress import load_sentences

    long_text = " ".join(f"Sentence number {i} explains one more detail of the idea." for i in range(400))
    obj = small_obj()
    obj["nodes"][0]["text"] = "  \n" + long_text
    obj["nodes"][1]["type"] = "lo"
    g = graph_from_obj(obj)
    assert g.node("LO-B").is_lo
    index_graph(backend, HashingEmbedder(16), INDEX, g, graph_id="g")
    passages = backend.lookup(INDEX, {"document_id": "g#LO-A"}, kind=ChunkKind.PASSAGE)
    assert len(passages) == 1
    view = NodeView.from_chunk(passages[0].chunk)
    assert view is not None and view.text == long_text and view.char_start == 3
    sentences = load_sentences(backend, INDEX, [view])["LO-A"]
    assert len(sentences) == 400 and all(s.text in view.text for s in sentences)
    assert sentences[7].text == "Sentence number 7 explains one more detail of the idea."
