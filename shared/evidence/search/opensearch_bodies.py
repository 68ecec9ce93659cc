"""Request bodies and response parsing for the OpenSearch adapter: pure functions, no client.

Kept apart from the adapter so that every body can be validated against OpenSearch's
official API spec (tests/unit/opensearch/) without a cluster, and so that the parsing of
k-NN and hybrid responses is tested on the spec's own response shapes.

Stored document layout (one OpenSearch document per chunk, `_id` = chunk id):
    chunk_id, document_id, kind, text, search_text, title, source, section, page, span_type,
    char_start, char_end, sequence, content_hash, document_hash, criterion_question_hash,
    metadata{...}, embedding[dim]
plus one *marker* document per source document (`kind == "document"`) that records the
document's content hash; it is written last, so a crash mid-upsert leaves a hash that no
longer matches and the next upsert redoes the document.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from evidence.errors import RequestValidationError
from evidence.model import validate_index_name
from evidence.records import Chunk, ChunkKind, DocumentChunks, SearchHit, SpanType

#: Bump when the stored layout changes; recorded in the index `_meta`.
SCHEMA_VERSION = 1
VECTOR_FIELD = "embedding"
LEXICAL_FIELD = "search_text"
MARKER_KIND = "document"
#: Filter keys that are top-level fields; every other key is `metadata.<key>`.
BUILTIN_FILTER_FIELDS = frozenset(
    {"chunk_id", "document_id", "kind", "span_type", "section", "criterion_question_hash"}
)
#: Metadata keys mapped explicitly (the seeds filter and sort on them); others via dynamic templates.
KNOWN_METADATA_KEYS = ("type", "round_number", "criterion_question_hash", "FILENAME")
CHUNK_KINDS = (ChunkKind.PASSAGE.value, ChunkKind.SPAN.value)

RRF_PIPELINE = "evidence-hybrid-rrf"
MINMAX_PIPELINE = "evidence-hybrid-minmax"
#: RRF's usual constant (Cormack et al.); the ranking layer's client-side RRF uses the same.
RRF_RANK_CONSTANT = 60

# OpenSearch's own index-name rules (on top of ours): lowercase, no \ / * ? " < > | space , # :,
# not starting with - _ +, not . or .., at most 255 bytes.
_OS_FORBIDDEN = re.compile(r'[\\/*?"<>| ,#:A-Z]')
_IGNORE_ABOVE = 2048


def validate_opensearch_index_name(name: str) -> str:
    """Our index-name rule, then OpenSearch's: a name can never address another path."""
    try:
        validate_index_name(name)
    except ValueError as exc:
        raise RequestValidationError(str(exc), field="index") from exc
    if (
        name in {".", ".."}
        or name[0] in "-_+"
        or _OS_FORBIDDEN.search(name)
        or len(name.encode("utf-8")) > 255
    ):
        raise RequestValidationError(
            f"index name {name!r} is not valid in OpenSearch (lowercase, no leading '-', '_' or '+')",
            field="index",
        )
    return name


def marker_id(document_id: str) -> str:
    """The marker's `_id`: hashed like chunk ids, with a suffix no chunk id can have."""
    return hashlib.sha256(document_id.encode("utf-8")).hexdigest()[:20] + ":doc"


# --- index lifecycle ------------------------------------------------------------------------


def _keyword() -> dict[str, Any]:
    return {"type": "keyword", "ignore_above": _IGNORE_ABOVE}


def mappings(embedder_id: str, dimension: int) -> dict[str, Any]:
    """Field mappings; `_meta` records the embedder so a mismatch can be refused later."""
    text_english: dict[str, Any] = {"type": "text", "analyzer": "english"}
    properties: dict[str, Any] = {
        "chunk_id": {"type": "keyword"},
        "document_id": {"type": "keyword"},
        "kind": {"type": "keyword"},
        LEXICAL_FIELD: text_english,
        # Display-only copies: searching goes through search_text (title + text), as in the
        # embedded backend, so these are not indexed twice.
        "text": {"type": "text", "analyzer": "english", "index": False},
        "title": {"type": "text", "analyzer": "english", "index": False},
        "source": _keyword(),
        "section": _keyword(),
        "span_type": {"type": "keyword"},
        "page": {"type": "integer"},
        "char_start": {"type": "integer"},
        "char_end": {"type": "integer"},
        "sequence": {"type": "integer"},
        "content_hash": {"type": "keyword"},
        "document_hash": {"type": "keyword"},
        "criterion_question_hash": {"type": "keyword"},
        "passages": {"type": "integer"},
        "spans": {"type": "integer"},
        "metadata": {
            "type": "object",
            "properties": {key: _keyword() for key in KNOWN_METADATA_KEYS},
        },
    }
    if dimension > 0:
        properties[VECTOR_FIELD] = {
            "type": "knn_vector",
            "dimension": dimension,
            "method": {
                "name": "hnsw",
                "engine": "faiss",
                "space_type": "cosinesimil",
                "parameters": {"m": 16, "ef_construction": 128},
            },
        }
    # Every metadata value is a keyword: term filters on strings, numbers and booleans
    # behave alike (OpenSearch converts the query value), and _source keeps the original type.
    dynamic_templates = [
        {f"metadata_{kind}": {"path_match": "metadata.*", "match_mapping_type": kind, "mapping": _keyword()}}
        for kind in ("string", "long", "double", "boolean")
    ]
    return {
        "_meta": {"evidence_schema": SCHEMA_VERSION, "embedder_id": embedder_id, "dimension": dimension},
        "dynamic": True,
        "dynamic_templates": dynamic_templates,
        "properties": properties,
    }


