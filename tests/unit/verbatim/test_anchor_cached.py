"""The `default` profile's span anchor reading span vectors from the store's embedding cache only
(`SpanAnchors(vectors=…)`, docs/ranking.md#focus-span-anchor): never an embedding at query time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from evidence.config import Settings
from evidence.demo import DATA
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.errors import ConfigurationError
from evidence.model import RetrieveRequest
from evidence.rank.candidate import Candidate
from evidence.records import ChunkKind
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder
from evidence.verbatim.cascade import ANCHOR_SCORERS, HitSpans, SpanAnchors, spans_in_hits, spans_within
from evidence.verbatim.span_rank import IndexVectors, cache_lookup
from evidence.verbatim.spans import document_order, header_rows, heading_echoes, scoring_texts
from tests.unit.verbatim.verbatimkit import rank_context

INDEX = "label"
LABEL = DATA / "label" / "lipravex.md"


def whole_documents(backend: Any, index: str, passages: Sequence[Any], *, max_scan: int = 5000) -> HitSpans:
    """What `spans_in_hits` must give, the slow way: every function over the whole documents."""
    if not passages:
        return HitSpans([], [])
    docs = list(dict.fromkeys(p.document_id for p in passages))
    found = backend.lookup(index, {"document_id": docs}, limit=max_scan, kind=ChunkKind.SPAN)
    spans = document_order([h.chunk for h in found])
    inside = {id(c) for c in spans_within(spans, passages)}
    texts = scoring_texts(spans)
    skip = header_rows(spans) | heading_echoes(spans)
    keep = [i for i, c in enumerate(spans) if id(c) in inside and i not in skip]
    return HitSpans([spans[i] for i in keep], [texts[i] for i in keep])


class Counting(HashingEmbedder):
    """A test embedder that counts its document embeddings and can be told to refuse them."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0
        self.forbid = False

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.forbid and texts:
            raise AssertionError(f"embedded {len(texts)} texts at query time")
        self.embedded += len(texts)
        return super().embed_documents(texts)


