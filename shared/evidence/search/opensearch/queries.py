"""Search: lexical, dense and hybrid queries (server-side pipeline or client-side fusion), lookups
by filter, document listing and stored vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from evidence.config import HybridMode
from evidence.errors import (
    BackendError,
    EmbedderMismatchError,
)
from evidence.records import Chunk, ChunkKind, SearchHit
from evidence.search import opensearch_bodies as bodies
from evidence.search import opensearch_responses as responses
from evidence.search.base import AnchorVectors, DocumentInfo, Filters, HybridResult, IndexInfo, Vector
from evidence.search.opensearch.admin import (
    _LOOKUP_PAGE,
    _MAX_RESULT_WINDOW,
    IndexAdmin,
    _as_list,
    _no_direction,
)

logger = logging.getLogger(__name__)


class Search(IndexAdmin):
    """The read side of `OpenSearchBackend`."""

    def lexical(
        self,
        index: str,
        text: str,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> list[SearchHit]:
        if k <= 0 or not text.strip():
            self._index_name(index)
            return []
        body = bodies.lexical_body(text, k=min(k, _MAX_RESULT_WINDOW), filters=filters, kind=kind)
        return responses.parse_lexical(self._search("lexical search", index, body))

    def term_counts(
        self,
        index: str,
        texts: Sequence[str],
        *,
        cap: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> dict[str, int]:
        """One `_msearch` for every text (`bodies.term_count_lines`), not one search per text:
        the counts of a question's terms cost one round trip."""
        self._index_name(index)  # a bad name is refused even when nothing is sent
        out = dict.fromkeys(texts, 0)
        todo = [t for t in out if t.strip()]  # `lexical` answers a blank text with no hits
        if cap <= 0 or not todo:
            return out
        lines = bodies.term_count_lines(todo, cap=cap, filters=filters, kind=kind)
        counts = responses.parse_counts(self._msearch("term counts", index, lines), len(todo))
        out.update((t, min(n, cap)) for t, n in zip(todo, counts, strict=True))
        return out

    def document_count(self, index: str, *, filters: Filters | None = None) -> int:
        """Unfiltered: the index's document markers (`get_index`). Filtered: a cardinality
        aggregation of `document_id` over the chunks within the filters (markers left out, as
        every read leaves them out), exact below `bodies.CARDINALITY_PRECISION` documents."""
        if not filters:
            return self.get_index(index).documents
        name = self._index_name(index)
        response = self._search("document count", name, bodies.document_count_body(filters))
        return responses.parse_cardinality(response, bodies.DOCUMENT_COUNT_AGG)

    def dense(
        self,
        index: str,
        vector: Vector,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
        light: bool = False,
    ) -> list[SearchHit]:
        name = self._index_name(index)
        info = self._check_query_vector(name, vector)
        if k <= 0:
            return []
        k = min(k, _MAX_RESULT_WINDOW)
        if _no_direction(vector):
            body = bodies.zero_vector_body(k=k, filters=filters, kind=kind, light=light)
            return responses.parse_zero_vector(self._search("k-NN search (zero vector)", name, body))
        body = bodies.knn_body(_as_list(vector), k=k, filters=filters, kind=kind, light=light)
        return responses.parse_dense(
            self._search("k-NN search", name, body), str(info.extra.get("engine", "faiss"))
        )

    def _check_query_vector(self, index: str, vector: Vector) -> IndexInfo:
        info = self._info(index)
        shape = np.shape(vector)
        if info.dimension == 0:
            raise EmbedderMismatchError(f"index {index!r} was built without vectors (lexical only)")
        if shape != (info.dimension,):
            raise EmbedderMismatchError(
                f"query vector has shape {shape}; index {index!r} holds {info.dimension}-dim vectors "
                f"from {info.embedder_id!r}",
                field="index",
            )
        return info

    def hybrid(
        self,
        index: str,
        text: str,
        vector: Vector,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
        pagination_depth: int | None = None,
        mode: HybridMode | None = None,
        explain: bool = False,
    ) -> HybridResult:
        """Server-side hybrid (`hybrid` query + search pipeline) or the two legs (client mode).

        `pagination_depth` defaults to k (the first-stage k) and is sent only where the cluster
        knows it (>= 2.19); client mode is what Serverless needs when its cluster has no RRF,
        what `opensearch_hybrid_mode=client` selects, and what a zero query vector gets (a
        cosine space refuses it).
        """
        mode = mode or self.settings.opensearch_hybrid_mode
        name = self._index_name(index)
        self._check_query_vector(name, vector)
        depth = pagination_depth or k
        if mode is HybridMode.CLIENT or _no_direction(vector):
            return HybridResult(
                mode=HybridMode.CLIENT,
                fused=None,
                lexical=self.lexical(name, text, k=depth, filters=filters, kind=kind),
                dense=self.dense(name, vector, k=depth, filters=filters, kind=kind),
            )
        pipeline, fusion, _ = self._pipeline_choice()
        body = bodies.hybrid_body(
            text,
            _as_list(vector),
            k=k,
            filters=filters,
            kind=kind,
            pagination_depth=depth,
            caps=self.capabilities(),
        )
        try:
            response = self._search("hybrid search", name, body, search_pipeline=pipeline)
        except BackendError as exc:
            if not _missing_pipeline(exc) or pipeline in self._pipelines_ready:
                raise
            self.ensure_search_pipeline()
            response = self._search("hybrid search", name, body, search_pipeline=pipeline)
        fused = responses.parse_hybrid(response)
        if not explain:
            return HybridResult(mode=mode, fused=fused, fusion=fusion)
        lexical = self.lexical(name, text, k=depth, filters=filters, kind=kind)
        dense = self.dense(name, vector, k=depth, filters=filters, kind=kind)
        lex = {h.chunk.chunk_id: h.score for h in lexical}
        den = {h.chunk.chunk_id: h.score for h in dense}
        fused = [
            replace(h, lexical=lex.get(h.chunk.chunk_id), dense=den.get(h.chunk.chunk_id)) for h in fused
        ]
        return HybridResult(mode=mode, fused=fused, lexical=lexical, dense=dense, fusion=fusion)

    def lookup(
        self, index: str, filters: Filters, *, limit: int = 100, kind: ChunkKind | None = None
    ) -> list[SearchHit]:
        """Filter-only retrieval (follow-ups by criterion hash: a term filter), paged by search_after."""
        name = self._index_name(index)
        out: list[SearchHit] = []
        search_after: list[Any] | None = None
        while len(out) < limit:
            size = min(_LOOKUP_PAGE, limit - len(out))
            body = bodies.lookup_body(filters, size=size, kind=kind, search_after=search_after)
            response = self._search("lookup", name, body)
            raw = response.get("hits", {}).get("hits", [])
            out.extend(responses.parse_lookup(response))
            if len(raw) < size:
                break
            search_after = list(raw[-1].get("sort") or [])
            if not search_after:
                break
        return out

    def list_documents(self, index: str) -> list[DocumentInfo]:
        """Every document of `index` from its markers (which carry the passage and span counts)."""
        name = self._index_name(index)
        self._info(name)  # IndexNotFoundError before a search on a missing index
        newest: dict[str, tuple[str, DocumentInfo]] = {}
        search_after: list[Any] | None = None
        while True:
            body = bodies.document_page_body(size=_LOOKUP_PAGE, search_after=search_after)
            raw = self._search("list documents", name, body).get("hits", {}).get("hits", [])
            for hit in raw:
                src = hit.get("_source") or {}
                doc_id = str(src["document_id"])
                generation = str(src.get(bodies.GENERATION_FIELD) or "")
                info = DocumentInfo(
                    doc_id,
                    str(src.get("source") or doc_id),
                    int(src.get("passages") or 0),
                    int(src.get("spans") or 0),
                )
                if doc_id not in newest or generation > newest[doc_id][0]:
                    newest[doc_id] = (generation, info)
            if len(raw) < _LOOKUP_PAGE or not raw[-1].get("sort"):
                break
            search_after = list(raw[-1]["sort"])
        return [info for _, info in sorted(newest.values(), key=lambda item: item[1].document_id)]

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        name = self._index_name(index)
        out: dict[str, Vector] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), _LOOKUP_PAGE):
            batch = ids[start : start + _LOOKUP_PAGE]
            out.update(responses.parse_vectors(self._search("vectors", name, bodies.vectors_body(batch))))
        return out

    def anchor_vectors(
        self, index: str, hits: Sequence[Chunk], *, filters: Filters | None = None
    ) -> dict[str, AnchorVectors]:
        """The focus span anchor's vectors kept with the passages overlapping `hits`
        (`bodies.anchor_vectors_body`: one search for a question's hits, only that field
        returned); a passage written without them (an index from before schema 3) is absent, so
        the anchor reads nothing for its spans."""
        name = self._index_name(index)
        ranges = list(dict.fromkeys((h.document_id, h.char_start, h.char_end) for h in hits))
        out: dict[str, AnchorVectors] = {}
        for start in range(0, len(ranges), bodies.MAX_TERMS):
            body = bodies.anchor_vectors_body(ranges[start : start + bodies.MAX_TERMS], filters=filters)
            out.update(responses.parse_anchor_vectors(self._search("anchor vectors", name, body)))
        return out


def _missing_pipeline(exc: BackendError) -> bool:
    text = exc.message.lower()
    return "pipeline" in text and any(
        phrase in text for phrase in ("not defined", "not found", "does not exist", "no such")
    )
