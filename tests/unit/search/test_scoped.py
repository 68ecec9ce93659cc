"""The filter-bound view (`search.scoped`): how a read's filters meet the bound ones, which
capabilities the view claims, and that nothing reaches past the bound filters — writes included.

The backend contract suite runs the view on both adapters (`tests/contract/test_scoped_contract.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.config import HybridMode
from evidence.model import RetrieveRequest
from evidence.records import ChunkKind, SearchHit
from evidence.search.base import (
    BulkLoading,
    DocumentListing,
    Filters,
    HybridResult,
    HybridSearch,
    IndexInfo,
    SearchBackend,
    SearchReader,
)
from evidence.search.embedded import EmbeddedBackend
from evidence.search.scoped import NOTHING, ScopedBackend, bind_filters, merge_filters
from tests.unit.rank.rankkit import INDEX, chunk, new_backend, vec

TENANT_A = {"tenant": "a"}

# --- merge semantics ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bound", "call", "merged"),
    [
        # nothing restricts: the whole index, as an unfiltered call reads it
        (None, None, None),
        ({}, {}, None),
        # one side only: that side, as it is
        (TENANT_A, None, TENANT_A),
        (TENANT_A, {}, TENANT_A),
        (None, {"document_id": ["d1"]}, {"document_id": ["d1"]}),
        (TENANT_A, {"document_id": ["d1", "d2"]}, {"tenant": "a", "document_id": ["d1", "d2"]}),
        # a call's documents narrow within the bound documents: the bound ones the call allows
        (
            {"document_id": ["d1", "d2", "d3"]},
            {"document_id": ["d3", "d9", "d1"]},
            {"document_id": ["d1", "d3"]},
        ),
        ({"document_id": ["d1", "d2"]}, {"document_id": "d2"}, {"document_id": "d2"}),
        ({"document_id": "d2"}, {"document_id": ["d1", "d2"]}, {"document_id": "d2"}),
        # the same key again: allowed by both (True is "true"), sent as the bound filter names it
        (TENANT_A, TENANT_A, TENANT_A),
        ({"tenant": ["a", "b"]}, {"tenant": "b"}, {"tenant": "b"}),
        ({"public": True}, {"public": "true"}, {"public": True}),
        ({"round_number": 2}, {"round_number": ["1", "2"]}, {"round_number": 2}),
        ({"round_number": 2.0}, {"round_number": 2}, {"round_number": 2.0}),
        # nothing allowed by both: nothing, never the call's value instead of the bound one
        (TENANT_A, {"tenant": "b"}, NOTHING),
        (TENANT_A, {"tenant": ["b", "c"]}, NOTHING),
        ({"document_id": ["d1"]}, {"document_id": ["d2"]}, NOTHING),
        ({"document_id": ["d1"]}, {"document_id": []}, NOTHING),
        ({"tenant": "a", "document_id": ["d1"]}, {"tenant": "a", "document_id": ["d2"]}, NOTHING),
    ],
)
def test_a_reads_filters_narrow_within_the_bound_ones(
    bound: Filters | None, call: Filters | None, merged: object
) -> None:
    assert merge_filters(bound, call) == merged


def test_the_merge_never_changes_its_inputs() -> None:
    bound, call = {"document_id": ["d1", "d2"]}, {"document_id": ["d2"], "kind": "passage"}
    merge_filters(bound, call)
    assert bound == {"document_id": ["d1", "d2"]} and call == {"document_id": ["d2"], "kind": "passage"}


def test_a_read_sends_only_values_the_bound_filter_names_whatever_the_backend_s_comparison() -> None:
    """OpenSearch's keyword fields compare a filter value as given: a chunk stored with
    `round: 2` holds "2", one with `round: 2.0` holds "2.0". Bound to 2.0, a read that asks for 2
    (the same value in `filter_value`'s form) must still match only what 2.0 matches."""

    def matches(filters: Filters, metadata: dict[str, Any]) -> bool:
        # as a keyword field: the JSON text of the stored value against that of the filter's
        return all(
            json.dumps(metadata.get(key))
            in {json.dumps(v) for v in (want if isinstance(want, list) else [want])}
            for key, want in filters.items()
        )

    stored = [{"round": 2.0, "tenant": "a"}, {"round": 2, "tenant": "b"}]
    bound: dict[str, Any] = {"round": 2.0}  # a request's filters may hold floats (`model.MetaScalar`)
    merged = merge_filters(bound, {"round": 2})
    assert isinstance(merged, dict)
    assert [m["tenant"] for m in stored if matches(merged, m)] == ["a"]


# --- what reaches the backend --------------------------------------------------------------------


class Recording:
    """A reader that records the filters of every call and returns one hit per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.hit = SearchHit(chunk=chunk("c1", meta=TENANT_A), score=1.0)

    def get_index(self, index: str) -> IndexInfo:
        self.calls.append(("get_index", None))
        return IndexInfo(index, "test", 8, documents=3)

    def lexical(
        self, index: str, text: str, *, k: int, filters: Any = None, kind: Any = None
    ) -> list[SearchHit]:
        self.calls.append(("lexical", filters))
        return [self.hit]

    def dense(
        self, index: str, vector: Any, *, k: int, filters: Any = None, kind: Any = None, light: bool = False
    ) -> list[SearchHit]:
        self.calls.append(("dense", filters))
        return [self.hit]

    def lookup(self, index: str, filters: Any, *, limit: int = 100, kind: Any = None) -> list[SearchHit]:
        self.calls.append(("lookup", filters))
        return [self.hit]

    def term_counts(
        self, index: str, texts: Sequence[str], *, cap: int, filters: Any = None, kind: Any = None
    ) -> dict[str, int]:
        self.calls.append(("term_counts", filters))
        return dict.fromkeys(texts, 1)

    def document_count(self, index: str, *, filters: Any = None) -> int:
        self.calls.append(("document_count", filters))
        return 3

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, Any]:
        self.calls.append(("vectors", list(chunk_ids)))
        return {c: np.zeros(8, dtype=np.float32) for c in chunk_ids}


class RecordingHybrid(Recording):
    def hybrid(
        self, index: str, text: str, vector: Any, *, k: int, filters: Any = None, **kw: Any
    ) -> HybridResult:
        self.calls.append(("hybrid", filters))
        return HybridResult(mode=HybridMode.SERVER, fused=[self.hit])


def _reads(view: Any) -> None:
    view.lexical(INDEX, "q", k=5, filters={"document_id": ["d1"]})
    view.dense(INDEX, vec("q"), k=5)
    view.lookup(INDEX, {"document_id": "d1"})
    view.term_counts(INDEX, ["q"], cap=5)
    if isinstance(view, HybridSearch):
        view.hybrid(INDEX, "q", vec("q"), k=5, filters={"tenant": "a"})


def test_every_read_sends_the_bound_filters_merged_with_its_own() -> None:
    backend = RecordingHybrid()
    _reads(bind_filters(backend, TENANT_A))
    assert backend.calls == [
        ("lexical", {"tenant": "a", "document_id": ["d1"]}),
        ("dense", TENANT_A),
        ("lookup", {"tenant": "a", "document_id": "d1"}),
        ("term_counts", TENANT_A),
        ("hybrid", TENANT_A),
    ]


def test_with_no_filters_bound_every_read_is_sent_as_it_is() -> None:
    backend = RecordingHybrid()
    _reads(bind_filters(backend, None))
    assert backend.calls == [
        ("lexical", {"document_id": ["d1"]}),
        ("dense", None),
        ("lookup", {"document_id": "d1"}),
        ("term_counts", None),
        ("hybrid", {"tenant": "a"}),
    ]


@pytest.mark.parametrize("light", [False, True])
def test_a_dense_read_passes_light_on_as_it_is_asked(light: bool) -> None:
    """The view forwards `light` as the caller gives it, false too (the port's `dense` takes it;
    false is every backend's default, so the call means what it meant when it was left out)."""
    seen: list[dict[str, Any]] = []

    class Asked(Recording):
        def dense(self, index: str, vector: Any, **kw: Any) -> list[SearchHit]:
            seen.append(kw)
            return [self.hit]

    for bound in (None, TENANT_A):
        bind_filters(Asked(), bound).dense(INDEX, vec("q"), k=5, light=light)
    assert [kw["light"] for kw in seen] == [light, light]


def test_a_requests_filters_bind_as_they_are_floats_included() -> None:
    """`Filters` holds every value a request's `filters` may (`model.MetaScalar`: a float too):
    mypy (make lint) refuses this call if the two drift apart, and the view sends them as given."""
    request = RetrieveRequest(query="q", filters={"round": 2.0, "tenant": "a", "type": ["x", "y"]})
    backend = Recording()
    bind_filters(backend, request.filters).lookup(INDEX, {})
    assert backend.calls == [("lookup", {"round": 2.0, "tenant": "a", "type": ["x", "y"]})]


def test_the_document_count_is_read_within_the_bound_filters() -> None:
    """A statistic of "the index" (`verbatim.scope.named_documents`' third of its documents)
    counts only the documents the request reads."""
    backend = Recording()
    view = bind_filters(backend, TENANT_A)
    assert view.document_count(INDEX) == 3
    assert view.document_count(INDEX, filters={"document_id": ["d1"]}) == 3
    assert view.document_count(INDEX, filters={"tenant": "b"}) == 0  # asks nothing
    assert bind_filters(backend, None).document_count(INDEX) == 3
    assert backend.calls == [
        ("document_count", TENANT_A),
        ("document_count", {"tenant": "a", "document_id": ["d1"]}),
        ("document_count", None),
    ]


def test_a_read_outside_the_bound_filters_returns_nothing_without_asking_the_backend() -> None:
    backend = RecordingHybrid()
    view = bind_filters(backend, TENANT_A)
    other = {"tenant": "b"}
    assert view.lexical(INDEX, "q", k=5, filters=other) == []
    assert view.dense(INDEX, vec("q"), k=5, filters=other) == []
    assert view.lookup(INDEX, other) == []
    assert view.term_counts(INDEX, ["q", "r"], cap=5, filters=other) == {"q": 0, "r": 0}
    assert isinstance(view, HybridSearch)
    result = view.hybrid(INDEX, "q", vec("q"), k=5, filters=other)
    assert (result.fused, result.lexical, result.dense) == (None, [], [])
    assert backend.calls == []


def test_a_narrowed_view_holds_both_filters_and_narrowing_to_nothing_reads_nothing() -> None:
    backend = Recording()
    view = bind_filters(bind_filters(backend, TENANT_A), {"document_id": ["d1", "d2"]})
    assert view.filters == {"tenant": "a", "document_id": ["d1", "d2"]}
    view.lexical(INDEX, "q", k=5, filters={"document_id": ["d2", "d3"]})
    assert backend.calls == [("lexical", {"tenant": "a", "document_id": ["d2"]})]
    empty = view.narrow({"tenant": "b"})
    assert empty.lexical(INDEX, "q", k=5) == [] and empty.vectors(INDEX, ["c1"]) == {}
    assert empty.lookup(INDEX, {}) == [] and empty.term_counts(INDEX, ["q"], cap=5) == {"q": 0}
    assert len(backend.calls) == 1


def test_index_metadata_passes_through() -> None:
    backend = Recording()
    assert bind_filters(backend, TENANT_A).get_index(INDEX).documents == 3


# --- capabilities --------------------------------------------------------------------------------


@pytest.mark.parametrize("filters", [None, TENANT_A])
def test_the_view_claims_hybrid_search_exactly_when_the_backend_offers_it(filters: Filters | None) -> None:
    assert isinstance(bind_filters(RecordingHybrid(), filters), HybridSearch)
    assert not isinstance(bind_filters(Recording(), filters), HybridSearch)
    assert not hasattr(bind_filters(Recording(), filters), "hybrid")
    # narrowing keeps the capability of the backend underneath
    assert isinstance(bind_filters(bind_filters(RecordingHybrid(), filters), TENANT_A), HybridSearch)


def test_the_view_of_the_opensearch_adapter_offers_its_hybrid_search() -> None:
    from evidence.config import Settings
    from evidence.search.opensearch import OpenSearchBackend

    backend = OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint="http://127.0.0.1:9"))
    assert isinstance(backend, HybridSearch) and isinstance(bind_filters(backend, TENANT_A), HybridSearch)


