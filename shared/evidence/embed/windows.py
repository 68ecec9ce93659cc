"""Windows over a text longer than the embedder reads at once, and how their vectors make one.

MiniLM reads at most 256 word pieces (254 of text between [CLS] and [SEP]); a passage or record
longer than that can be cut into windows of that width, each embedded alone, with the record's
vector the re-normalised mean of its windows' unit vectors, each weighted by its word pieces
(`LongTextRule.MEAN`). One vector per record keeps the stores (SQLite, the ANN index,
OpenSearch's knn field) unchanged. The rules were measured on SciFact (`bench/long_records.py`,
docs/scale.md#long-records): reading every window lifts the dense leg but not the hybrid, so
truncation (`LongTextRule.FIRST`) stays the default.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evidence.config import LongTextRule
from evidence.embed.base import Matrix

__all__ = ["LongTextRule", "mean_of_windows", "split_windows"]


def split_windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges `[start, end)` covering `0..n`, each at most `size` long.

    One range when `n <= size`. Otherwise a window starts every `size - overlap` tokens and the
    last one is the short tail that is left: no token is read more often than the overlap asks
    (indexing cost grows with the text, not with the window count). The tail's weight in the
    mean is its share of the word pieces (`mean_of_windows(weights=...)`).
    """
    if size < 1:
        raise ValueError(f"window size must be >= 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be in [0, {size}), got {overlap}")
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        out.append((start, min(start + size, n)))
        if start + size >= n:
            return out
        start += size - overlap


def mean_of_windows(
    vectors: Matrix, owners: Sequence[int], n: int, *, weights: Sequence[float] | None = None
) -> Matrix:
    """(n, dim): row i is the re-normalised (weighted) mean of the unit rows of `vectors` owned
    by text i.

    `owners[j]` is the text window j belongs to; every text owns at least one window.
    """
    dim = vectors.shape[1]
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    if weights is not None:
        unit = unit * np.asarray(weights, dtype=np.float32)[:, None]
    sums = np.zeros((n, dim), dtype=np.float64)
    np.add.at(sums, np.asarray(owners, dtype=np.int64), unit.astype(np.float64))
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    out: Matrix = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    return out
