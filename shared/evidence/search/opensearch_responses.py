"""Response parsing for the OpenSearch adapter: pure functions, no client.

The other half of `opensearch_bodies`: stored rows back into chunks, scores back into cosines,
hits of every query shape (tested on the spec's own response shapes, tests/unit/search/opensearch/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from evidence.errors import BackendError
from evidence.records import Chunk, ChunkKind, SearchHit, SpanType
from evidence.search.base import AnchorVectors
from evidence.search.opensearch_bodies import ANCHOR_FIELD, GENERATION_FIELD, VECTOR_FIELD


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


#: `_score` of a `cosinesimil` k-NN hit as each engine computes it, for the versions we send it to:
#: - lucene: Lucene's VectorSimilarityFunction.COSINE, (1 + cos) / 2 (OpenSearch's Lucene
#:   engine returns Lucene's score unchanged: k-NN `Lucene.score`).
#: - faiss (>= 2.19): inner product of normalised vectors ip = cos, translated by
#:   `SpaceType.COSINESIMIL.scoreTranslation(1 - ip)` = max((2 - d) / 2, 0) with d = 1 - cos
#:   (k-NN #2375, #2376; docs "Spaces": score = (2 - d) / 2).
#: Before 2.19 the nmslib/faiss translation was 1 / (1 + d) = 1 / (2 - cos); we never create
#: such an index (faiss only from 2.19, lucene below).
KNN_ENGINES = ("faiss", "lucene")


def cosine_from_score(score: float, engine: str = "faiss") -> float:
    """The port wants cos in [-1, 1]; both engines report (1 + cos) / 2 on our versions."""
    if engine not in KNN_ENGINES:
        raise ValueError(f"unknown k-NN engine {engine!r}; expected one of {KNN_ENGINES}")
    return max(-1.0, min(1.0, 2.0 * score - 1.0))


def _raw_hits(response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Hits, the first of each chunk id only: on Serverless a rewritten chunk can be seen twice
    until the next write of its document cleans up (docs/opensearch.md, consistency window)."""
    hits = response.get("hits") or {}
    seen: set[str] = set()
    out = []
    for hit in hits.get("hits") or []:
        chunk_id = str((hit.get("_source") or {}).get("chunk_id", hit.get("_id", "")))
        if chunk_id in seen:
            continue
        seen.add(chunk_id)
        out.append(hit)
    return out


def parse_lexical(response: Mapping[str, Any]) -> list[SearchHit]:
    out = []
    for hit in _raw_hits(response):
        score = float(hit.get("_score") or 0.0)
        out.append(SearchHit(chunk=chunk_from_source(hit["_source"]), score=score, lexical=score))
    return out


def parse_dense(response: Mapping[str, Any], engine: str = "faiss") -> list[SearchHit]:
    out = []
    for hit in _raw_hits(response):
        cos = cosine_from_score(float(hit.get("_score") or 0.0), engine)
        out.append(SearchHit(chunk=chunk_from_source(hit["_source"]), score=cos, dense=cos))
    return out


def parse_zero_vector(response: Mapping[str, Any]) -> list[SearchHit]:
    return [
        SearchHit(chunk=chunk_from_source(hit["_source"]), score=0.0, dense=0.0)
        for hit in _raw_hits(response)
    ]


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


def _unpacked(packed: Any, dtype: str, dim: int, rows: int) -> np.ndarray | None:
    """`rows` float vectors of `dim` from `opensearch_bodies._packed`'s base64; None when the
    stored value does not hold exactly that (a row written by other code is no vector)."""
    import base64
    import binascii

    if rows == 0:
        return np.empty((0, dim), dtype=np.float32)
    if not isinstance(packed, str) or dim <= 0:
        return None
    try:
        raw = base64.b64decode(packed, validate=True)
        flat = np.frombuffer(raw, dtype=np.dtype(dtype))
    except (binascii.Error, ValueError, TypeError):
        return None
    if flat.size != rows * dim:
        return None
    return flat.astype(np.float32).reshape(rows, dim)