def test_cached_documents_reads_the_cache_and_never_embeds(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachedEmbedder(inner, EmbeddingCache(tmp_path / "e.sqlite3"), scope="index:a")
    made = cached.embed_documents(["alpha", "beta"])
    assert inner.embedded == 2
    read = cached.cached_documents(["alpha", "gamma", "beta", "alpha"])
    assert inner.embedded == 2  # a read only
    first, missing, second, again = read
    assert missing is None and first is not None and second is not None and again is not None
    assert np.array_equal(first, made[0]) and np.array_equal(second, made[1])
    assert np.array_equal(again, made[0])
    assert cached.cached_documents([]) == []
    # Another index's scope holds nothing of it.
    assert cached.scoped("index:b").cached_documents(["alpha"]) == [None]
    # Found through a wrapper (`inner`); an embedder without the store's cache has none.

    class Wrapper:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

    assert cache_lookup(Wrapper(cached)) == cached.cached_documents
    assert cache_lookup(HashingEmbedder()) is None
    assert IndexVectors(HashingEmbedder)(["alpha", "beta"]) == [None, None]
    assert inner.embedded == 2


def test_cached_anchor_is_each_hits_best_cached_span(label_service: EvidenceService) -> None:
    """Each passage hit's anchor is its span whose cached vector is nearest the question's; a span
    whose vector the cache lacks is no candidate; a hit with none, and a question without a
    vector, get no anchor."""
    backend = label_service.backend
    question = "How long does the effect last?"
    passages = [h.chunk for h in backend.lexical(INDEX, "dose tablets patients", k=4, kind=ChunkKind.PASSAGE)]
    assert len(passages) >= 2
    hits = [Candidate(chunk=p, score=1.0, first_stage_score=1.0) for p in passages]
    found = spans_in_hits(backend, INDEX, passages)
    assert found.spans and len(found.texts) == len(found.spans)
    first = [
        k for k, s in enumerate(found.spans) if passages[0].char_start <= s.char_start < passages[0].char_end
    ]
    first = [k for k in first if found.spans[k].document_id == passages[0].document_id]
    assert len(first) >= 2
    target, runner_up = found.spans[first[-1]], found.spans[first[0]]

    dim = 8
    q = np.zeros(dim, dtype=np.float32)
    q[0] = 1.0
    asked: list[list[str]] = []

    def vectors(missing: set[str]) -> Any:
        def read(texts: Sequence[str]) -> list[Any]:
            asked.append(list(texts))
            out: list[Any] = []
            for t in texts:
                if t in missing:
                    out.append(None)
                    continue
                v = np.zeros(dim, dtype=np.float32)
                v[0] = 1.0 if t == found.texts[first[-1]] else (0.5 if t == found.texts[first[0]] else 0.1)
                v[1] = 1.0
                out.append(v)
            return out

        return read

    ctx = rank_context(backend, INDEX, question, q)
    for scorer in ("cos", "cos_head"):
        anchors = SpanAnchors(vectors=vectors(set()), scorer=scorer).find(hits, ctx)
        assert anchors[0] == (target.char_start, target.char_end)
        for i, (a, b) in anchors.items():
            p = hits[i].chunk
            assert p.char_start <= a < b <= p.char_end
    # The best span uncached: the next best cached one anchors the hit.
    anchors = SpanAnchors(vectors=vectors({found.texts[first[-1]]}), scorer="cos").find(hits, ctx)
    assert anchors[0] == (runner_up.char_start, runner_up.char_end)
    # The spans are read with their document's scoring texts (the cache's keys), and headings.
    assert set(found.texts) <= set(asked[-1])
    # Nothing cached: no anchor; no question vector: no anchor, nothing read.
    assert SpanAnchors(vectors=vectors(set(found.texts))).find(hits, ctx) == {}
    n = len(asked)
    assert SpanAnchors(vectors=vectors(set())).find(hits, rank_context(backend, INDEX, question)) == {}
    assert len(asked) == n
    # Every scorer runs on the same reads.
    for scorer in ANCHOR_SCORERS:
        assert SpanAnchors(vectors=vectors(set()), scorer=scorer).find(hits, ctx)
    # With each hit's best cosine of a candidate span inside it (what `FocusHits(anchor_order=…)`
    # reorders the first hits by): the target's in the first hit; no candidate, no cosine.
    anchored, cosines = SpanAnchors(vectors=vectors(set())).find_with_cosines(hits, ctx)
    assert anchored == SpanAnchors(vectors=vectors(set())).find(hits, ctx)
    best = cosines[0]
    assert len(cosines) == len(hits) and best is not None and best == pytest.approx(2**-0.5)
    assert all(c <= best + 1e-9 for c in cosines if c is not None)
    none = SpanAnchors(vectors=vectors(set(found.texts))).find_with_cosines(hits, ctx)
    assert none == ({}, [None] * len(hits))
    with pytest.raises(ConfigurationError, match="scorer"):
        SpanAnchors(vectors=vectors(set()), scorer="tokens")


def test_default_profile_with_the_anchor_never_embeds_at_query_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `EVIDENCE_FOCUS_SPAN_ANCHOR` on, a retrieve reads the span vectors indexing put in the
    store's embedding cache and embeds no text (the embedder refuses to, and is never asked)."""
    inner = Counting()
    store = tmp_path / "store"
    embedder = CachedEmbedder(inner, EmbeddingCache(store / "embeddings.sqlite3"))
    # The spans' own vectors (`own`), put in the cache by hand below; the default, `late`, reads
    # another key space (tests/unit/embed/test_late_spans.py).
    settings = Settings(store_dir=store, focus_span_anchor=True, embed_spans_at_index="own")
    service = EvidenceService(settings, embedder=embedder)
    try:
        assert not service.index_paths(INDEX, [LABEL]).failed
        # What indexing the span vectors does (the indexer's side): every fact span's scoring
        # text and heading through the index's document embedder, into the cache.
        spans = document_order(
            [h.chunk for h in service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.SPAN)]
        )
        headings = list(dict.fromkeys(c.section for c in spans if c.section))
        service.document_embedder(INDEX).embed_documents([*scoring_texts(spans), *headings])
        inner.forbid = True
        found: list[dict[int, tuple[int, int]]] = []
        real = SpanAnchors.find_with_cosines  # what `focus` asks (its anchors and hit order)

        def spy(self: SpanAnchors, hits: Sequence[Any], ctx: Any) -> Any:
            out = real(self, hits, ctx)
            found.append(out[0])
            return out

        monkeypatch.setattr(SpanAnchors, "find_with_cosines", spy)
        response = service.retrieve(INDEX, RetrieveRequest(query="How long should the tablets be stored?"))
        assert response.hits
        assert found and found[0]  # the anchor ran and anchored hits from the cache
        # An empty cache: no anchor, still no embedding.
        EmbeddingCache(store / "embeddings.sqlite3").drop_scope(f"index:{INDEX}")
        found.clear()
        assert service.retrieve(INDEX, RetrieveRequest(query="How long should the tablets be stored?")).hits
        assert found == [{}]
    finally:
        service.close()
        embedder.cache.close()


