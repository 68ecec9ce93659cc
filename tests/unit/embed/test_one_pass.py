"""One forward pass for a span's pooled vector and its word pieces (`PieceEmbedder`,
`MiniLMEmbedder.embed_documents_and_tokens`, `CachedEmbedder.embed_with_pieces`,
`verbatim.span_rank.embed_once`): on a store that has cached neither, the span scorer runs a span
through the model once, and every vector, piece matrix, cache row and ranking is the one the two
separate calls gave."""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.embed.background import BackgroundDocuments, _DocumentsElsewhere
from evidence.embed.base import Embedder, PieceEmbedder
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.minilm import MiniLMEmbedder
from evidence.embed.windows import LongTextRule
from evidence.testing import HashingEmbedder
from evidence.verbatim.span_rank import (
    DENSE_FEATURES,
    LEXICAL_FEATURES,
    IndexEmbed,
    LinearModel,
    SpanModel,
    TokenCache,
    rank_spans,
    tokens_of,
)
from tests.unit.verbatim.verbatimkit import span

SENTENCE = "Reduce the dose in patients with renal impairment and check their blood counts weekly."
TEXTS = [
    SENTENCE,
    "Store below 25 °C.",
    "",
    " ".join([SENTENCE] * 4),  # past FINE_WIDTH (64 pieces)
    " ".join([SENTENCE] * 20),  # past the 254-piece window: its first window only, for the pieces
]


@pytest.mark.parametrize("rule", [LongTextRule.FIRST, LongTextRule.MEAN])
def test_one_pass_gives_the_bits_of_the_two_calls_whatever_the_batch(rule: LongTextRule) -> None:
    emb = MiniLMEmbedder(long_text=rule)
    vectors = emb.embed_documents(TEXTS)
    pieces = emb.embed_tokens(TEXTS)
    both_vectors, both_pieces = emb.embed_documents_and_tokens(TEXTS)
    assert np.array_equal(both_vectors, vectors)
    assert all(np.array_equal(a, b) for a, b in zip(both_pieces, pieces, strict=True))
    # other batch-mates (one text alone, the list reversed): the bits of the two calls on them
    # (with `MEAN`, a one-window text's vector is re-normalised when a text of the same call has
    # several windows, in `embed_documents` as here: so each is compared with its own call)
    for part in ([TEXTS[0]], TEXTS[::-1]):
        part_v, part_p = emb.embed_documents_and_tokens(part)
        assert np.array_equal(part_v, emb.embed_documents(part))
        assert all(np.array_equal(a, b) for a, b in zip(part_p, emb.embed_tokens(part), strict=True))
        # the pieces never depend on the batch
        assert all(np.array_equal(a, pieces[TEXTS.index(t)]) for a, t in zip(part_p, part, strict=True))
    if rule is LongTextRule.FIRST:  # nor does a vector under the default rule
        assert np.array_equal(emb.embed_documents_and_tokens([TEXTS[0]])[0][0], vectors[0])
    assert emb.embed_documents_and_tokens([])[1] == []
    assert isinstance(emb, PieceEmbedder) and isinstance(emb, Embedder)


def _unit(seed: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(
        int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "little")
    )
    m = rng.normal(size=shape).astype(np.float32)
    return np.asarray(m / np.linalg.norm(m, axis=-1, keepdims=True), dtype=np.float32)


