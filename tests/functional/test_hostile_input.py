"""Hostile input on the API (issue 26): each attack answered with a small 4xx naming the field,
quickly, and the documents already indexed all still there afterwards (RELIABILITY.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidence.service import EvidenceService
from evidence.testing import LambdaContext
from tests.functional.test_bad_input import DOCS, RETRIEVE, call, seeded, still_there  # noqa: F401

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


def test_yaml_alias_bomb_gets_a_small_422(seeded: EvidenceService, context: LambdaContext) -> None:
    payload = graph_upload(alias_bomb())
    assert len(json.dumps(payload)) < 600  # the 508-byte request of the report, give or take
    status, answer = call("POST", DOCS, payload, False, context)
    assert status == 422, answer
    assert answer["error"]["code"] == "invalid_graph"
    assert "anchors and aliases are not accepted" in answer["error"]["message"]
    assert len(json.dumps(answer)) < 64 * 1024
    still_there(context)


def test_yaml_anchor_alone_is_refused(seeded: EvidenceService, context: LambdaContext) -> None:
    text = "nodes: &n\n  - {id: a, type: LO, text: x}\nedges: []\n"
    status, answer = call("POST", DOCS, graph_upload(text), False, context)
    assert (status, answer["error"]["code"]) == (422, "invalid_graph"), answer
    assert "line 1 column 8" in answer["error"]["message"]


@pytest.mark.parametrize(
    ("label", "nodes", "edges"),
    [
        ("a huge id in a missing-field message", [{"id": "i" * 100_000, "type": "LO"}], []),
        ("a huge strength", [{"id": "a", "type": "LO", "text": "x"}], [{"source": "a", "target": "a",
         "type": "ASSESSED_BY", "strength": [["x" * 1000] * 10] * 10}]),  # fmt: skip
        ("a huge edge type", [{"id": "a", "type": "LO", "text": "x"}], [{"source": "a", "target": "a",
         "type": "T" * 100_000}]),  # fmt: skip
        ("a huge dangling end", [{"id": "a", "type": "LO", "text": "x"}], [{"source": "a", "target": "b" * 100_000,
         "type": "PREREQUISITE_OF"}]),  # fmt: skip
        ("a huge difficulty", [{"id": "a", "type": "LO", "text": "x", "difficulty": "d" * 100_000}], []),
    ],
)
def test_graph_errors_quote_at_most_200_characters_of_a_value(
    seeded: EvidenceService, context: LambdaContext, label: str, nodes: Any, edges: Any
) -> None:
    text = json.dumps({"nodes": nodes, "edges": edges})
    status, answer = call("POST", DOCS, graph_upload(text, "graph.json"), False, context)
    assert (status, answer["error"]["code"]) == (422, "invalid_graph"), label
    assert len(answer["error"]["message"]) < 1_000, label
