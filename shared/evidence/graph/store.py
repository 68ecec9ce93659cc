"""Writing a graph into an index and reading its nodes back, through the SearchBackend port only.

Writing: the graph is validated first (nothing of a refused file is written), every node's
passage and sentences are embedded (sentence vectors let compression score sentences without
embedding them per request), changed nodes are upserted (unchanged ones cost nothing: content
hash) and the nodes of the previous version of the same graph that are gone are deleted, so
re-indexing a changed graph replaces it. Stale nodes are deleted after the upsert: a crash in
between leaves extra nodes that the next run removes, never a graph with nodes missing.

Reading: `GraphReader` fetches nodes by id with filtered `lookup`s (one call per batch of ids)
and caches them for the request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from evidence.graph.documents import KG_GRAPH, KG_ID, NodeView, graph_documents
from evidence.records import Chunk, ChunkKind, DocumentChunks, SearchHit

if TYPE_CHECKING:
    from evidence.embed.base import Embedder
    from evidence.graph.model import KnowledgeGraph
    from evidence.search.base import SearchBackend, SearchReader, Vector

#: Embedder id an index records when it is built without vectors (as the service's LEXICAL_ONLY).
LEXICAL_ONLY = "none"
_MAX_GRAPH_NODES = 100_000


@dataclass
class GraphIndexReport:
    index: str
    graph_id: str
    nodes: int
    los: int
    content: int
    edges: int
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    spans: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.created == self.nodes:
            return "created"
        if self.created or self.updated or self.deleted:
            return "updated"
        return "unchanged"


def existing_node_documents(backend: SearchBackend, index: str, graph_id: str) -> set[str]:
    hits = backend.lookup(index, {KG_GRAPH: graph_id}, limit=_MAX_GRAPH_NODES, kind=ChunkKind.PASSAGE)
    return {h.chunk.document_id for h in hits}


def _vectors(embedder: Embedder | None, docs: Sequence[DocumentChunks]) -> list[Vector | None]:
    if embedder is None:
        return [None] * len(docs)
    texts = [c.search_text for d in docs for c in d.chunks]
    if not texts:
        return [None] * len(docs)
    matrix = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    out: list[Vector | None] = []
    start = 0
    for d in docs:
        out.append(matrix[start : start + len(d.chunks)])
        start += len(d.chunks)
    return out


def index_graph(
    backend: SearchBackend,
    embedder: Embedder | None,
    index: str,
    graph: KnowledgeGraph,
    *,
    graph_id: str,
    source: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> GraphIndexReport:
    """Write (or replace) `graph` in `index`; `embedder=None` builds a lexical-only index."""
    if embedder is None:
        backend.create_index(index, embedder_id=LEXICAL_ONLY, dimension=0)
    else:
        backend.create_index(index, embedder_id=embedder.model_id, dimension=embedder.dimension)
    docs = graph_documents(graph, graph_id=graph_id, source=source or graph_id, metadata=metadata)
    before = existing_node_documents(backend, index, graph_id)
    todo = [d for d in docs if backend.document_hash(index, d.document_id) != d.content_hash]
    results = backend.upsert(index, todo, _vectors(embedder, todo)) if todo else []
    stale = sorted(before - {d.document_id for d in docs})
    for doc_id in stale:
        backend.delete_document(index, doc_id)
    report = GraphIndexReport(
        index=index,
        graph_id=graph_id,
        nodes=len(graph.nodes),
        los=len(graph.los),
        content=len(graph.content),
        edges=len(graph.edges),
        deleted=len(stale),
        warnings=list(graph.warnings),
    )
    for r in results:
        if r.status == "created":
            report.created += 1
        elif r.status == "updated":
            report.updated += 1
    report.unchanged = len(docs) - report.created - report.updated
    report.chunks = sum(1 for d in docs for c in d.chunks if c.kind is ChunkKind.PASSAGE)
    report.spans = sum(len(d.chunks) for d in docs) - report.chunks
    return report


class GraphReader:
    """Nodes of one index by (graph, id), fetched through `lookup` and cached for a request."""

    def __init__(self, backend: SearchReader, index: str) -> None:
        self.backend = backend
        self.index = index
        self._nodes: dict[tuple[str, str], NodeView] = {}
        self._chunks: dict[tuple[str, str], Chunk] = {}
        self._missing: set[tuple[str, str]] = set()
        self.lookups = 0

    def remember(self, hits: Iterable[SearchHit | Any]) -> list[NodeView]:
        """Cache the nodes among search hits or candidates (anything with a `.chunk`)."""
        return [v for h in hits if (v := self._keep(h.chunk)) is not None]

    def _keep(self, chunk: Chunk) -> NodeView | None:
        view = NodeView.from_chunk(chunk)
        if view is not None:
            self._nodes[(view.graph, view.id)] = view
            self._chunks[(view.graph, view.id)] = chunk
        return view

    def get(self, graph: str, node_id: str) -> NodeView | None:
        return self._nodes.get((graph, node_id))

    def chunk(self, graph: str, node_id: str) -> Chunk | None:
        """The passage chunk a known node was read from."""
        return self._chunks.get((graph, node_id))

    def fetch(
        self, graph: str, ids: Iterable[str], *, filters: Mapping[str, Any] | None = None
    ) -> dict[str, NodeView]:
        """The nodes among `ids` that exist (and pass `filters`, applied by the backend).

        Unfiltered fetches are cached, so asking again costs nothing; filtered ones always ask.
        """
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        out: dict[str, NodeView] = {}
        if filters:
            query = {**filters, KG_GRAPH: graph, KG_ID: wanted}
            self.lookups += 1
            for hit in self.backend.lookup(self.index, query, limit=len(wanted), kind=ChunkKind.PASSAGE):
                view = self._keep(hit.chunk)
                if view is not None and view.graph == graph:
                    out[view.id] = view
            return out
        todo = [i for i in wanted if (graph, i) not in self._nodes and (graph, i) not in self._missing]
        if todo:
            self.lookups += 1
            query = {KG_GRAPH: graph, KG_ID: todo}
            for hit in self.backend.lookup(self.index, query, limit=len(todo), kind=ChunkKind.PASSAGE):
                self._keep(hit.chunk)
            self._missing.update((graph, i) for i in todo if (graph, i) not in self._nodes)
        for i in wanted:
            view = self._nodes.get((graph, i))
            if view is not None:
                out[i] = view
        return out

    def vectors(self, views: Iterable[NodeView]) -> dict[str, np.ndarray]:
        """Stored passage embeddings by node id (nodes without one are left out)."""
        by_chunk = {v.chunk_id: v.id for v in views}
        if not by_chunk:
            return {}
        stored = self.backend.vectors(self.index, list(by_chunk))
        return {by_chunk[cid]: np.asarray(vec, dtype=np.float32) for cid, vec in stored.items()}