def parse_anchor_vectors(response: Mapping[str, Any]) -> dict[str, AnchorVectors]:
    """`bodies.anchor_vectors_body`'s hits: by chunk id, each passage's `AnchorVectors`. A
    passage without the field (written before schema 3, or with no anchor span) or with one this
    code cannot read is left out: the anchor then reads nothing for it, as before."""
    out: dict[str, AnchorVectors] = {}
    for hit in _raw_hits(response):
        source = hit.get("_source") or {}
        stored = source.get(ANCHOR_FIELD)
        if not isinstance(stored, Mapping) or "chunk_id" not in source or "document_id" not in source:
            continue
        dtype, dim = str(stored.get("dtype") or ""), int(stored.get("dim") or 0)
        if dtype not in ("<f4", "<f2"):
            continue
        spans = [int(q) for q in stored.get("spans") or []]
        headings = [str(h) for h in stored.get("headings") or []]
        late = _unpacked(stored.get("late"), dtype, dim, len(spans))
        heads = _unpacked(stored.get("heading_vectors"), dtype, dim, len(headings))
        if late is None or heads is None:
            continue
        out[str(source["chunk_id"])] = AnchorVectors(
            dict(zip(spans, late, strict=True)),
            dict(zip(headings, heads, strict=True)),
            str(source["document_id"]),
        )
    return out


def parse_cardinality(response: Mapping[str, Any], name: str) -> int:
    """The value of the cardinality aggregation `name` (`bodies.document_count_body`)."""
    agg = (response.get("aggregations") or {}).get(name)
    if not isinstance(agg, Mapping) or "value" not in agg:
        raise BackendError(f"the search response lacks the {name!r} aggregation")
    return int(agg["value"])


def index_meta(mapping_response: Mapping[str, Any], index: str) -> dict[str, Any]:
    """`_meta` of an index from GET /{index} (or GET /{index}/_mapping), plus the k-NN engine its
    vector field was created with (schema 1 did not record it in `_meta`)."""
    body: Mapping[str, Any] = mapping_response.get(index) or next(iter(mapping_response.values()), {})
    mapping = body.get("mappings") or {}
    meta = dict(mapping.get("_meta") or {})
    vector = (mapping.get("properties") or {}).get(VECTOR_FIELD) or {}
    engine = (vector.get("method") or {}).get("engine")
    if engine and not meta.get("engine"):
        meta["engine"] = engine
    meta["has_generation"] = GENERATION_FIELD in (mapping.get("properties") or {})
    meta["has_anchor_vectors"] = ANCHOR_FIELD in (mapping.get("properties") or {})
    return meta


def parse_version(number: str) -> tuple[int, ...]:
    """ "2.19.1" -> (2, 19, 1); "3.0.0-SNAPSHOT" -> (3, 0, 0)."""
    parts = []
    for piece in number.split("-", maxsplit=1)[0].split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def msearch_failure(response: Mapping[str, Any]) -> tuple[int, str, dict[str, Any]] | None:
    """The first failed search of an `_msearch` answer as (status, error type, error info), the
    parts of the exception the client raises for a failed `_search`; None when all succeeded
    (`_msearch` itself answers 200 and reports each search's failure in its item)."""
    for item in response.get("responses") or []:
        error = item.get("error") if isinstance(item, Mapping) else None
        if error:
            kind = str(error.get("type", "")) if isinstance(error, Mapping) else str(error)
            return int(item.get("status") or 500), kind, {"error": error}
    return None


def parse_counts(response: Mapping[str, Any], expected: int) -> list[int]:
    """Each search's total hits of an `_msearch` answer, in request order."""
    items = list(response.get("responses") or [])
    if len(items) != expected:
        raise BackendError(f"OpenSearch _msearch answered {len(items)} searches for {expected}")
    out = []
    for item in items:
        total = (item.get("hits") or {}).get("total", 0)
        out.append(int(total.get("value", 0) if isinstance(total, Mapping) else total or 0))
    return out