def test_the_view_reads_only_it_offers_no_write_no_bulk_load_and_no_whole_index_listing(
    tmp_path: Path,
) -> None:
    backend = new_backend(tmp_path, [chunk("c1", meta=TENANT_A)])
    assert isinstance(backend, BulkLoading) and isinstance(backend, DocumentListing)
    view = bind_filters(backend, TENANT_A)
    assert isinstance(view, SearchReader) and isinstance(view, ScopedBackend)
    assert not isinstance(view, SearchBackend | BulkLoading | DocumentListing | HybridSearch)
    for name in (
        "upsert",
        "delete_document",
        "delete_index",
        "create_index",
        "document_hash",
        "list_indexes",
    ):
        assert not hasattr(view, name), name
    for name in ("close", "bulk", "list_documents", "sync", "index_store"):
        assert not hasattr(view, name), name


# --- on the embedded store ---------------------------------------------------------------------


@pytest.fixture
def shared_index(tmp_path: Path) -> EmbeddedBackend:
    """One index, two tenants; every passage mentions the installer."""
    chunks = [
        chunk(
            f"{t}{i}",
            f"The installer {t} step {i} needs disk space.",
            doc=f"{t}-doc{i % 2}",
            meta={"tenant": t},
        )
        for t in ("a", "b")
        for i in range(4)
    ]
    return new_backend(tmp_path, chunks)


