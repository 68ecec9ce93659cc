"""Graph nodes as documents: how a graph lives in any SearchBackend.

Every node is one document (`<graph id>#<node id>`): one passage (title + text, searched and
embedded like any chunk) plus its sentences as fact spans (the verbatim units that context
compression quotes). Its edges travel as metadata of that document, so both backends can expand
the graph with plain filtered `lookup`s and no graph-specific code:

- `kg_prereqs` / `kg_unlocks`: ids of its PREREQUISITE_OF sources / targets (keyword lists, filterable);
- `kg_content` / `kg_assesses`: ids of its ASSESSED_BY targets / sources;
- `kg_edges`: the same four maps with edge strengths, as one JSON string (read back, never filtered).

A node document's metadata also holds `kg_graph`, `kg_id`, `kg_type`, `kg_role` (`lo` or
`content`), `subject` and `difficulty`: the filters of the coach profile. Metadata is per
document in the embedded backend, which is why a node is a document and not a chunk of one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from evidence.graph.model import KnowledgeGraph, adjacency
from evidence.records import Chunk, ChunkKind, DocumentChunks, ParsedDocument

KG_GRAPH = "kg_graph"
KG_ID = "kg_id"
KG_TYPE = "kg_type"
KG_ROLE = "kg_role"
KG_PREREQS = "kg_prereqs"
KG_UNLOCKS = "kg_unlocks"
KG_CONTENT = "kg_content"
KG_ASSESSES = "kg_assesses"
KG_EDGES = "kg_edges"
SUBJECT = "subject"
DIFFICULTY = "difficulty"
ROLE_LO = "lo"
ROLE_CONTENT = "content"
#: Keys a graph writes; caller metadata (API, S3) may add others but never replace these.
RESERVED_KEYS = frozenset(
    {
        KG_GRAPH,
        KG_ID,
        KG_TYPE,
        KG_ROLE,
        KG_PREREQS,
        KG_UNLOCKS,
        KG_CONTENT,
        KG_ASSESSES,
        KG_EDGES,
        SUBJECT,
        DIFFICULTY,
    }
)
_LISTS = {"prereqs": KG_PREREQS, "unlocks": KG_UNLOCKS, "content": KG_CONTENT, "assesses": KG_ASSESSES}
_EMPTY: Mapping[str, float] = MappingProxyType({})
NODE_MAX_TOKENS = 10_000_000


def node_document_id(graph_id: str, node_id: str) -> str:
    return f"{graph_id}#{node_id}"


def graph_documents(
    graph: KnowledgeGraph,
    *,
    graph_id: str,
    source: str,
    metadata: Mapping[str, Any] | None = None,
) -> list[DocumentChunks]:
    """One `DocumentChunks` per node, in file order."""
    from evidence.ingest.chunker import chunk_document

    extra = {k: v for k, v in (metadata or {}).items() if k not in RESERVED_KEYS and v is not None}
    adj = adjacency(graph)
    docs: list[DocumentChunks] = []
    for node in graph.nodes:
        edges = adj[node.id]
        meta: dict[str, Any] = {
            **extra,
            KG_GRAPH: graph_id,
            KG_ID: node.id,
            KG_TYPE: node.type,
            KG_ROLE: ROLE_LO if node.is_lo else ROLE_CONTENT,
        }
        if node.subject is not None:
            # Lower case: a filter on "Algebra" must find nodes written "algebra".
            meta[SUBJECT] = node.subject.strip().lower()
        if node.difficulty is not None:
            meta[DIFFICULTY] = node.difficulty
        for name, key in _LISTS.items():
            if edges[name]:
                meta[key] = list(edges[name])
        meta[KG_EDGES] = json.dumps(
            {k: v for k, v in edges.items() if v}, sort_keys=True, separators=(",", ":")
        )
        docs.append(
            chunk_document(
                ParsedDocument(text=node.text, title=node.title, fmt="graph"),
                document_id=node_document_id(graph_id, node.id),
                source=source,
                metadata=meta,
                as_record=True,
                # One passage per node whatever its length: a node is the unit that is cited and
                # quoted (the embedder reads its first 256 word pieces, as for any record).
                record_max_tokens=NODE_MAX_TOKENS,
            )
        )
    return docs


@dataclass(frozen=True, slots=True)
class NodeView:
    """A graph node as stored in an index: read back from its passage chunk."""

    id: str
    graph: str
    type: str
    title: str
    text: str
    chunk_id: str
    document_id: str
    #: Where the passage (the node text, trimmed) starts in the node document: span offsets refer to it.
    char_start: int = 0
    subject: str | None = None
    difficulty: str | None = None
    prereqs: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    unlocks: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    content: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    assesses: Mapping[str, float] = field(default_factory=lambda: _EMPTY)

    @property
    def is_lo(self) -> bool:
        return self.type == "LO"

    @property
    def citation_type(self) -> str:
        """Seed 004's citation types: `LO` or `Content`."""
        return "LO" if self.is_lo else "Content"

    @classmethod
    def from_chunk(cls, chunk: Chunk) -> NodeView | None:
        """None for a chunk that is not a graph node's passage."""
        meta = chunk.metadata
        node_id = meta.get(KG_ID)
        graph = meta.get(KG_GRAPH)
        if chunk.kind is not ChunkKind.PASSAGE or not isinstance(node_id, str) or not isinstance(graph, str):
            return None
        maps: dict[str, dict[str, float]] = {}
        raw = meta.get(KG_EDGES)
        if isinstance(raw, str) and raw:
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = {}
            if isinstance(decoded, dict):
                for name in _LISTS:
                    part = decoded.get(name)
                    if isinstance(part, dict):
                        maps[name] = {str(k): float(v) for k, v in part.items() if isinstance(v, int | float)}
        for name, key in _LISTS.items():
            # The id lists are the truth for which edges exist; strengths default to 1.
            ids = meta.get(key) or []
            have = maps.setdefault(name, {})
            for i in ids if isinstance(ids, list) else [ids]:
                have.setdefault(str(i), 1.0)
        subject = meta.get(SUBJECT)
        difficulty = meta.get(DIFFICULTY)
        return cls(
            id=node_id,
            graph=graph,
            type=str(meta.get(KG_TYPE, "")),
            title=chunk.title,
            text=chunk.text,
            chunk_id=chunk.chunk_id,
            document_id=chunk.document_id,
            char_start=chunk.char_start,
            subject=str(subject) if subject is not None else None,
            difficulty=str(difficulty) if difficulty is not None else None,
            prereqs=MappingProxyType(maps["prereqs"]),
            unlocks=MappingProxyType(maps["unlocks"]),
            content=MappingProxyType(maps["content"]),
            assesses=MappingProxyType(maps["assesses"]),
        )
