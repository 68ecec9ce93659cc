"""Request bodies for the OpenSearch adapter: pure functions, no client (parsing the responses:
`opensearch_responses`). Kept apart from the adapter so that every body can be validated against
OpenSearch's official API spec (tests/unit/search/opensearch/) without a cluster.

Stored document layout (one OpenSearch document per chunk, `_id` = chunk id on managed
clusters, server-assigned on Serverless):
    chunk_id, document_id, kind, text, search_text, title, source, section, page, span_type,
    char_start, char_end, sequence, content_hash, document_hash, criterion_question_hash,
    generation, metadata{...}, embedding[dim]
and, on a passage (schema 3, `anchor_source`), anchor_vectors{...}: the focus span anchor's
vectors, kept in `_source` only (`enabled: false`: never parsed or indexed), read by chunk id;
plus one *marker* document per source document (`kind == "document"`) that records the
document's content hash and the `generation` of its chunks. A generation is a fresh token per
write; the marker is written only after every chunk of that generation was acknowledged and the
rows of other generations were removed, so a marker always certifies a complete document, and
"remove what is stale" is one term per batch (`generation != g`) however many chunks there are.

Bodies differ by cluster version (`Capabilities`): only what the target accepts is sent.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evidence.errors import RequestValidationError
from evidence.names import validate_index_name
from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.search.analysis import with_joined_compounds
from evidence.search.base import AnchorVectors
from evidence.search.headers import OFF, SectionHeaders

#: Bump when the stored layout changes; recorded in the index `_meta`.
#: 2: `generation` on every row, no date/numeric detection.
#: 3: `anchor_vectors` on passages (the focus span anchor's vectors; absent from older rows).
SCHEMA_VERSION = 3
VECTOR_FIELD = "embedding"
#: The focus span anchor's vectors on a passage document (docs/opensearch.md#anchor-vectors).
ANCHOR_FIELD = "anchor_vectors"
LEXICAL_FIELD = "search_text"
MARKER_KIND = "document"
#: Filter keys that are top-level fields; every other key is `metadata.<key>`.
BUILTIN_FILTER_FIELDS = frozenset(
    {"chunk_id", "document_id", "kind", "span_type", "section", "criterion_question_hash"}
)
#: Metadata keys mapped explicitly (the seeds filter and sort on them); others via dynamic templates.
KNOWN_METADATA_KEYS = ("type", "round_number", "criterion_question_hash", "FILENAME")
CHUNK_KINDS = (ChunkKind.PASSAGE.value, ChunkKind.SPAN.value)
GENERATION_FIELD = "generation"
#: Document ids per terms clause; far below index.max_terms_count (65,536 by default).
MAX_TERMS = 1_000
#: from + size may not pass index.max_result_window (10,000 by default).
MAX_RESULT_WINDOW = 10_000

#: The oldest OpenSearch these bodies are written for: the `hybrid` query and the
#: normalization-processor arrived in 2.10 (neural-search 2.10.0 release notes).
MIN_VERSION = (2, 10, 0)
#: `pagination_depth` in `hybrid` (docs: "Paginating hybrid query results", introduced 2.19),
#: the score-ranker-processor's RRF (2.19) and faiss with `cosinesimil` (k-NN #2376, 2.19).
V2_19 = (2, 19, 0)

#: `action.auto_create_index` for a cluster evidence owns: only dot-prefixed (system/plugin)
#: indexes may be created by a write; every name evidence allows (`evidence.names`: never a dot
#: first) must be created by `create_index`, with its mappings and `_meta`. Otherwise a bulk into
#: an index another process just deleted re-creates it with dynamic mappings and no record
#: (docs/opensearch.md#no-implicit-index-creation). Patterns: first match wins, no match refuses.
AUTO_CREATE_INDEX = "+.*,-*"

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


def new_generation() -> str:
    """Sortable by time (the newest marker wins if a redelivery left two), unique by chance."""
    return f"{time.time_ns():016x}-{os.urandom(4).hex()}"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the target accepts, so no body carries a field its parser would reject.

    Serverless reports no version: it gets the bodies every supported version accepts
    (lucene engine, no `pagination_depth`, no RRF) and no BM25/refresh settings.
    """

    version: tuple[int, ...] = V2_19
    serverless: bool = False

    @classmethod
    def serverless_collection(cls) -> Capabilities:
        return cls(version=MIN_VERSION, serverless=True)

    def _at_least(self, version: tuple[int, ...]) -> bool:
        return not self.serverless and self.version >= version

    @property
    def knn_engine(self) -> str:
        # lucene has had cosinesimil and efficient filtering since 2.4; faiss has cosinesimil from 2.19.
        return "faiss" if self._at_least(V2_19) else "lucene"

    @property
    def pagination_depth(self) -> bool:
        return self._at_least(V2_19)

    @property
    def rrf(self) -> bool:
        return self._at_least(V2_19)


