"""The SearchBackend port. Both adapters pass one contract-test suite (tests/contract/).

Scores: `lexical` returns BM25 scores (OpenSearch's scale; the embedded
backend divides tantivy's by (k1 + 1) so both agree), `dense` returns cosine
similarity in [-1, 1]. Fusion of the two legs happens in the ranking layer,
except for OpenSearch's server-side hybrid mode (`hybrid`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from evidence.config import HybridMode
from evidence.records import Chunk, ChunkKind, DocumentChunks, SearchHit

Vector = npt.NDArray[np.float32]

#: Filters: `{"type": "followup_document"}` is a term filter, `{"type": ["a", "b"]}` a terms
#: filter (any of). Keys are metadata keys or the built-in fields `chunk_id`, `document_id`,
#: `kind`, `span_type`, `section`, `criterion_question_hash`. A value is what a request's
#: `filters` may hold (`model.MetaScalar` or a list of strings): a float too, compared in
#: `filter_value`'s form (`2.0` is "2").
Filters = Mapping[str, str | int | float | bool | Sequence[str]]


@dataclass(frozen=True, slots=True)
class IndexInfo:
    name: str
    embedder_id: str
    dimension: int
    documents: int = 0
    chunks: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpsertResult:
    document_id: str
    status: str  # "created" | "updated" | "unchanged"
    passages: int
    spans: int


def filter_value(value: object) -> str:
    """One string form for filter terms: how every backend compares a filter's value with a
    document's (`True` is "true", `2.0` is "2"), and how a filter-bound view (`search.scoped`)
    intersects two filters on one key."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def filter_values(value: Any) -> list[Any]:
    """The values a filter's value allows, as a list: one scalar (any JSON scalar a request may
    send, `model.MetaScalar`) is a list of one, a list is itself."""
    return [value] if isinstance(value, str | int | bool | float) else list(value)