def test_spans_in_hits_reads_as_the_whole_documents_would(label_service: EvidenceService) -> None:
    """`spans_in_hits` works on the spans inside the hits and the few before each run of them
    that their scoring texts read (a table's caption and header, a label): the same spans and
    texts as `scoring_texts`, `header_rows` and `heading_echoes` over the whole documents."""
    import random

    from evidence.records import SpanType

    backend = label_service.backend
    passages = [h.chunk for h in backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.PASSAGE)]
    spans = [h.chunk for h in backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.SPAN)]
    assert any(c.span_type is SpanType.TABLE_ROW for c in spans)  # the label has tables
    rng = random.Random(5)
    sets = [passages, *(rng.sample(passages, rng.randrange(1, min(8, len(passages)))) for _ in range(60))]
    read = 0
    for chosen in sets:
        fast, whole = spans_in_hits(backend, INDEX, chosen), whole_documents(backend, INDEX, chosen)
        assert [c.chunk_id for c in fast.spans] == [c.chunk_id for c in whole.spans]
        assert fast.texts == whole.texts
        read += len(fast.spans)
    assert read
    # A table row inside a hit is read with its header even when the header is not in the hit.
    from dataclasses import replace

    ordered = document_order(spans)
    k = next(
        k
        for k in range(1, len(ordered))
        if ordered[k].span_type is SpanType.TABLE_ROW and ordered[k - 1].span_type is SpanType.TABLE_ROW
    )
    row = ordered[k]
    holder = next(p for p in passages if p.document_id == row.document_id)
    cut = replace(holder, char_start=row.char_start, char_end=row.char_end)
    one = spans_in_hits(backend, INDEX, [cut])
    assert [c.chunk_id for c in one.spans] == [row.chunk_id]
    assert one.texts[0] != row.text and one.texts[0].endswith(row.text)
    assert one == whole_documents(backend, INDEX, [cut])
    assert spans_in_hits(backend, INDEX, []) == whole_documents(backend, INDEX, [])


def test_best_inside_by_document_is_the_scan_of_every_passage() -> None:
    # `_best_inside` compares each ranked span with its own document's passages only: the same
    # anchors, inserted in the same order, as comparing it with every passage through `inside`.
    import random

    from evidence.records import Chunk
    from evidence.verbatim.cascade import _best_inside
    from evidence.verbatim.spans import inside

    def scan(passages: Sequence[tuple[int, Chunk]], ranked: Sequence[Chunk]) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for s in ranked:
            for i, c in passages:
                if i not in out and inside(s, c):
                    out[i] = (s.char_start, s.char_end)
            if len(out) == len(passages):
                break
        return out

    def chunk(cid: str, doc: str, a: int, b: int, kind: ChunkKind) -> Chunk:
        return Chunk(chunk_id=cid, document_id=doc, kind=kind, text="x", char_start=a, char_end=b, sequence=0)

    rng = random.Random(3)
    for _ in range(300):
        passages = []
        for i in range(rng.randint(0, 8)):
            a = rng.randint(0, 2000)
            passages.append(
                (
                    rng.randint(0, 3) + 4 * i,
                    chunk(f"p{i}", rng.choice("de"), a, a + rng.randint(0, 600), ChunkKind.PASSAGE),
                )
            )
        ranked = []
        for k in range(rng.randint(0, 40)):
            a = rng.randint(0, 2600)
            ranked.append(chunk(f"s{k}", rng.choice("def"), a, a + rng.randint(0, 200), ChunkKind.SPAN))
        got, want = _best_inside(passages, ranked), scan(passages, ranked)
        assert got == want and list(got) == list(want)


def test_a_run_over_given_spans_reads_them_as_given(label_service: EvidenceService) -> None:
    """`CascadePaths.over_spans` (the anchor's statistics): the spans as given, scoped to their
    documents, the headers as given; `keep_spans` narrows a run only before anything is scored."""
    from evidence.verbatim.cascade import _NO_PLAN, VerbatimCascade
    from evidence.verbatim.cascade_paths import CascadePaths

    backend = label_service.backend
    spans = [h.chunk for h in backend.lookup(INDEX, {}, limit=40, kind=ChunkKind.SPAN)]
    assert len(spans) > 3
    cascade = VerbatimCascade()
    question = "How long does the effect last?"
    run: dict[str, Any] = {
        "backend": backend,
        "index": INDEX,
        "question": question,
        "plan": _NO_PLAN,
        "q_groups": cascade._question_terms(question, _NO_PLAN, []),
        "query_vector": None,
    }
    state = CascadePaths.over_spans(cascade, spans, headers=set(), **run)
    assert state.spans == spans and state.spans is not spans
    assert state.scope == {"document_id": sorted({c.document_id for c in spans})}
    assert state.headers == set()
    read = CascadePaths.over_spans(cascade, spans, **run)
    assert read.headers == header_rows(read.spans) | heading_echoes(read.spans)
    narrowed = CascadePaths.over_spans(cascade, spans, **run)
    narrowed.keep_spans(spans[:3])
    assert narrowed.spans == spans[:3]
    assert state.hybrid_features()[0]
    with pytest.raises(RuntimeError, match="scored already"):
        state.keep_spans(spans[:3])
