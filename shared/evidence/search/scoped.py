"""A search backend seen through one request's filters: every read stays within them.

An index shared by tenants holds each tenant's documents under a metadata filter that every
request carries (`filters`: a tenant's, a caller's own). The service binds a request's filters
once (`bind_filters`) and hands the ranking layer the view (`ProfileEnv.backend`,
`RankContext.backend`), so a read that forgets them — a new path, a statistic of "the index", a
helper that looks documents up by id — still reads only the request's documents. Nothing below
the service threads the request's filters by hand.

How a read's own filters meet the bound ones (`merge_filters(bound, call)`): they narrow within
them, never widen.

- A key in one of the two: that filter, as it is.
- A key in both (a call's `document_id` within a tenant's documents, a tenant key named again):
  the values both allow — the bound filter's values that the call allows, compared in one
  string form (`base.filter_value`: `True` is "true", `2.0` is "2"), sent in the bound form
  (a call's one value stays a term filter). Only values the bound filter itself names are
  sent: the embedded store compares in that string form, but OpenSearch's keyword fields
  compare the value as given ("2.0" is not "2"), so a call's form could match a chunk the
  bound filter does not.
- Nothing allowed by both (`{"document_id": ["b-1"]}` within tenant A's documents only where
  the bound filter names A's ids, `{"tenant": "b"}` within `{"tenant": "a"}`): the read returns
  nothing, without asking the backend.
- Neither restricts: None, the whole index (as the backend reads an unfiltered call).

What the view offers (a `SearchReader`):

- `lexical`, `dense`, `lookup`, `term_counts`, `document_count` and, exactly when the wrapped backend offers
  `HybridSearch`, `hybrid` (`bind_filters` then builds `ScopedHybridBackend`, so
  `isinstance(view, HybridSearch)` answers as it does for the backend): each within the merge.
- `ordered_lookup` (`base.ordered_lookup`: `lookup`'s chunks by document in document order,
  what the span anchor reads), within the merge, answered by the backend when it offers it.
- `vectors(ids)`: only chunks within the bound filters. An id a read of this view returned is
  within them; any other is checked with one `lookup` first, so an id alone (chunk ids are
  derived from document ids and offsets) reads no other tenant's embedding.
- `anchor_vectors(hits)` (`base.AnchorVectorStore`: the focus span anchor's vectors a backend
  keeps with its passages, OpenSearch), within the merge; None when the wrapped backend keeps
  none (the embedded store).
- `get_index`: the index's metadata (embedder, dimension, whole-index counts), which names no
  document. A count a ranking reads is `document_count`, within the filters: the whole index's
  would let another tenant's number of documents move a request's scope.

What it does not offer: writes, deletes and index admin (`upsert`, `delete_document`,
`create_index`, `delete_index`, `document_hash`, `list_indexes`, `close`) are not methods of the
view (it is no `SearchBackend`: mypy refuses a write through it, and at run time there is no such
attribute), nor the capabilities `BulkLoading` (a write) and `DocumentListing` (it lists the whole
index whatever the filters). The service keeps the backend itself for its writes and for its own
check of the spans it returns (`verbatim.check.verify_spans`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from evidence.config import HybridMode
from evidence.records import Chunk, ChunkKind, SearchHit
from evidence.search.base import (
    AnchorVectors,
    AnchorVectorStore,
    Filters,
    HybridResult,
    HybridSearch,
    IndexInfo,
    OrderedChunks,
    SearchReader,
    Vector,
    filter_value,
    filter_values,
    ordered_lookup,
)
from evidence.search.initialisms import Table


class _Nothing:
    """The merge of two filters that allow no value in common: the read returns nothing."""

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING: Final = _Nothing()


def merge_filters(bound: Filters | None, call: Filters | None) -> dict[str, Any] | _Nothing | None:
    """A read's filters (`call`) within the bound ones (module docstring): the filters to send,
    None for the whole index, or `NOTHING` when no chunk can match both."""
    if not call:
        return dict(bound) if bound else None
    if not bound:
        return dict(call)
    out = dict(bound)
    for key, value in call.items():
        if key not in out:
            out[key] = value
            continue
        asked = {filter_value(v) for v in filter_values(value)}
        kept = [v for v in filter_values(out[key]) if filter_value(v) in asked]
        if not kept:
            return NOTHING
        scalar = isinstance(out[key], str | int | bool | float) or isinstance(value, str | int | bool | float)
        out[key] = kept[0] if scalar and len(kept) == 1 else kept
    return out


class ScopedBackend:
    """A `SearchReader` whose every read stays within `filters` (module docstring)."""

    def __init__(self, backend: SearchReader, filters: Filters | None, *, nothing: bool = False) -> None:
        self._backend = backend
        self._filters: dict[str, Any] | None = dict(filters) if filters else None
        #: The bound filters allow nothing (a narrowing that left no value): every read is empty.
        self._nothing = nothing
        #: Chunk ids a read of this view returned: within the bound filters (`vectors`).
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    @property
    def filters(self) -> Mapping[str, Any] | None:
        """The bound filters (a copy), None when the view restricts nothing."""
        return dict(self._filters) if self._filters else None

    def narrow(self, filters: Filters | None) -> ScopedBackend:
        """A view of the same backend within both these filters and `filters`."""
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return type(self)(self._backend, self._filters, nothing=True)
        return type(self)(self._backend, merged)

    def _merge(self, filters: Filters | None) -> dict[str, Any] | _Nothing | None:
        return NOTHING if self._nothing else merge_filters(self._filters, filters)

    def _saw(self, hits: Iterable[SearchHit]) -> list[SearchHit]:
        out = hits if isinstance(hits, list) else list(hits)
        if self._filters is not None and out:
            with self._lock:
                self._seen.update(h.chunk.chunk_id for h in out)
        return out

    # --- SearchReader ------------------------------------------------------------------------

    def get_index(self, index: str) -> IndexInfo:
        return self._backend.get_index(index)

    def lexical(
        self,
        index: str,
        text: str,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> list[SearchHit]:
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return []
        return self._saw(self._backend.lexical(index, text, k=k, filters=merged, kind=kind))

    def term_counts(
        self,
        index: str,
        texts: Sequence[str],
        *,
        cap: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> dict[str, int]:
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return dict.fromkeys(texts, 0)
        return self._backend.term_counts(index, texts, cap=cap, filters=merged, kind=kind)

    def initialisms(self, index: str) -> Table | None:
        """The backend's `initialisms` table when it has one (the embedded store), else None.
        Index-wide: `verbatim.grounding.index_df` reads an expansion only through `term_counts`,
        within this view's filters."""
        if self._nothing:
            return {}
        read = getattr(self._backend, "initialisms", None)
        return read(index) if callable(read) else None

    def document_count(self, index: str, *, filters: Filters | None = None) -> int:
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return 0
        return self._backend.document_count(index, filters=merged)

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
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return []
        if light:
            return self._saw(self._backend.dense(index, vector, k=k, filters=merged, kind=kind, light=True))
        return self._saw(self._backend.dense(index, vector, k=k, filters=merged, kind=kind))

    def lookup(
        self, index: str, filters: Filters, *, limit: int = 100, kind: ChunkKind | None = None
    ) -> list[SearchHit]:
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return []
        return self._saw(self._backend.lookup(index, merged or {}, limit=limit, kind=kind))

    def ordered_lookup(
        self, index: str, filters: Filters, *, limit: int, kind: ChunkKind | None
    ) -> list[OrderedChunks]:
        """`lookup`'s chunks by document in document order (`base.ordered_lookup`), within the
        merge. The chunks are not noted as seen (`vectors` checks an id it did not see)."""
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return []
        return ordered_lookup(self._backend, index, merged or {}, limit=limit, kind=kind)

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        if self._nothing:
            return {}
        if self._filters is None:
            return self._backend.vectors(index, chunk_ids)
        with self._lock:
            unknown = [c for c in dict.fromkeys(chunk_ids) if c not in self._seen]
        if not unknown:
            return self._backend.vectors(index, chunk_ids)
        inside = {
            h.chunk.chunk_id for h in self.lookup(index, {"chunk_id": unknown}, limit=len(unknown), kind=None)
        }
        outside = set(unknown) - inside
        return self._backend.vectors(index, [c for c in chunk_ids if c not in outside])

    def anchor_vectors(
        self, index: str, hits: Sequence[Chunk], *, filters: Filters | None = None
    ) -> dict[str, AnchorVectors] | None:
        """The anchor's vectors the wrapped backend keeps with the passages overlapping `hits`,
        within the merge (None when it keeps none)."""
        backend = self._backend
        if not isinstance(backend, AnchorVectorStore):
            return None
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            return {}
        return backend.anchor_vectors(index, hits, filters=merged)