def _documents(hits: list[SearchHit]) -> set[str]:
    return {h.chunk.document_id for h in hits}


def test_a_read_that_names_no_filter_reads_only_the_bound_documents(shared_index: EmbeddedBackend) -> None:
    view = bind_filters(shared_index, TENANT_A)
    assert _documents(shared_index.lexical(INDEX, "installer", k=50)) == {
        "a-doc0",
        "a-doc1",
        "b-doc0",
        "b-doc1",
    }
    assert _documents(view.lexical(INDEX, "installer", k=50)) == {"a-doc0", "a-doc1"}
    assert _documents(view.dense(INDEX, vec("installer"), k=50)) == {"a-doc0", "a-doc1"}
    assert _documents(view.lookup(INDEX, {}, limit=50)) == {"a-doc0", "a-doc1"}
    assert view.term_counts(INDEX, ["installer"], cap=50) == {"installer": 4}
    # a call naming another tenant's documents narrows to nothing, it does not widen
    assert view.lexical(INDEX, "installer", k=50, filters={"document_id": ["b-doc0"]}) == []
    assert _documents(view.lookup(INDEX, {"document_id": ["a-doc1", "b-doc1"]})) == {"a-doc1"}


def test_vectors_of_another_tenants_chunks_are_not_read_by_id(shared_index: EmbeddedBackend) -> None:
    view = bind_filters(shared_index, TENANT_A)
    # ids the view never returned: checked against the bound filters before any vector is read
    assert set(view.vectors(INDEX, ["a0", "b0", "b1", "missing"])) == {"a0"}
    assert set(view.vectors(INDEX, ["b2"])) == set()
    # ids it returned are within the filters already: read as they are
    hits = view.lexical(INDEX, "installer", k=50)
    got = view.vectors(INDEX, [h.chunk.chunk_id for h in hits])
    assert set(got) == {"a0", "a1", "a2", "a3"}
    np.testing.assert_allclose(got["a0"], shared_index.vectors(INDEX, ["a0"])["a0"])
    # unbound: every stored vector, as the backend gives them
    assert set(bind_filters(shared_index, None).vectors(INDEX, ["a0", "b0"])) == {"a0", "b0"}


