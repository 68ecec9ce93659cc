"""Knowledge graphs for the coach profile (seed 004): the file format, validation, storage as
ordinary documents of any SearchBackend, and bounded expansion over prerequisite and assessment edges."""

from evidence.graph.documents import NodeView, graph_documents, node_document_id
from evidence.graph.expand import ContentLink, PrereqPath, content_links, prerequisite_paths
from evidence.graph.load import GRAPH_SUFFIXES, graph_from_obj, is_graph_filename, parse_graph
from evidence.graph.model import (
    DIFFICULTIES,
    LO_TYPE,
    EdgeType,
    GraphEdge,
    GraphNode,
    GraphValidationError,
    KnowledgeGraph,
    find_cycle,
)
from evidence.graph.store import GraphIndexReport, GraphReader, index_graph

__all__ = [
    "DIFFICULTIES",
    "GRAPH_SUFFIXES",
    "LO_TYPE",
    "ContentLink",
    "EdgeType",
    "GraphEdge",
    "GraphIndexReport",
    "GraphNode",
    "GraphReader",
    "GraphValidationError",
    "KnowledgeGraph",
    "NodeView",
    "PrereqPath",
    "content_links",
    "find_cycle",
    "graph_documents",
    "graph_from_obj",
    "index_graph",
    "is_graph_filename",
    "node_document_id",
    "parse_graph",
    "prerequisite_paths",
]