LATEST = Capabilities()


# --- index lifecycle ------------------------------------------------------------------------


def _keyword() -> dict[str, Any]:
    return {"type": "keyword", "ignore_above": _IGNORE_ABOVE}


def mappings(
    embedder_id: str,
    dimension: int,
    caps: Capabilities = LATEST,
    written_with: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Field mappings; `_meta` records the embedder so a mismatch can be refused later, and
    `written_with` (`search.written`: the indexing settings the index is created under, when
    given) so that `evidence migrate` can refuse to mix another's documents into it."""
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
        GENERATION_FIELD: {"type": "keyword"},
        "passages": {"type": "integer"},
        "spans": {"type": "integer"},
        ANCHOR_FIELD: anchor_mapping(),
        "metadata": {
            "type": "object",
            "properties": {key: _keyword() for key in KNOWN_METADATA_KEYS},
        },
    }
    engine = caps.knn_engine
    if dimension > 0:
        properties[VECTOR_FIELD] = {
            "type": "knn_vector",
            "dimension": dimension,
            "method": {
                "name": "hnsw",
                "engine": engine,
                "space_type": "cosinesimil",
                "parameters": {"m": 16, "ef_construction": 128},
            },
        }
    # Every metadata value is a keyword: term filters on strings, numbers and booleans
    # behave alike (OpenSearch converts the query value), and _source keeps the original type.
    # Date detection is OpenSearch's default: "2024-05-01" would map a key as `date` and every
    # later non-date value of that key would fail its document. Off, whatever a value looks like.
    dynamic_templates = [
        {f"metadata_{kind}": {"path_match": "metadata.*", "match_mapping_type": kind, "mapping": _keyword()}}
        for kind in ("string", "long", "double", "boolean", "date")
    ]
    meta: dict[str, Any] = {
        "evidence_schema": SCHEMA_VERSION,
        "embedder_id": embedder_id,
        "dimension": dimension,
        "engine": engine if dimension > 0 else None,
    }
    if written_with:
        meta["written_with"] = dict(written_with)
    return {
        "_meta": meta,
        "dynamic": True,
        "date_detection": False,
        "numeric_detection": False,
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
    embedder_id: str,
    dimension: int,
    caps: Capabilities = LATEST,
    *,
    k1: float = 1.2,
    b: float = 0.75,
    written_with: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """PUT /{index}."""
    return {
        "settings": index_settings(serverless=caps.serverless, k1=k1, b=b),
        "mappings": mappings(embedder_id, dimension, caps, written_with),
    }


def auto_create_index_body(value: str = AUTO_CREATE_INDEX) -> dict[str, Any]:
    """`PUT _cluster/settings`: persistent, so it outlives a full cluster restart."""
    return {"persistent": {"action.auto_create_index": value}}


def index_template_body(
    patterns: Sequence[str],
    embedder_id: str,
    dimension: int,
    caps: Capabilities = LATEST,
    *,
    k1: float = 1.2,
    b: float = 0.75,
    priority: int = 100,
) -> dict[str, Any]:
    """PUT /_index_template/{name}: the same settings and mappings for indexes created by writes."""
    return {
        "index_patterns": list(patterns),
        "priority": priority,
        "template": create_index_body(embedder_id, dimension, caps, k1=k1, b=b),
        "_meta": {"managed_by": "evidence", "evidence_schema": SCHEMA_VERSION},
    }


def anchor_mapping() -> dict[str, Any]:
    """`anchor_vectors`: an object kept in `_source` and nothing else (not parsed, not indexed,
    no doc values, not in the k-NN graph)."""
    return {"type": "object", "enabled": False}


def generation_mapping() -> dict[str, Any]:
    """PUT /{index}/_mapping for a schema-1 index: the field later writes filter on."""
    return {"properties": {GENERATION_FIELD: {"type": "keyword"}}}


def anchor_vectors_mapping() -> dict[str, Any]:
    """PUT /{index}/_mapping for a schema-1 or 2 index before a write that keeps anchor vectors
    (else the write would map the field dynamically, indexing the vectors as text)."""
    return {"properties": {ANCHOR_FIELD: anchor_mapping()}}


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
    chunk: Chunk,
    document_hash: str,
    vector: Sequence[float] | np.ndarray | None,
    generation: str = "",
    headers: SectionHeaders = OFF,
    *,
    anchor: AnchorVectors | None = None,
) -> dict[str, Any]:
    """One chunk's document. The lexical field is `Chunk.search_text` (title + text), with the
    section header between them under a header rule (docs/ingest.md#section-headers)."""
    source: dict[str, Any] = {
        "chunk_id": chunk.chunk_id,
        "document_id": chunk.document_id,
        "kind": chunk.kind.value,
        "text": chunk.text,
        LEXICAL_FIELD: headers.lexical_text(chunk),
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
        GENERATION_FIELD: generation,
        "metadata": dict(chunk.metadata),
    }
    if vector is not None:
        source[VECTOR_FIELD] = [float(x) for x in vector]
    if anchor is not None:
        source[ANCHOR_FIELD] = anchor_source(anchor)
    return source