def index_settings(*, serverless: bool, k1: float = 1.2, b: float = 0.75) -> dict[str, Any]:
    settings: dict[str, Any] = {"index": {"knn": True}}
    if not serverless:
        # Serverless manages similarity and shards itself and rejects these settings.
        settings["index"]["similarity"] = {"default": {"type": "BM25", "k1": k1, "b": b}}
    return settings


def create_index_body(
    embedder_id: str, dimension: int, *, serverless: bool = False, k1: float = 1.2, b: float = 0.75
) -> dict[str, Any]:
    """PUT /{index}."""
    return {
        "settings": index_settings(serverless=serverless, k1=k1, b=b),
        "mappings": mappings(embedder_id, dimension),
    }


def index_template_body(
    patterns: Sequence[str],
    embedder_id: str,
    dimension: int,
    *,
    serverless: bool = False,
    priority: int = 100,
) -> dict[str, Any]:
    """PUT /_index_template/{name}: the same settings and mappings for indexes created by writes."""
    return {
        "index_patterns": list(patterns),
        "priority": priority,
        "template": create_index_body(embedder_id, dimension, serverless=serverless),
        "_meta": {"managed_by": "evidence", "evidence_schema": SCHEMA_VERSION},
    }


def normalization_pipeline_body(weights: tuple[float, float] = (0.5, 0.5)) -> dict[str, Any]:
    """PUT /_search/pipeline/evidence-hybrid-minmax: min-max + weighted arithmetic mean."""
    return {
        "description": "evidence hybrid: min_max normalisation, arithmetic mean (lexical, dense)",
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": "min_max"},
                    "combination": {
                        "technique": "arithmetic_mean",
                        "parameters": {"weights": list(weights)},
                    },
                }
            }
        ],
    }


