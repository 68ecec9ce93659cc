"""`base.ordered_lookup` (what the span anchor reads, `verbatim.cascade.spans_in_hits`): the
embedded store's per-generation answer and the scoped view's give exactly the chunks `lookup`
gives, grouped by document in document order, as the fallback (OpenSearch, any reader with
`lookup` only) computes them; the bound filters still apply."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evidence.records import Chunk, ChunkKind, SearchHit
from evidence.search.base import OrderedChunks, OrderedLookup, ordered_lookup
from evidence.search.embedded import EmbeddedBackend
from evidence.search.scoped import bind_filters
from tests.unit.rank.rankkit import INDEX, chunk, new_backend, store


def _span(cid: str, doc: str, tenant: str, *, start: int, seq: int, section: str = "") -> Chunk:
    text = f"span {cid} of {doc}"
    c = chunk(cid, text, doc=doc, meta={"tenant": tenant}, seq=seq)
    return replace(c, kind=ChunkKind.SPAN, char_start=start, char_end=start + 10, section=section)


def _chunks() -> list[Chunk]:
    """Spans stored out of document order (rowid order is not document order), with ties on
    char_start (broken by sequence) and one full tie (kept in rowid order), plus passages."""
    out = []
    for doc, tenant in (("a-doc0", "a"), ("a-doc1", "a"), ("b-doc0", "b")):
        starts = [50, 0, 20, 20, 80, 20, 5]
        seqs = [6, 0, 3, 2, 7, 3, 1]
        sections = ["Two", "", "One", "One", "Two", "One", ""]
        out += [
            _span(f"{doc}-s{i}", doc, tenant, start=st, seq=sq, section=sec)
            for i, (st, sq, sec) in enumerate(zip(starts, seqs, sections, strict=True))
        ]
        out.append(chunk(f"{doc}-p", f"passage of {doc}", doc=doc, meta={"tenant": tenant}))
    return out


class LookupOnly:
    """A reader that offers `lookup` only (as the OpenSearch adapter): the fallback."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def lookup(self, index: str, filters: Any, *, limit: int = 100, kind: Any = None) -> list[SearchHit]:
        return list(self._reader.lookup(index, filters, limit=limit, kind=kind))


def lookup_only(reader: Any) -> Any:
    """`LookupOnly` as any reader (it is no full `SearchReader`: what the fallback needs only)."""
    return LookupOnly(reader)


def _plain(read: list[OrderedChunks]) -> list[tuple[Any, ...]]:
    return [
        (d.document_id, [c.chunk_id for c in d.chunks], d.starts.tolist(), d.ends.tolist(), d.sections)
        for d in read
    ]


@pytest.fixture
def backend(tmp_path: Path) -> EmbeddedBackend:
    return new_backend(tmp_path, _chunks())


FILTERS: list[dict[str, Any]] = [
    {"document_id": ["a-doc0", "b-doc0", "a-doc1"]},
    {"document_id": "a-doc1"},
    {"document_id": ["a-doc0", "missing"]},
    {"document_id": ["a-doc0", "a-doc1", "b-doc0"], "tenant": "a"},
    {"document_id": ["b-doc0"], "tenant": "a"},
    {"tenant": "b"},
]


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("limit", [100, 9, 7, 3, 1])
@pytest.mark.parametrize("kind", [ChunkKind.SPAN, None])
def test_the_embedded_store_reads_what_lookup_gives_in_document_order(
    backend: EmbeddedBackend, filters: dict[str, Any], limit: int, kind: ChunkKind | None
) -> None:
    assert isinstance(backend, OrderedLookup)
    want = _plain(ordered_lookup(lookup_only(backend), INDEX, filters, limit=limit, kind=kind))
    assert _plain(ordered_lookup(backend, INDEX, filters, limit=limit, kind=kind)) == want
    # kept for the generation: the second read is the same
    assert _plain(ordered_lookup(backend, INDEX, filters, limit=limit, kind=kind)) == want


def test_the_fallback_sorts_by_offset_then_sequence_and_keeps_rowid_order_on_ties(
    backend: EmbeddedBackend,
) -> None:
    (doc,) = ordered_lookup(
        lookup_only(backend), INDEX, {"document_id": "a-doc0"}, limit=100, kind=ChunkKind.SPAN
    )
    assert [c.chunk_id.rsplit("-", 1)[1] for c in doc.chunks] == ["s1", "s6", "s3", "s2", "s5", "s0", "s4"]
    assert doc.sections == ("One", "Two")


def test_a_write_is_read_at_its_generation(backend: EmbeddedBackend) -> None:
    filters = {"document_id": ["a-doc0", "a-doc1"]}
    before = _plain(ordered_lookup(backend, INDEX, filters, limit=100, kind=ChunkKind.SPAN))
    store(
        backend,
        [
            _span("new-s0", "a-doc1", "a", start=1, seq=0, section="Three"),
            _span("new-s1", "a-doc1", "a", start=0, seq=1),
        ],
    )
    after = _plain(ordered_lookup(backend, INDEX, filters, limit=100, kind=ChunkKind.SPAN))
    assert after != before
    assert after == _plain(
        ordered_lookup(lookup_only(backend), INDEX, filters, limit=100, kind=ChunkKind.SPAN)
    )
    assert after[1][1] == ["new-s1", "new-s0"] and after[1][4] == ("Three",)


@pytest.mark.parametrize("inner", ["embedded", "lookup only"])
def test_the_scoped_view_reads_only_the_bound_documents(backend: EmbeddedBackend, inner: str) -> None:
    reader: Any = backend if inner == "embedded" else lookup_only(backend)
    view = bind_filters(reader, {"tenant": "a"})
    asked = {"document_id": ["a-doc0", "b-doc0", "a-doc1"]}
    got = ordered_lookup(view, INDEX, asked, limit=100, kind=ChunkKind.SPAN)
    assert [d.document_id for d in got] == ["a-doc0", "a-doc1"]  # b-doc0 is another tenant's
    assert _plain(got) == _plain(
        ordered_lookup(lookup_only(view), INDEX, asked, limit=100, kind=ChunkKind.SPAN)
    )
    # the limit counts the bound documents' spans only, as the view's lookup does
    assert _plain(ordered_lookup(view, INDEX, asked, limit=9, kind=ChunkKind.SPAN)) == _plain(
        ordered_lookup(lookup_only(view), INDEX, asked, limit=9, kind=ChunkKind.SPAN)
    )
    assert ordered_lookup(view, INDEX, {"document_id": ["b-doc0"]}, limit=100, kind=ChunkKind.SPAN) == []
    assert ordered_lookup(bind_filters(reader, {"tenant": "c"}), INDEX, asked, limit=100, kind=None) == []
