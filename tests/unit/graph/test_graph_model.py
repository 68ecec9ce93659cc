"""The knowledge-graph file format: what is accepted, what is refused and how it is named."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from evidence.graph import EdgeType, GraphValidationError, find_cycle, graph_from_obj, parse_graph
from tests.unit.graph.graphkit import edge, item, lo, sample_bytes, small_obj


def _refused(obj: Any) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        graph_from_obj(obj)
    return info.value


def test_sample_graph_is_large_real_and_connected() -> None:
    g = parse_graph(sample_bytes(), filename="algebra-calculus.yaml")
    assert len(g.los) >= 40
    assert len(g.content) >= 80
    assert g.warnings == ()
    assessed = {e.target for e in g.edges_of(EdgeType.ASSESSED_BY)}
    assert all(n.id in assessed for n in g.content), "every content item teaches or tests an LO"
    prereq_targets = {e.target for e in g.edges_of(EdgeType.PREREQUISITE_OF)}
    assert sum(1 for n in g.los if n.id in prereq_targets) >= 40
    # Real teaching text: several sentences per LO, and no placeholder text anywhere.
    assert all(n.text.count(". ") >= 2 for n in g.los)
    assert not [n.id for n in g.nodes if "lorem" in n.text.lower() or "todo" in n.text.lower()]
    assert {n.difficulty for n in g.nodes} == {"intro", "core", "advanced"}


def test_json_and_yaml_read_the_same_graph() -> None:
    obj = small_obj()
    from_json = parse_graph(json.dumps(obj).encode(), filename="g.json")
    from_yaml = parse_graph(yaml.safe_dump(obj).encode(), filename="g.yml")
    sniffed = parse_graph(json.dumps(obj).encode(), filename="upload")
    assert from_json.nodes == from_yaml.nodes == sniffed.nodes
    assert from_json.edges == from_yaml.edges == sniffed.edges


def test_defaults_and_lenient_reading() -> None:
    obj = {
        "nodes": [
            {"id": 101, "type": "LO", "text": "Numbers can be added.", "difficulty": "Intro"},
            {
                "id": "EX-1",
                "type": "Example",
                "title": "2 + 2",
                "text": "Two plus two is four.",
                "tags": ["x"],
            },
        ],
        "edges": [{"source": 101, "target": "EX-1", "type": "assessed_by"}],
    }
    g = graph_from_obj(obj)
    first = g.node("101")
    assert (first.title, first.difficulty, first.subject) == ("101", "intro", None)
    assert g.edges[0].strength == 1.0 and g.edges[0].type is EdgeType.ASSESSED_BY


def test_prerequisite_cycle_is_refused_naming_the_cycle() -> None:
    obj = small_obj()
    obj["edges"].append(edge("LO-C", "LO-A"))
    err = _refused(obj)
    assert err.field == "edges"
    assert "PREREQUISITE_OF cycle: LO-A -> LO-B -> LO-C -> LO-A" in err.message
    assert "nothing indexed" in err.message


def test_self_loop_is_a_cycle() -> None:
    obj = small_obj()
    obj["edges"].append(edge("LO-D", "LO-D"))
    assert "PREREQUISITE_OF cycle: LO-D -> LO-D" in _refused(obj).message


def test_assessed_by_edges_do_not_make_prerequisite_cycles() -> None:
    obj = small_obj()
    obj["edges"].append(edge("EX-C1", "LO-C", "ASSESSED_BY"))  # reversed direction: accepted, warned
    g = graph_from_obj(obj)
    assert any("ASSESSED_BY should go from an LO to content" in w for w in g.warnings)


def test_dangling_edge_end_is_refused_by_name() -> None:
    obj = small_obj()
    obj["edges"].append(edge("LO-A", "LO-NOPE"))
    err = _refused(obj)
    assert err.field == "edges[8].target"
    assert "'LO-NOPE' is not a node" in err.message


def test_duplicate_id_is_refused_by_name() -> None:
    obj = small_obj()
    obj["nodes"].append(lo("LO-B", "Again", "Duplicate text."))
    err = _refused(obj)
    assert err.field == "nodes[8].id"
    assert "duplicate node id 'LO-B' (first at nodes[1])" in err.message


def test_unknown_edge_type_is_refused_by_name() -> None:
    obj = small_obj()
    obj["edges"].append(edge("LO-A", "LO-C", "REQUIRES"))
    err = _refused(obj)
    assert err.field == "edges[8].type"
    assert "unknown edge type 'REQUIRES'; valid: PREREQUISITE_OF, ASSESSED_BY" in err.message


def test_every_problem_is_listed() -> None:
    obj = small_obj()
    obj["nodes"].append(lo("LO-A", "Again", "Duplicate."))
    obj["edges"] += [edge("LO-A", "X"), edge("LO-A", "LO-B", "RELATED"), edge("LO-C", "LO-A")]
    err = _refused(obj)
    joined = " | ".join(m for _, m in err.problems)
    for needle in ("duplicate node id 'LO-A'", "'X' is not a node", "'RELATED'", "cycle"):
        assert needle in joined


@pytest.mark.parametrize(
    ("mutate", "field", "needle"),
    [
        (
            lambda o: o["nodes"][0].update(difficulty="hard"),
            "nodes[0].difficulty",
            "not one of intro, core, advanced",
        ),
        (lambda o: o["nodes"][0].pop("text"), "nodes[0].text", "required"),
        (lambda o: o["nodes"][0].update(text="   "), "nodes[0].text", "required"),
        (lambda o: o["nodes"][1].update(type=None), "nodes[1].type", "required"),
        (lambda o: o["edges"][0].update(strength=1.5), "edges[0].strength", "[0, 1]"),
        (lambda o: o["edges"][0].update(strength="high"), "edges[0].strength", "[0, 1]"),
        (lambda o: o["edges"][0].pop("source"), "edges[0].source", "required"),
        (lambda o: o.update(nodes=[]), "nodes", "non-empty"),
        (lambda o: o.update(edges={"a": 1}), "edges", "must be a list"),
        (lambda o: o["nodes"].append("LO-Z"), "nodes[8]", "must be an object"),
    ],
)
def test_field_problems_name_the_field(mutate: Any, field: str, needle: str) -> None:
    obj = small_obj()
    mutate(obj)
    err = _refused(obj)
    assert err.field == field
    assert needle in err.message
    assert err.status == 422


def test_unreadable_files_say_where() -> None:
    with pytest.raises(GraphValidationError, match=r"invalid JSON at line 1 column 2"):
        parse_graph(b"{nodes: 1}", filename="g.json")
    with pytest.raises(GraphValidationError, match=r"invalid YAML at line 3 column 1"):
        parse_graph(b"nodes:\n  - id: [unclosed\n", filename="g.yaml")
    with pytest.raises(GraphValidationError, match="not UTF-8"):
        parse_graph(b"\xff\xfe\x00", filename="g.json")
    with pytest.raises(GraphValidationError, match="expected an object"):
        parse_graph(b"[1, 2]", filename="g.json")


def test_repeated_edge_keeps_the_stronger_one() -> None:
    obj = small_obj()
    obj["edges"].append(edge("LO-A", "LO-B", strength=0.95))
    g = graph_from_obj(obj)
    ab = [e for e in g.edges if (e.source, e.target) == ("LO-A", "LO-B")]
    assert [e.strength for e in ab] == [0.95]
    assert any("repeats edges[0]" in w for w in g.warnings)


def test_find_cycle_is_iterative_and_deterministic() -> None:
    n = 20_000
    chain = [(f"n{i}", f"n{i + 1}") for i in range(n)]
    assert find_cycle([f"n{i}" for i in range(n + 1)], chain) is None
    assert find_cycle(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "b")]) == ["b", "c", "b"]


def test_content_difficulty_reaches_the_node() -> None:
    g = graph_from_obj({"nodes": [item("EX", "Example", "t", "x.", "advanced")], "edges": []})
    assert g.node("EX").difficulty == "advanced" and not g.node("EX").is_lo