@runtime_checkable
class SearchReader(Protocol):
    """The reads of an index: what a request's ranking needs, and all a profile is given (a
    view bound to the request's filters, `search.scoped.bind_filters`; it writes nothing)."""

    def get_index(self, index: str) -> IndexInfo:
        """IndexNotFoundError if missing."""
        ...

    def lexical(
        self,
        index: str,
        text: str,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> list[SearchHit]: ...

    def term_counts(
        self,
        index: str,
        texts: Sequence[str],
        *,
        cap: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> dict[str, int]:
        """For each of `texts`, how many chunks `lexical(index, text, k=cap, filters=filters,
        kind=kind)` would return, without ranking or fetching them: the chunks of `kind` within
        `filters` matching any of the text's analysed terms, counted up to `cap`. Keyed by text;
        a text with no terms counts 0. One request for all of them (the refusal signal's
        passage counts, `verbatim.grounding.index_df`)."""
        ...

    def document_count(self, index: str, *, filters: Filters | None = None) -> int:
        """How many documents have a chunk within `filters` (of any kind); with none, the
        index's documents (`get_index(index).documents`). Exact on the embedded store; on
        OpenSearch exact up to 40,000 documents within the filters (a cardinality aggregation at
        its largest precision threshold), an estimate within a few percent beyond. What a
        statistic "of the index" reads on a request (`verbatim.scope.named_documents`), so
        another tenant's documents never move it (`search.scoped`)."""
        ...

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
        """The k nearest chunks of `kind` within `filters` by cosine. `light=True`: the caller
        reads only each hit's score, `chunk_id`, `document_id`, `kind`, `char_start`, `char_end`
        and `sequence`, and the backend may leave the rest of the chunk empty (OpenSearch asks
        `_source` for those fields only: `opensearch_bodies.LIGHT_FIELDS`; the embedded store
        returns whole chunks). Hits and scores are the same either way."""
        ...

    def lookup(
        self, index: str, filters: Filters, *, limit: int = 100, kind: ChunkKind | None = None
    ) -> list[SearchHit]:
        """Chunks matching filters only (no query), e.g. follow-ups by criterion hash. score = 0."""
        ...

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        """Stored embeddings by chunk id (for MMR); missing ids are left out."""
        ...


@runtime_checkable
class SearchBackend(SearchReader, Protocol):
    """What the service needs from a search engine: the reads, and the writes and index admin."""

    def create_index(self, index: str, *, embedder_id: str, dimension: int) -> IndexInfo:
        """Create the index if missing; if it exists, verify the embedder (EmbedderMismatchError)."""
        ...

    def list_indexes(self) -> list[IndexInfo]: ...

    def delete_index(self, index: str) -> None: ...

    def document_hash(self, index: str, document_id: str) -> str | None:
        """Content hash of the stored version of a document, None if absent."""
        ...

    def upsert(
        self, index: str, documents: Sequence[DocumentChunks], vectors: Sequence[Vector | None]
    ) -> list[UpsertResult]:
        """Replace each document's chunks atomically. `vectors[i]` is a (n_chunks, dim)
        float32 array in chunk order for documents[i], or None for lexical-only indexing.
        A row of NaN means that chunk has no vector (fact spans are not embedded by default)."""
        ...

    def delete_document(self, index: str, document_id: str) -> int:
        """Remove every chunk of the document; returns how many were removed (0 if none)."""
        ...

    def close(self) -> None: ...


# --- optional capabilities: a backend offers them or not; callers check with isinstance ---------


@runtime_checkable
class BulkLoading(Protocol):
    """A backend that can defer expensive commits across many upserts (the embedded store)."""

    def bulk(self, index: str) -> AbstractContextManager[None]:
        """Within the block, upserts are durable per call but indexing work is batched to the end."""
        ...


@dataclass(frozen=True, slots=True)
class OrderedChunks:
    """One document's chunks of a `lookup`, in document order (`ordered_lookup`)."""

    document_id: str
    #: By (char_start, sequence); ties in the order the lookup returned them (rowid).
    chunks: Sequence[Chunk]
    #: Their char_start and char_end (int64 arrays): offsets tested without a loop in Python.
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    #: Their distinct non-empty sections, in that order.
    sections: tuple[str, ...]
    #: The document's content hash as the index stores it, read with the chunks (the embedded
    #: store: in the same snapshot); "" where the backend does not give it (OpenSearch). What the
    #: span anchor's late vectors are keyed by (`embed.late.late_key`).
    content_hash: str = ""


def ordered_chunks(document_id: str, chunks: Sequence[Chunk], content_hash: str = "") -> OrderedChunks:
    """`OrderedChunks` of one document's chunks (in the order a lookup returned them)."""
    ordered = sorted(chunks, key=lambda c: (c.char_start, c.sequence))
    return OrderedChunks(
        document_id,
        ordered,
        np.fromiter((c.char_start for c in ordered), dtype=np.int64, count=len(ordered)),
        np.fromiter((c.char_end for c in ordered), dtype=np.int64, count=len(ordered)),
        tuple(dict.fromkeys(c.section for c in ordered if c.section)),
        content_hash,
    )


@runtime_checkable
class OrderedLookup(Protocol):
    """A backend that answers `ordered_lookup` itself (the embedded store: each document's
    chunks kept in document order per write generation, read once, not per question)."""

    def ordered_lookup(
        self, index: str, filters: Filters, *, limit: int, kind: ChunkKind | None
    ) -> list[OrderedChunks]: ...


def ordered_lookup(
    backend: SearchReader, index: str, filters: Filters, *, limit: int, kind: ChunkKind | None
) -> list[OrderedChunks]:
    """Exactly the chunks `backend.lookup(index, filters, limit=limit, kind=kind)` returns, by
    document (by id), each document's in document order (`OrderedChunks`): what the span anchor
    reads (`verbatim.cascade.spans_in_hits`). A backend that offers `OrderedLookup` answers it
    (the embedded store, the scoped view over it); any other (OpenSearch) gets its `lookup`
    sorted and grouped here, the same chunks."""
    if isinstance(backend, OrderedLookup):
        return backend.ordered_lookup(index, filters, limit=limit, kind=kind)
    return group_ordered([h.chunk for h in backend.lookup(index, filters, limit=limit, kind=kind)])


@dataclass(frozen=True, slots=True)
class AnchorVectors:
    """What the focus span anchor reads, kept with a passage by a backend that has no embedding
    cache (OpenSearch, `AnchorVectorStore`; docs/opensearch.md#anchor-vectors): the late-chunked
    vector of every anchor span pooled in that passage (`embed.late.late_ranges`; by the span's
    `sequence` in its document), and the own vector of each of those spans' headings (by text)."""

    spans: Mapping[int, Vector]
    headings: Mapping[str, Vector]
    #: The passage's document (as read back; what its spans' sequences are numbered in).
    document_id: str = ""


@runtime_checkable
class AnchorVectorStore(Protocol):
    """A backend that keeps the anchor's vectors with its passages (OpenSearch): written by
    `upsert(..., anchor_vectors=…)` at indexing, read by `anchor_vectors` (the focus span anchor,
    `verbatim.span_rank.StoredVectors`). The embedded store keeps them in its embedding cache
    instead and does not offer this."""

    def anchor_vectors(
        self, index: str, hits: Sequence[Chunk], *, filters: Filters | None = None
    ) -> dict[str, AnchorVectors] | None:
        """By passage chunk id, the vectors kept with every passage (within `filters`) that
        overlaps one of `hits` (each a document's character range: a span inside it was pooled
        in a passage overlapping it); a passage written without them (e.g. before they existed)
        is absent. None: this backend keeps none."""
        ...


@runtime_checkable
class SectionsProbe(Protocol):
    """A backend that tells whether an index holds a chunk with a section: what a section header
    rule shapes (`search.written.HEADER_KEYS`). `evidence migrate` asks it of the source and of
    an existing target before it compares their header rules
    (docs/opensearch.md#migrating-an-embedded-index)."""

    def has_sections(self, index: str) -> bool:
        """Whether a chunk of `index` has a section, as last committed (embedded: a seek) or as
        searchable (OpenSearch: a count, near-real-time)."""
        ...


@runtime_checkable
class SettingsCheck(Protocol):
    """A backend whose write check depends on the documents of the batch (OpenSearch: a header
    rule alone is refused only for a batch holding a sectioned chunk): asked before the batch is
    embedded, so the refusal costs no embedding (`Indexing.write_documents`)."""

    def check_documents(self, index: str, documents: Sequence[DocumentChunks]) -> None:
        """IndexSettingsMismatchError when `upsert(index, documents, ...)` would refuse them for
        the index's recorded settings; nothing is written or embedded."""
        ...


def sectioned(documents: Sequence[DocumentChunks]) -> bool:
    """Whether a chunk of `documents` has a section (not the empty one)."""
    return any(c.section for doc in documents for c in doc.chunks)


def group_ordered(chunks: Sequence[Chunk]) -> list[OrderedChunks]:
    """`chunks` (as a lookup returned them) by document, by id, each in document order."""
    by_document: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_document.setdefault(c.document_id, []).append(c)
    return [ordered_chunks(doc, by_document[doc]) for doc in sorted(by_document)]


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """One document of an index, as `evidence list --index NAME` shows it."""

    document_id: str
    source: str
    passages: int
    spans: int


@runtime_checkable
class DocumentListing(Protocol):
    """A backend that can list an index's documents with their chunk counts (the embedded store)."""

    def list_documents(self, index: str) -> list[DocumentInfo]:
        """Every document of `index`, by id; `IndexNotFoundError` when there is no such index."""
        ...


@dataclass(frozen=True, slots=True)
class HybridResult:
    """What `HybridSearch.hybrid` returns.

    server mode: `fused` holds the pipeline's ranking; `lexical`/`dense` are filled only with
    `explain=True` (so the ranking layer can report per-leg scores).
    client mode: `fused` is None; the two legs are for the ranking layer's fusion.
    """

    mode: HybridMode
    fused: list[SearchHit] | None
    lexical: list[SearchHit] = field(default_factory=list)
    dense: list[SearchHit] = field(default_factory=list)
    fusion: str | None = None


@runtime_checkable
class HybridSearch(Protocol):
    """A backend that fuses the lexical and dense legs itself (OpenSearch's search pipeline)."""

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
    ) -> HybridResult: ...