def rrf_pipeline_body(rank_constant: int = RRF_RANK_CONSTANT) -> dict[str, Any]:
    """PUT /_search/pipeline/evidence-hybrid-rrf: score-ranker-processor RRF (OpenSearch >= 2.19)."""
    return {
        "description": "evidence hybrid: reciprocal rank fusion (lexical, dense)",
        "phase_results_processors": [
            {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": rank_constant}}}
        ],
    }


# --- documents ------------------------------------------------------------------------------


def chunk_source(
    chunk: Chunk, document_hash: str, vector: Sequence[float] | np.ndarray | None
) -> dict[str, Any]:
    source: dict[str, Any] = {
        "chunk_id": chunk.chunk_id,
        "document_id": chunk.document_id,
        "kind": chunk.kind.value,
        "text": chunk.text,
        LEXICAL_FIELD: chunk.search_text,
        "title": chunk.title,
        "source": chunk.source,
        "section": chunk.section,
        "page": chunk.page,
        "span_type": chunk.span_type.value if chunk.span_type is not None else None,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "sequence": chunk.sequence,
        "content_hash": chunk.content_hash,
        "document_hash": document_hash,
        "criterion_question_hash": chunk.metadata.get("criterion_question_hash"),
        "metadata": dict(chunk.metadata),
    }
    if vector is not None:
        source[VECTOR_FIELD] = [float(x) for x in vector]
    return source


def marker_source(doc: DocumentChunks) -> dict[str, Any]:
    passages = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
    return {
        "chunk_id": marker_id(doc.document_id),
        "document_id": doc.document_id,
        "kind": MARKER_KIND,
        "source": doc.source,
        "document_hash": doc.content_hash,
        "passages": passages,
        "spans": len(doc.chunks) - passages,
        "metadata": dict(doc.metadata),
    }


def usable_vector(row: np.ndarray) -> np.ndarray | None:
    """A row of NaN means "no vector for this chunk" (the service does not embed spans); a zero
    row has no direction, and OpenSearch refuses it in a cosine space. Both are stored without one."""
    arr = np.asarray(row, dtype=np.float32)
    if not np.isfinite(arr).all() or not arr.any():
        return None
    return arr


def bulk_actions(
    index: str, doc: DocumentChunks, vectors: np.ndarray | None, *, with_ids: bool = True
) -> Iterator[dict[str, Any]]:
    """`helpers.streaming_bulk` actions for the chunks of one document (marker excluded).

    `with_ids=False` for Serverless vector collections, which assign their own ids.
    """
    for i, chunk in enumerate(doc.chunks):
        action: dict[str, Any] = {
            "_op_type": "index",
            "_index": index,
            "_source": chunk_source(
                chunk, doc.content_hash, None if vectors is None else usable_vector(vectors[i])
            ),
        }
        if with_ids:
            action["_id"] = chunk.chunk_id
        yield action


def bulk_lines(actions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The NDJSON lines `streaming_bulk` sends for `actions`, expanded by opensearch-py itself."""
    from opensearchpy.helpers.actions import expand_action

    lines: list[dict[str, Any]] = []
    for action in actions:
        meta, source = expand_action(dict(action))
        lines.append(meta)
        if source is not None:
            lines.append(source)
    return lines


# --- queries --------------------------------------------------------------------------------


def _field_for(key: str) -> str:
    if not key or key.startswith(("_", ".")) or key.endswith(".") or ".." in key:
        raise RequestValidationError(f"invalid filter key {key!r}", field="filters")
    return key if key in BUILTIN_FILTER_FIELDS else f"metadata.{key}"


def filter_clauses(filters: Mapping[str, Any] | None, kind: ChunkKind | None) -> list[dict[str, Any]]:
    """Term / terms clauses for `filters` plus the kind restriction (markers are never hits)."""
    clauses: list[dict[str, Any]] = []
    if kind is None:
        clauses.append({"terms": {"kind": list(CHUNK_KINDS)}})
    else:
        clauses.append({"term": {"kind": kind.value}})
    for key, value in (filters or {}).items():
        field = _field_for(key)
        if isinstance(value, str | int | bool | float):
            clauses.append({"term": {field: value}})
        elif isinstance(value, Sequence):
            clauses.append({"terms": {field: [str(v) for v in value]}})
        else:
            raise RequestValidationError(
                f"filter {key!r}: expected a string, number, boolean or list of strings", field="filters"
            )
    return clauses


_SOURCE_EXCLUDES = {"excludes": [VECTOR_FIELD, LEXICAL_FIELD]}


def lexical_query(text: str, clauses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"bool": {"must": [{"match": {LEXICAL_FIELD: {"query": text}}}], "filter": clauses}}


def knn_query(vector: Sequence[float], k: int, clauses: list[dict[str, Any]]) -> dict[str, Any]:
    """Efficient filtering: the filter sits inside `knn`, so k results survive it."""
    return {
        "knn": {
            VECTOR_FIELD: {
                "vector": [float(x) for x in vector],
                "k": k,
                "filter": {"bool": {"filter": clauses}},
            }
        }
    }


def lexical_body(
    text: str, *, k: int, filters: Mapping[str, Any] | None, kind: ChunkKind | None
) -> dict[str, Any]:
    return {
        "size": k,
        "query": lexical_query(text, filter_clauses(filters, kind)),
        "_source": _SOURCE_EXCLUDES,
        "track_total_hits": False,
    }


def knn_body(
    vector: Sequence[float], *, k: int, filters: Mapping[str, Any] | None, kind: ChunkKind | None
) -> dict[str, Any]:
    return {
        "size": k,
        "query": knn_query(vector, k, filter_clauses(filters, kind)),
        "_source": _SOURCE_EXCLUDES,
        "track_total_hits": False,
    }


def hybrid_body(
    text: str,
    vector: Sequence[float],
    *,
    k: int,
    filters: Mapping[str, Any] | None,
    kind: ChunkKind | None,
    pagination_depth: int | None = None,
) -> dict[str, Any]:
    """Server-side hybrid (queries: lexical first, dense second; the pipeline's weights follow).

    `pagination_depth` is how deep each sub-query collects before fusion; the first-stage k
    is the natural value, and OpenSearch requires size <= pagination_depth.
    """
    clauses = filter_clauses(filters, kind)
    depth = max(k, pagination_depth or k)
    return {
        "size": k,
        "query": {
            "hybrid": {
                "queries": [lexical_query(text, clauses), knn_query(vector, depth, clauses)],
                "pagination_depth": depth,
            }
        },
        "_source": _SOURCE_EXCLUDES,
    }


def lookup_body(
    filters: Mapping[str, Any],
    *,
    size: int,
    kind: ChunkKind | None,
    search_after: list[Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "size": size,
        "query": {"bool": {"filter": filter_clauses(filters, kind)}},
        "sort": [{"document_id": "asc"}, {"kind": "asc"}, {"sequence": "asc"}, {"chunk_id": "asc"}],
        "_source": _SOURCE_EXCLUDES,
        "track_total_hits": False,
    }
    if search_after is not None:
        body["search_after"] = search_after
    return body


def vectors_body(chunk_ids: Sequence[str]) -> dict[str, Any]:
    """By the `chunk_id` field, not `_id`: Serverless vector collections assign their own ids."""
    return {
        "size": len(chunk_ids),
        "query": {"bool": {"filter": [{"terms": {"chunk_id": list(chunk_ids)}}]}},
        "_source": {"includes": ["chunk_id", VECTOR_FIELD]},
    }


def markers_body(document_ids: Sequence[str]) -> dict[str, Any]:
    return {
        "size": len(document_ids),
        "query": {
            "bool": {
                "filter": [
                    {"term": {"kind": MARKER_KIND}},
                    {"terms": {"document_id": list(document_ids)}},
                ]
            }
        },
        "_source": {"includes": ["document_id", "document_hash"]},
    }


def delete_documents_body(
    document_ids: Sequence[str], *, keep_chunk_ids: Sequence[str] = ()
) -> dict[str, Any]:
    """Chunks of documents (markers included unless kept); `keep_chunk_ids` spares new versions'.

    Chunk ids derive from the document id, so one flat keep-list serves many documents.
    """
    query: dict[str, Any] = {"bool": {"filter": [{"terms": {"document_id": list(document_ids)}}]}}
    if keep_chunk_ids:
        query["bool"]["must_not"] = [{"terms": {"chunk_id": list(keep_chunk_ids)}}]
    return {"query": query}


def count_body(kind: str | Sequence[str]) -> dict[str, Any]:
    if isinstance(kind, str):
        return {"query": {"term": {"kind": kind}}}
    return {"query": {"terms": {"kind": list(kind)}}}


# --- responses ------------------------------------------------------------------------------


def chunk_from_source(source: Mapping[str, Any]) -> Chunk:
    span_type = source.get("span_type")
    return Chunk(
        chunk_id=str(source["chunk_id"]),
        document_id=str(source["document_id"]),
        kind=ChunkKind(source["kind"]),
        text=str(source.get("text", "")),
        char_start=int(source.get("char_start") or 0),
        char_end=int(source.get("char_end") or 0),
        sequence=int(source.get("sequence") or 0),
        source=str(source.get("source") or ""),
        title=str(source.get("title") or ""),
        section=str(source.get("section") or ""),
        page=None if source.get("page") is None else int(source["page"]),
        span_type=None if not span_type else SpanType(span_type),
        metadata=dict(source.get("metadata") or {}),
        content_hash=str(source.get("content_hash") or ""),
    )


def cosine_from_score(score: float) -> float:
    """faiss/lucene `cosinesimil` report (2 - d) / 2 = (1 + cos) / 2; the port wants cos."""
    return max(-1.0, min(1.0, 2.0 * score - 1.0))


def _raw_hits(response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    hits = response.get("hits") or {}
    return list(hits.get("hits") or [])


def parse_lexical(response: Mapping[str, Any]) -> list[SearchHit]:
    out = []
    for hit in _raw_hits(response):
        score = float(hit.get("_score") or 0.0)
        out.append(SearchHit(chunk=chunk_from_source(hit["_source"]), score=score, lexical=score))
    return out


def parse_dense(response: Mapping[str, Any]) -> list[SearchHit]:
    out = []
    for hit in _raw_hits(response):
        cos = cosine_from_score(float(hit.get("_score") or 0.0))
        out.append(SearchHit(chunk=chunk_from_source(hit["_source"]), score=cos, dense=cos))
    return out


def parse_hybrid(response: Mapping[str, Any]) -> list[SearchHit]:
    """Fused hits in the server's order; the fused score is on the pipeline's own scale."""
    return [
        SearchHit(chunk=chunk_from_source(hit["_source"]), score=float(hit.get("_score") or 0.0))
        for hit in _raw_hits(response)
    ]


def parse_lookup(response: Mapping[str, Any]) -> list[SearchHit]:
    return [SearchHit(chunk=chunk_from_source(hit["_source"]), score=0.0) for hit in _raw_hits(response)]


def parse_vectors(response: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for hit in _raw_hits(response):
        source = hit.get("_source") or {}
        vec = source.get(VECTOR_FIELD)
        if vec is not None:
            out[str(source["chunk_id"])] = np.asarray(vec, dtype=np.float32)
    return out


def index_meta(mapping_response: Mapping[str, Any], index: str) -> dict[str, Any]:
    """`_meta` of an index from GET /{index} (or GET /{index}/_mapping)."""
    body: Mapping[str, Any] = mapping_response.get(index) or next(iter(mapping_response.values()), {})
    meta = (body.get("mappings") or {}).get("_meta") or {}
    return dict(meta)