#: How `anchor_source` stores a vector: float16 little-endian, read back as float32 (the embedded
#: store's cache holds float32). Half the bytes of float32, and on the 19 development families not
#: one of 9,257 anchors moves (int8 with a scale moves 13): docs/opensearch.md#anchor-vectors.
#: `opensearch_responses.parse_anchor_vectors` reads "<f4" too.
ANCHOR_DTYPE = "<f2"


def _packed(rows: Sequence[np.ndarray]) -> str:
    import base64

    if not rows:
        return ""
    packed = np.stack([np.asarray(r, dtype=ANCHOR_DTYPE) for r in rows]).tobytes()
    return base64.b64encode(packed).decode("ascii")


def anchor_source(anchor: AnchorVectors) -> dict[str, Any]:
    """A passage's `anchor_vectors` (`search.base.AnchorVectors`): its spans' sequences and their
    late vectors, its headings' texts and their vectors, each set of vectors one base64 string of
    float32 rows (`opensearch_responses.parse_anchor_vectors` reads it back)."""
    spans = sorted(anchor.spans)
    headings = list(anchor.headings)
    dims = {int(np.asarray(v).shape[-1]) for v in (*anchor.spans.values(), *anchor.headings.values())}
    return {
        "dtype": ANCHOR_DTYPE,
        "dim": dims.pop() if len(dims) == 1 else 0,
        "spans": spans,
        "late": _packed([anchor.spans[q] for q in spans]),
        "headings": headings,
        "heading_vectors": _packed([anchor.headings[h] for h in headings]),
    }


def marker_source(doc: DocumentChunks, generation: str = "") -> dict[str, Any]:
    passages = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
    return {
        "chunk_id": marker_id(doc.document_id),
        "document_id": doc.document_id,
        "kind": MARKER_KIND,
        "source": doc.source,
        "document_hash": doc.content_hash,
        GENERATION_FIELD: generation,
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
    index: str,
    doc: DocumentChunks,
    vectors: np.ndarray | None,
    generation: str = "",
    *,
    with_ids: bool = True,
    headers: SectionHeaders = OFF,
    anchors: Mapping[int, AnchorVectors] | None = None,
) -> Iterator[dict[str, Any]]:
    """`helpers.streaming_bulk` actions for the chunks of one document (marker excluded).

    `with_ids=False` for Serverless vector collections, which assign their own ids. `anchors`:
    by chunk position, the anchor vectors kept with a passage (`anchor_source`).
    """
    for i, chunk in enumerate(doc.chunks):
        action: dict[str, Any] = {
            "_op_type": "index",
            "_index": index,
            "_source": chunk_source(
                chunk,
                doc.content_hash,
                None if vectors is None else usable_vector(vectors[i]),
                generation,
                headers,
                anchor=(anchors or {}).get(i),
            ),
        }
        if with_ids:
            action["_id"] = chunk.chunk_id
        yield action


def marker_action(
    index: str, doc: DocumentChunks, generation: str, *, with_ids: bool = True
) -> dict[str, Any]:
    action: dict[str, Any] = {"_op_type": "index", "_index": index, "_source": marker_source(doc, generation)}
    if with_ids:
        action["_id"] = marker_id(doc.document_id)
    return action


def delete_action(index: str, doc_id: str) -> dict[str, Any]:
    """Delete one stored row by its `_id` (Serverless has no `_delete_by_query`)."""
    return {"_op_type": "delete", "_index": index, "_id": doc_id}


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


#: No read but the anchor's own (`anchor_vectors_body`) returns the vectors: hits stay their size.
_SOURCE_EXCLUDES = {"excludes": [VECTOR_FIELD, LEXICAL_FIELD, ANCHOR_FIELD]}

