"""`EmbeddingCache.get_kept`: the vectors read before, kept decoded per process, answer as the file
would (docs/ranking.md#focus-span-anchor-latency): another connection's write empties them, this
connection's own writes drop what they touch, a text not found is asked again, and they are bounded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evidence.embed import cache as cache_mod
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.testing import HashingEmbedder


def vec(i: int) -> np.ndarray:
    return np.random.default_rng(i).normal(size=8).astype(np.float32)


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_kept_reads_answer_as_the_file(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite3"
    cache = EmbeddingCache(path)
    cache.put_many("m", [("a", vec(1)), ("b", vec(2))], scope="s")
    first = cache.get_kept("m", ["a", "b", "c"], scope="s")
    assert same(first, cache.get_many("m", ["a", "b", "c"], scope="s"))
    assert set(cache._kept) == {("s", "m", "a"), ("s", "m", "b")}  # only what was found
    again = cache.get_kept("m", ["a", "b", "c"], scope="s")
    assert same(again, first) and again["a"] is first["a"]  # from the kept vectors
    # Another scope or model is another key.
    assert cache.get_kept("m", ["a"], scope="t") == {} and cache.get_kept("n", ["a"], scope="s") == {}
    # A text this connection writes later is found (misses are not kept) ...
    cache.put_many("m", [("c", vec(3))], scope="s")
    assert np.array_equal(cache.get_kept("m", ["c"], scope="s")["c"], vec(3))
    # ... and a vector it rewrites is read anew.
    cache.put_many("m", [("a", vec(9))], scope="s")
    assert np.array_equal(cache.get_kept("m", ["a"], scope="s")["a"], vec(9))
    cache.drop_scope("s")
    assert cache.get_kept("m", ["a", "b", "c"], scope="s") == {}
    cache.close()


def test_another_connections_writes_empty_the_kept_vectors(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite3"
    cache = EmbeddingCache(path)
    cache.put_many("m", [("a", vec(1)), ("b", vec(2))], scope="s")
    assert set(cache.get_kept("m", ["a", "b"], scope="s")) == {"a", "b"}
    other = EmbeddingCache(path)  # another connection: another process would be the same
    other.put_many("m", [("a", vec(7))], scope="s")
    got = cache.get_kept("m", ["a", "b"], scope="s")
    assert np.array_equal(got["a"], vec(7)) and np.array_equal(got["b"], vec(2))
    other.drop_scope("s")
    assert cache.get_kept("m", ["a", "b"], scope="s") == {}
    other.close()
    cache.close()


def test_kept_vectors_are_bounded_least_recently_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_mod, "KEPT_VECTORS", 3)
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    cache.put_many("m", [(k, vec(i)) for i, k in enumerate("abcde")], scope="s")
    cache.get_kept("m", ["a", "b", "c"], scope="s")
    cache.get_kept("m", ["a"], scope="s")  # a used again: b is now the oldest
    got = cache.get_kept("m", ["d"], scope="s")
    assert set(got) == {"d"} and [k[2] for k in cache._kept] == ["c", "a", "d"]
    full = cache.get_kept("m", list("abcde"), scope="s")
    assert same(full, cache.get_many("m", list("abcde"), scope="s")) and len(cache._kept) == 3
    cache.close()


def test_cached_documents_reads_the_kept_vectors(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    emb = CachedEmbedder(HashingEmbedder(), cache, scope="idx")
    made = emb.embed_documents(["one text", "another text"])
    read = emb.cached_documents(["another text", "never embedded", "one text", "another text"])
    assert read[1] is None
    first, second, third = read[0], read[2], read[3]
    assert first is not None and second is not None and third is not None
    assert (
        np.array_equal(first, made[1]) and np.array_equal(second, made[0]) and np.array_equal(third, made[1])
    )
    again = emb.cached_documents(["one text"])
    assert again[0] is read[2]  # kept, not decoded again
    assert emb.scoped("other").cached_documents(["one text"]) == [None]
    cache.close()
