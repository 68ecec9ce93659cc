"""The coach's invariants, checked on any response, and a Bedrock client with Converse answers for
botocore's Stubber (unit and functional tests share them).

Imported by name in this folder, as `tests.unit.coach.coachkit` elsewhere.
"""

from __future__ import annotations

from typing import Any

import boto3

from evidence.coach.budget import TokenCounter
from evidence.coach.contract import MAX_CONTENT_ITEMS, CoachRequest, CoachResponse
from evidence.graph import GraphReader, NodeView
from evidence.graph.documents import KG_ID
from evidence.records import ChunkKind
from evidence.search.base import SearchBackend


def bedrock_client() -> Any:
    """A bedrock-runtime client with dummy credentials, for botocore's Stubber."""
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )


def converse_answer(text: str) -> dict[str, Any]:
    """Converse's response carrying the model's answer `text`."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        "metrics": {"latencyMs": 12},
    }


def nodes_of(backend: SearchBackend, index: str, ids: list[str]) -> dict[str, NodeView]:
    hits = backend.lookup(index, {KG_ID: ids}, limit=len(ids) * 2 + 1, kind=ChunkKind.PASSAGE)
    return {v.id: v for h in hits if (v := NodeView.from_chunk(h.chunk)) is not None}


def check_invariants(backend: SearchBackend, index: str, request: CoachRequest, r: CoachResponse) -> None:
    c = request.constraints
    cited = [x.id for x in r.citations]
    assert len(cited) == len(set(cited)), "a node is cited once"
    nodes = nodes_of(backend, index, cited + [m.id for m in r.matched_los])
    # Every citation resolves to a node of the index, with the right citation type.
    for x in r.citations:
        assert x.id in nodes, f"citation {x.id} is not a node of {index}"
        assert x.type == nodes[x.id].citation_type
    # Every bullet is a verbatim sentence of a cited node (the one named next to it).
    assert len(r.minimal_context) == len(r.minimal_context_sources) <= 7
    for bullet, source in zip(r.minimal_context, r.minimal_context_sources, strict=True):
        assert source in cited
        assert bullet and bullet in nodes[source].text, f"{bullet!r} is not quoted from {source}"
    # LOs and content: caps, filters, and that what is listed is cited.
    assert len(r.content_items) <= min(MAX_CONTENT_ITEMS, c.top_k.content)
    assert len(r.matched_los) + len(r.supporting_los) <= c.top_k.lo
    types = set(c.content_types or [])
    diffs = set(c.difficulties() or [])
    for item in r.content_items:
        assert item.id in cited and not nodes[item.id].is_lo
        assert not types or item.type in types
        assert not diffs or item.difficulty in diffs
        assert item.difficulty == nodes[item.id].difficulty
    # Prerequisite paths: real edges, acyclic, within graph_depth.prereq.
    reader = GraphReader(backend, index)
    for s in r.supporting_los:
        assert s.path[0] == s.id and s.path_len == len(s.path) - 1
        assert 1 <= s.path_len <= c.graph_depth.prereq
        assert len(set(s.path)) == len(s.path), f"cycle in {s.path}"
        graph = nodes[s.id].graph
        views = reader.fetch(graph, s.path)
        for a, b in zip(s.path, s.path[1:], strict=False):
            assert a in views[b].prereqs, f"{a} is not a prerequisite of {b}"
    # Flags and the question.
    assert not (r.can_answer and r.needs_clarification)
    # An answer has at least one cited fact to teach from (issue 25: never "true" with nothing).
    assert not r.can_answer or r.minimal_context
    assert (r.clarification_question is not None) == r.needs_clarification
    assert 0.0 <= r.confidence <= 1.0
    # The response as the coach reads it fits the budget.
    size = TokenCounter().count(r.model_dump_json(exclude={"telemetry"}))
    assert size <= c.token_budget and size == r.telemetry.tokens