class ScopedHybridBackend(ScopedBackend):
    """The view of a backend that offers `HybridSearch`: its `hybrid` within the merge too."""

    def __init__(self, backend: SearchReader, filters: Filters | None, *, nothing: bool = False) -> None:
        if not isinstance(backend, HybridSearch):
            raise TypeError(f"{type(backend).__name__} offers no hybrid search")
        super().__init__(backend, filters, nothing=nothing)
        self._hybrid: HybridSearch = backend

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
        merged = self._merge(filters)
        if isinstance(merged, _Nothing):
            # Two empty legs: the ranking layer fuses nothing into nothing.
            return HybridResult(mode=HybridMode.CLIENT, fused=None)
        result = self._hybrid.hybrid(
            index,
            text,
            vector,
            k=k,
            filters=merged,
            kind=kind,
            pagination_depth=pagination_depth,
            mode=mode,
            explain=explain,
        )
        self._saw([*(result.fused or ()), *result.lexical, *result.dense])
        return result


def bind_filters(backend: SearchReader, filters: Filters | None) -> ScopedBackend:
    """`backend` seen through `filters` (a request's): a view whose reads all stay within them,
    with `hybrid` exactly when `backend` has it. A view given again is narrowed (both filters)."""
    if isinstance(backend, ScopedBackend):
        return backend.narrow(filters)
    if isinstance(backend, HybridSearch):
        return ScopedHybridBackend(backend, filters)
    return ScopedBackend(backend, filters)


__all__ = ["NOTHING", "ScopedBackend", "ScopedHybridBackend", "bind_filters", "merge_filters"]