#: What a `light` read returns of each hit (`SearchReader.dense(..., light=True)`): what
#: `chunk_from_source` requires and a passage's place in its document, no text or metadata. The
#: focus span anchor's k-NN read over the hits' documents (`passage_scores`) needs no more.
LIGHT_FIELDS = ("chunk_id", "document_id", "kind", "char_start", "char_end", "sequence")
_SOURCE_LIGHT = {"includes": list(LIGHT_FIELDS)}


def _source(light: bool) -> dict[str, list[str]]:
    return _SOURCE_LIGHT if light else _SOURCE_EXCLUDES


def lexical_query(text: str, clauses: list[dict[str, Any]]) -> dict[str, Any]:
    """The BM25 match of every lexical read (ranked, counted, hybrid): the query's hyphenated
    compounds also asked joined, as the embedded backend asks them (`with_joined_compounds`)."""
    query = with_joined_compounds(text)
    return {"bool": {"must": [{"match": {LEXICAL_FIELD: {"query": query}}}], "filter": clauses}}


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


def term_count_lines(
    texts: Sequence[str], *, cap: int, filters: Mapping[str, Any] | None, kind: ChunkKind | None
) -> list[dict[str, Any]]:
    """One `_msearch` (header, body per text) counting what `lexical_body` would match for each
    text: the same match query and filter clauses, no hits (`size` 0), totals tracked up to `cap`
    (exact below it, a lower bound at it: all a capped count needs)."""
    clauses = filter_clauses(filters, kind)
    lines: list[dict[str, Any]] = []
    for text in texts:
        lines.append({})
        lines.append({"size": 0, "query": lexical_query(text, clauses), "track_total_hits": cap})
    return lines


def knn_body(
    vector: Sequence[float],
    *,
    k: int,
    filters: Mapping[str, Any] | None,
    kind: ChunkKind | None,
    light: bool = False,
) -> dict[str, Any]:
    """`light`: each hit's `_source` holds `LIGHT_FIELDS` only (else everything but vectors)."""
    return {
        "size": k,
        "query": knn_query(vector, k, filter_clauses(filters, kind)),
        "_source": _source(light),
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
    caps: Capabilities = LATEST,
) -> dict[str, Any]:
    """Server-side hybrid (queries: lexical first, dense second; the pipeline's weights follow).

    `pagination_depth` is how deep each sub-query collects before fusion: the k-NN leg's k goes
    that deep on every version, the `pagination_depth` field itself is sent only where the
    parser knows it (>= 2.19; older parsers reject unknown fields). OpenSearch requires
    size <= pagination_depth.
    """
    clauses = filter_clauses(filters, kind)
    depth = max(k, pagination_depth or k)
    hybrid: dict[str, Any] = {"queries": [lexical_query(text, clauses), knn_query(vector, depth, clauses)]}
    if caps.pagination_depth:
        hybrid["pagination_depth"] = depth
    return {"size": k, "query": {"hybrid": hybrid}, "_source": _SOURCE_EXCLUDES}


def zero_vector_body(
    *, k: int, filters: Mapping[str, Any] | None, kind: ChunkKind | None, light: bool = False
) -> dict[str, Any]:
    """What a zero query vector finds: a cosine space refuses it (no direction), so instead of a
    k-NN query, chunks that have a vector, each with similarity 0 (as the embedded backend
    scores them), in chunk-id order. `light` as in `knn_body`."""
    clauses = [*filter_clauses(filters, kind), {"exists": {"field": VECTOR_FIELD}}]
    return {
        "size": k,
        "query": {"bool": {"filter": clauses}},
        "sort": [{"chunk_id": "asc"}],
        "_source": _source(light),
        "track_total_hits": False,
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


#: The cardinality aggregation's largest precision threshold (OpenSearch caps it at 40,000):
#: below it a distinct count is exact (up to hash collisions), above it an estimate.
CARDINALITY_PRECISION = 40_000
#: The aggregation's name in `document_count_body` and its response.
DOCUMENT_COUNT_AGG = "documents"


def document_count_body(filters: Mapping[str, Any] | None) -> dict[str, Any]:
    """How many documents have a chunk within `filters`: no hits, one cardinality aggregation
    on `document_id` (`Search.document_count`)."""
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"filter": filter_clauses(filters, None)}},
        "aggs": {
            DOCUMENT_COUNT_AGG: {
                "cardinality": {"field": "document_id", "precision_threshold": CARDINALITY_PRECISION}
            }
        },
    }