def test_reads_of_spans_stay_within_the_bound_filters_too(shared_index: EmbeddedBackend) -> None:
    view = bind_filters(shared_index, {"tenant": "b"})
    assert _documents(view.lexical(INDEX, "installer", k=50, kind=None)) == {"b-doc0", "b-doc1"}
    assert view.lookup(INDEX, {}, kind=ChunkKind.SPAN) == []  # the kit stores passages only


def test_anchor_vectors_are_read_within_the_bound_filters_and_none_without_a_store(tmp_path: Path) -> None:
    """The focus span anchor's read of the vectors a backend keeps with its passages
    (`AnchorVectorStore`, OpenSearch) goes through the view within its filters; over a backend
    that keeps none (the embedded store) the view answers None, so the anchor reads its cache."""
    from evidence.search.base import AnchorVectors, AnchorVectorStore

    class Keeping:
        def __init__(self) -> None:
            self.asked: list[Any] = []

        def anchor_vectors(self, index: str, hits: Sequence[Any], *, filters: Any = None) -> Any:
            self.asked.append((index, [h.chunk_id for h in hits], filters))
            return {"p": AnchorVectors({}, {}, "d")}

    hit = chunk("p", "Some passage text.", doc="d")
    keeping = Keeping()
    view = ScopedBackend(keeping, {"tenant": "a"})  # type: ignore[arg-type]
    assert isinstance(view, AnchorVectorStore)
    assert set(view.anchor_vectors(INDEX, [hit]) or {}) == {"p"}
    assert keeping.asked == [(INDEX, [hit.chunk_id], {"tenant": "a"})]
    other = ScopedBackend(keeping, {"tenant": "a"}).narrow({"tenant": "b"})  # type: ignore[arg-type]
    assert other.anchor_vectors(INDEX, [hit]) == {}  # nothing both allow: nothing asked
    assert len(keeping.asked) == 1
    assert ScopedBackend(new_backend(tmp_path / "s"), None).anchor_vectors(INDEX, [hit]) is None
