"""Windows over a long text, the one vector made of them (embed/windows.py), and the cache key
that keeps vectors of different rules apart (embed/base.py `document_key`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from evidence.embed.base import document_key
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.windows import mean_of_windows, split_windows


@pytest.mark.parametrize("n", [0, 1, 253, 254])
def test_a_text_that_fits_is_one_window(n: int) -> None:
    assert split_windows(n, 254, 0) == [(0, n)]


@pytest.mark.parametrize(
    ("n", "size", "overlap"),
    [(255, 254, 0), (508, 254, 0), (509, 254, 0), (1937, 254, 0), (1000, 254, 64), (10, 3, 1), (7, 2, 1)],
)
def test_windows_cover_every_token_and_none_is_wider_than_the_model(n: int, size: int, overlap: int) -> None:
    spans = split_windows(n, size, overlap)
    covered = np.zeros(n, dtype=bool)
    for start, end in spans:
        assert 0 <= start < end <= n
        assert end - start <= size
        covered[start:end] = True
    assert covered.all()
    assert spans[0][0] == 0 and spans[-1][1] == n
    # Consecutive windows share at least `overlap` tokens, and none is read twice for nothing.
    for (a0, a1), (b0, b1) in itertools.pairwise(spans):
        assert a0 < b0 and a1 < b1
        assert a1 - b0 >= overlap
    assert len(spans) == -(-(n - overlap) // (size - overlap))


def test_the_tail_is_a_short_window_of_the_last_tokens() -> None:
    # 600 word pieces, 254 a window: two full windows and the last 92 (read once, not re-read).
    assert split_windows(600, 254, 0) == [(0, 254), (254, 508), (508, 600)]
    assert split_windows(600, 254, 54) == [(0, 254), (200, 454), (400, 600)]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_window_shapes_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"window size|overlap"):
        split_windows(100, size, overlap)


def test_mean_of_windows_is_one_unit_vector_per_text() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(5, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = mean_of_windows(vectors, [0, 1, 1, 1, 2], 3)
    assert out.shape == (3, 8) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    # A text of one window keeps its window's vector.
    np.testing.assert_allclose(out[0], vectors[0], rtol=1e-6)
    np.testing.assert_allclose(out[2], vectors[4], rtol=1e-6)
    mean = vectors[1:4].sum(axis=0)
    np.testing.assert_allclose(out[1], mean / np.linalg.norm(mean), rtol=1e-5)


def test_a_window_counts_by_its_word_pieces_when_weighted() -> None:
    # Two orthogonal windows: 254 word pieces on one topic, a 30-piece tail on another.
    vectors = np.eye(2, dtype=np.float32)
    plain = mean_of_windows(vectors, [0, 0], 1)[0]
    weighted = mean_of_windows(vectors, [0, 0], 1, weights=[254, 30])[0]
    np.testing.assert_allclose(plain, [2**-0.5, 2**-0.5], rtol=1e-6)
    np.testing.assert_allclose(weighted, np.array([254, 30]) / np.hypot(254, 30), rtol=1e-6)


class _Fake:
    """An embedder that counts its calls; `document_rule` as MiniLM reports it."""

    model_id = "fake-model"
    dimension = 2

    def __init__(self, rule: str, value: float) -> None:
        self.document_rule = rule
        self.value = value
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.full((len(texts), 2), self.value, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.full(2, self.value, dtype=np.float32)


def test_a_vector_cached_under_one_rule_is_not_served_under_another(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    first, mean = _Fake("", 1.0), _Fake("windows254-weighted-mean", 2.0)
    assert document_key(first) == "fake-model"  # vectors cached before windows stay valid
    assert document_key(mean) == "fake-model+windows254-weighted-mean"
    assert CachedEmbedder(first, cache).embed_documents(["a long text"])[0, 0] == 1.0
    assert CachedEmbedder(mean, cache).embed_documents(["a long text"])[0, 0] == 2.0
    assert mean.calls == 1
    # Each rule then answers from its own entry.
    assert CachedEmbedder(first, cache).embed_documents(["a long text"])[0, 0] == 1.0
    assert CachedEmbedder(mean, cache).embed_documents(["a long text"])[0, 0] == 2.0
    assert (first.calls, mean.calls) == (1, 1)
    cache.close()


def test_truncation_to_another_window_keys_its_own_vectors() -> None:
    """Under `first` the window decides a long text's vector, so a shared cache must not serve a
    256-piece vector to a 128-piece run; the default window keeps the key vectors were cached under."""
    from evidence.config import LongTextRule, Settings
    from evidence.embed.minilm import DEFAULT_MAX_TOKENS, MiniLMEmbedder

    assert Settings().embed_max_tokens == DEFAULT_MAX_TOKENS
    default = MiniLMEmbedder(long_text=LongTextRule.FIRST)
    short = MiniLMEmbedder(max_tokens=128, long_text=LongTextRule.FIRST)
    assert document_key(default) == default.model_id
    assert document_key(short) == f"{short.model_id}+first126"
    assert document_key(short) != document_key(MiniLMEmbedder(max_tokens=128, long_text=LongTextRule.MEAN))