def document_page_body(*, size: int, search_after: list[Any] | None = None) -> dict[str, Any]:
    """One page of an index's document markers, in document-id order (`evidence list --index`);
    the chunk id breaks ties between two generations of one marker (Serverless, briefly)."""
    body: dict[str, Any] = {
        "size": size,
        "query": {"bool": {"filter": [{"term": {"kind": MARKER_KIND}}]}},
        "sort": [{"document_id": "asc"}, {"chunk_id": "asc"}],
        "_source": {"includes": ["document_id", "source", GENERATION_FIELD, "passages", "spans"]},
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


#: At most this many passages answer one anchor read (`anchor_vectors_body`): a question's ~10
#: hits overlap a few dozen.
ANCHOR_READ_SIZE = 1_000


def anchor_vectors_body(
    ranges: Sequence[tuple[str, int, int]], *, filters: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The focus span anchor's read: `anchor_vectors` (and the chunk id) of every passage within
    `filters` that overlaps one of `ranges` (document id, start, end: a question's hits; a span
    inside a hit was pooled in a passage overlapping it, `embed.late.late_ranges`), nothing else.
    By fields, not `_id` (Serverless assigns its own ids, so no `mget`)."""
    overlaps = [
        {
            "bool": {
                "filter": [
                    {"term": {"document_id": document_id}},
                    {"range": {"char_start": {"lt": end}}},
                    {"range": {"char_end": {"gt": start}}},
                ]
            }
        }
        for document_id, start, end in ranges
    ]
    return {
        "size": ANCHOR_READ_SIZE,
        "query": {
            "bool": {
                "filter": [
                    *filter_clauses(filters, ChunkKind.PASSAGE),
                    {"bool": {"should": overlaps, "minimum_should_match": 1}},
                ]
            }
        },
        "_source": {"includes": ["chunk_id", "document_id", ANCHOR_FIELD]},
        "track_total_hits": False,
    }


def markers_body(document_ids: Sequence[str]) -> dict[str, Any]:
    """Every marker of the documents (Serverless may briefly hold two after a redelivery)."""
    return {
        "size": min(MAX_RESULT_WINDOW, 4 * len(document_ids)),
        "query": {
            "bool": {
                "filter": [
                    {"term": {"kind": MARKER_KIND}},
                    {"terms": {"document_id": list(document_ids)}},
                ]
            }
        },
        "_source": {"includes": ["document_id", "document_hash", GENERATION_FIELD, "passages", "spans"]},
    }


def delete_documents_body(document_ids: Sequence[str]) -> dict[str, Any]:
    """Every row (chunks and markers) of the documents."""
    return {"query": {"bool": {"filter": [{"terms": {"document_id": list(document_ids)}}]}}}


def stale_query(document_ids: Sequence[str], keep_generations: Sequence[str]) -> dict[str, Any]:
    """Rows of the documents from any other generation (older versions, an interrupted write,
    rows of a schema-1 index with no generation): one term per generation, not per chunk."""
    return {
        "bool": {
            "filter": [{"terms": {"document_id": list(document_ids)}}],
            "must_not": [{"terms": {GENERATION_FIELD: list(keep_generations)}}],
        }
    }


def stale_delete_body(document_ids: Sequence[str], keep_generations: Sequence[str]) -> dict[str, Any]:
    """POST /{index}/_delete_by_query (managed clusters)."""
    return {"query": stale_query(document_ids, keep_generations)}


def rows_body(query: Mapping[str, Any], *, size: int, offset: int = 0) -> dict[str, Any]:
    """Ids of the rows a query matches, for deleting them one by one (Serverless)."""
    return {
        "from": offset,
        "size": size,
        "query": dict(query),
        # unmapped_type: a schema-1 index may not map `generation` yet.
        "sort": [{"chunk_id": "asc"}, {GENERATION_FIELD: {"order": "asc", "unmapped_type": "keyword"}}],
        "_source": {"includes": ["document_id", "chunk_id", GENERATION_FIELD]},
        "track_total_hits": False,
    }


def sectioned_body() -> dict[str, Any]:
    """A count of the passages and spans that have a section (not the empty one): whether an
    index holds a chunk a section header rule shapes (docs/opensearch.md#indexing-settings-of-an-index)."""
    return {
        "query": {
            "bool": {
                "filter": [{"terms": {"kind": list(CHUNK_KINDS)}}, {"exists": {"field": "section"}}],
                "must_not": [{"term": {"section": ""}}],
            }
        }
    }


def count_body(kind: str | Sequence[str]) -> dict[str, Any]:
    if isinstance(kind, str):
        return {"query": {"term": {"kind": kind}}}
    return {"query": {"terms": {"kind": list(kind)}}}