class TwoPasses:
    """A word-piece model that cannot give both from one pass: each text's vector and pieces a
    function of the text alone; every text it embeds is counted, per method."""

    model_id = "fake"
    dimension = 8
    piece_key = "fake+pieces"

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.update(("documents", t) for t in texts)
        return np.stack([_unit(t, (self.dimension,)) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return _unit(text, (self.dimension,))

    def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.seen.update(("tokens", t) for t in texts)
        return [_unit(f"pieces:{t}", (len(t.split()), self.dimension)) for t in texts]


class OnePass(TwoPasses):
    def embed_documents_and_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        self.seen.update(("both", t) for t in texts)
        vectors = np.stack([_unit(t, (self.dimension,)) for t in texts])
        return vectors, [_unit(f"pieces:{t}", (len(t.split()), self.dimension)) for t in texts]


QUESTION = "How should the dose change for kidney failure?"
SPANS = [
    span(0, "Reduce the dose in patients with renal impairment.", section="Dosage"),
    span(1, "Take one tablet twice a day with food.", section="Dosage"),
    span(2, "Store the tablets in a dry place.", section="Storage"),
    span(3, "Take one tablet twice a day with food.", section="Dosage"),  # a text twice
]
MODEL = SpanModel(
    lexical=LinearModel({"bm25": 1.0}),
    dense=LinearModel({"bm25": 1.0, "span_cosine": 2.0}),
    top_n=4,
    tokens=LinearModel({"bm25": 1.0, "span_cosine": 2.0, "token_paraphrase": 3.0}),
)


def _rank(embedder: Any, model: SpanModel = MODEL, vector: Any = None) -> list[tuple[float, int]]:
    embed = IndexEmbed(lambda: embedder)
    lexical = {f: np.zeros(len(SPANS)) for f in LEXICAL_FEATURES}
    lexical["bm25"] = np.asarray([0.5, 0.9, 0.1, 0.9])
    return rank_spans(
        SPANS,
        lexical,
        candidates=range(len(SPANS)),
        model=model,
        query_vector=_unit(QUESTION, (8,)) if vector is None else vector,
        embed=embed,
        question=QUESTION,
        embed_tokens=tokens_of(embed),
    )


def _rows(store: Path) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """Every row of the store's two caches (vectors; word pieces but their "used" time)."""
    with sqlite3.connect(store / "embeddings.sqlite3") as db:
        vectors = set(db.execute("SELECT scope, model, hash, vector FROM scoped_embeddings"))
    with sqlite3.connect(store / "pieces.sqlite3") as db:
        pieces = set(db.execute("SELECT scope, model, hash, rows, dim, vectors, bytes FROM pieces"))
    return vectors, pieces


def _cached(inner: Any, store: Path) -> CachedEmbedder:
    return CachedEmbedder(
        inner, EmbeddingCache(store / "embeddings.sqlite3", pieces_max_bytes=1 << 20), scope="i"
    )


def test_a_cold_span_runs_through_the_model_once_with_the_two_calls_results(tmp_path: Path) -> None:
    texts = list(dict.fromkeys(c.text for c in SPANS))
    headings = ["Dosage", "Storage"]

    two = TwoPasses()
    before = _rank(_cached(two, tmp_path / "two"))
    # today's path: every span through the model twice, each heading once (and the question's
    # pieces: this model keeps none from its query pass, as MiniLM does)
    asked = ("tokens", QUESTION)
    assert two.seen == Counter(
        {**{("documents", t): 1 for t in texts + headings}, **{("tokens", t): 1 for t in texts}, asked: 1}
    )

    one = OnePass()
    after = _rank(_cached(one, tmp_path / "one"))
    assert after == before
    # each span once (both from one pass), each heading once (its vector only); the question's
    # pieces are not among the spans' (they are never stored)
    assert one.seen == Counter(
        {**{("both", t): 1 for t in texts}, **{("documents", h): 1 for h in headings}, asked: 1}
    )
    # the caches hold the same rows, bit for bit, under the same keys
    assert _rows(tmp_path / "one") == _rows(tmp_path / "two")

    # warm: another process on the same store (a new in-process cache) embeds nothing
    again = OnePass()
    assert _rank(_cached(again, tmp_path / "one")) == before
    assert again.seen == Counter({asked: 1})


def test_a_span_whose_vector_is_cached_has_only_its_pieces_embedded(tmp_path: Path) -> None:
    one = OnePass()
    cached = _cached(one, tmp_path)
    cached.embed_documents([SPANS[0].text])  # its vector cached (spans embedded at indexing)
    one.seen.clear()
    assert cached.embed_with_pieces([SPANS[0].text]) == {}
    _rank(cached)
    assert one.seen[("tokens", SPANS[0].text)] == 1 and not one.seen[("both", SPANS[0].text)]
    assert not one.seen[("documents", SPANS[0].text)]


def test_without_the_store_cache_a_cold_span_runs_through_the_model_once(tmp_path: Path) -> None:
    # no embedding cache in front (OpenSearch): the one pass's vectors go straight to the re-rank
    # (`embed_once` gives them, `reading_first` reads them) instead of being embedded again
    texts = list(dict.fromkeys(c.text for c in SPANS))
    headings = ["Dosage", "Storage"]
    asked = ("tokens", QUESTION)
    expected = _rank(_cached(TwoPasses(), tmp_path / "two"))
    bare = OnePass()
    assert _rank(bare) == expected
    assert bare.seen == Counter(
        {**{("both", t): 1 for t in texts}, **{("documents", h): 1 for h in headings}, asked: 1}
    )
    # again: the pieces (and the question's) are held in process, so each vector (no cache) is
    # embedded alone, as before this change (a text twice in the head, twice)
    bare.seen.clear()
    assert _rank(bare) == expected
    assert bare.seen == Counter([("documents", c.text) for c in SPANS] + [("documents", h) for h in headings])
    # a model that cannot do both: the two calls, as before
    two = TwoPasses()
    assert _rank(two) == expected
    assert not any(kind == "both" for kind, _ in two.seen)
    # a cached embedder whose model cannot do both
    assert _cached(TwoPasses(), tmp_path / "other").embed_with_pieces(["x"]) == {}


class Elsewhere(_DocumentsElsewhere):
    """`evidence serve`'s document embedder, its other process played by `worker`."""

    def __init__(self, inner: Any, worker: Any) -> None:
        super().__init__(inner)
        self.worker = worker

    def _embed_elsewhere(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.worker.embed_documents(texts))


def test_under_serve_a_cold_span_runs_through_the_servers_model_once(tmp_path: Path) -> None:
    # `evidence serve` (write_nice > 0): the cache's inner embedder sends documents to a worker
    # process; a cold span's vector and pieces now come from one pass in the server, where its
    # pieces already ran, not its vector in the worker and its pieces here
    texts = list(dict.fromkeys(c.text for c in SPANS))
    headings = ["Dosage", "Storage"]
    expected = _rank(_cached(TwoPasses(), tmp_path / "two"))
    server, worker = OnePass(), OnePass()
    served = Elsewhere(server, worker)
    assert isinstance(served, PieceEmbedder) and served.piece_key == server.piece_key
    assert _rank(_cached(served, tmp_path / "one")) == expected
    assert server.seen == Counter({**{("both", t): 1 for t in texts}, ("tokens", QUESTION): 1})
    assert worker.seen == Counter({("documents", h): 1 for h in headings})  # a heading: its vector alone
    assert _rows(tmp_path / "one") == _rows(tmp_path / "two")
    # uploads still embed in the worker
    served.embed_documents(["An uploaded passage."])
    assert worker.seen[("documents", "An uploaded passage.")] == 1
    # a model with no pieces in the server: no port, the two calls as before
    assert not isinstance(Elsewhere(HashingEmbedder(), worker), PieceEmbedder)


def test_serves_one_pass_gives_the_workers_bits(tmp_path: Path) -> None:
    # the real thing: MiniLM in a worker process (BackgroundDocuments) against the server's one
    # pass; every vector and piece matrix the same bits
    server = MiniLMEmbedder()
    background = BackgroundDocuments(server, build=MiniLMEmbedder, nice=0)
    try:
        cached = _cached(background, tmp_path)
        pieces = cached.embed_with_pieces(TEXTS)
        assert set(pieces) == set(TEXTS)
        assert all(
            np.array_equal(pieces[t], m) for t, m in zip(TEXTS, server.embed_tokens(TEXTS), strict=True)
        )
        from_cache = cached.cached_documents(TEXTS)
        assert not background.started  # nothing went to the worker
        worker = background.embed_documents(TEXTS)
        assert all(v is not None and np.array_equal(v, w) for v, w in zip(from_cache, worker, strict=True))
    finally:
        background.close()


def test_without_the_store_cache_the_ranking_is_the_two_calls_bit_for_bit() -> None:
    # OpenSearch with MiniLM: the re-rank's scores from the one pass equal those of the two calls
    class Apart:
        """MiniLM without its one pass."""

        def __init__(self, inner: MiniLMEmbedder) -> None:
            self.inner = inner
            self.model_id, self.dimension, self.piece_key = inner.model_id, inner.dimension, inner.piece_key
            self.embed_documents, self.embed_tokens = inner.embed_documents, inner.embed_tokens

    vector = MiniLMEmbedder().embed_query(QUESTION)
    assert _rank(MiniLMEmbedder(), vector=vector) == _rank(Apart(MiniLMEmbedder()), vector=vector)


def test_priming_keeps_what_the_store_holds_and_embeds_only_the_rest() -> None:
    asked: list[str] = []

    def embed_tokens(texts: Sequence[str]) -> list[Any]:
        asked.extend(texts)
        return [np.ones((2, 4), dtype=np.float32) for _ in texts]

    class Store:
        def __init__(self) -> None:
            self.rows: dict[bytes, np.ndarray] = {}

        def get_many(self, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
            return {h: self.rows[h] for h in hashes if h in self.rows}

        def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
            self.rows.update(items)

    store = Store()
    cache = TokenCache(embed_tokens)
    stored = cache.through(store)
    stored(["a"])  # "a" embedded and stored
    fresh = TokenCache(embed_tokens).through(store)  # another process
    given: list[str] = []

    def both(texts: Sequence[str]) -> dict[str, np.ndarray]:
        given.extend(texts)
        return {t: np.full((3, 4), 0.5, dtype=np.float32) for t in texts if t != "c"}  # "c": vector cached

    fresh.prime(["a", "b", "c", "b"], both)
    assert given == ["b", "c"]  # "a" read from the store, "b" asked once
    assert len(store.rows) == 2  # "b" written as `lookup` writes what it embeds
    out = fresh(["a", "b", "c"])
    assert asked == ["a", "c"]  # only "c" embedded now (its pieces alone)
    assert [m.shape for m in out] == [(2, 4), (3, 4), (2, 4)] and all(m.dtype == np.float16 for m in out)


def test_dense_model_without_tokens_does_not_prime(tmp_path: Path) -> None:
    one = OnePass()
    dense_only = SpanModel(
        lexical=LinearModel({"bm25": 1.0}), dense=LinearModel(dict.fromkeys(DENSE_FEATURES, 1.0)), top_n=4
    )
    _rank(_cached(one, tmp_path), dense_only)
    assert not any(kind in {"both", "tokens"} for kind, _ in one.seen)
