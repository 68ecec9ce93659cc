"""Cosine similarity and maximal marginal relevance: the one implementation every caller uses.

The ranking stage, the coach's LO ordering and the coach's bullet selection all diversify with
MMR, but over different things and with different policies (what counts as relevance, whether
redundancy starts at 0 or is unset, how ties break, which items may be picked). Those policies are
parameters here; the arithmetic is not repeated.

A zero, NaN or infinite norm has no direction: `cosine` returns None for it, `cosine_rows` gives
0.0 and `unit_rows` leaves its row at zero (a zero row is similar to nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Vector = Any  # an array-like of floats (numpy array or list)


def cosine(a: Vector | None, b: Vector | None) -> float | None:
    """The cosine of two vectors; None when either is absent or has no usable norm."""
    if a is None or b is None:
        return None
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0 or not math.isfinite(na * nb):
        return None
    return float(np.dot(a, b) / (na * nb))


def cosines(query: Vector | None, vectors: Mapping[str, Vector]) -> dict[str, float]:
    """The cosine of `query` with each vector, by key; keys without a defined cosine are left out."""
    if query is None:
        return {}
    q = np.asarray(query, dtype=np.float32)
    out: dict[str, float] = {}
    for key, vec in vectors.items():
        c = cosine(q, np.asarray(vec, dtype=np.float32))
        if c is not None:
            out[key] = c
    return out


def cosine_rows(matrix: Vector, query: Vector | None) -> np.ndarray:
    """The cosine of `query` with every row of `matrix` (an (n, dim) array), returned as float64;
    a row (or a query) without a usable norm gives 0.0, as a zero row of `unit_rows` does. One
    matrix product in float32, as the vectors are stored (`cosine` of each row agrees to ~1e-7)."""
    m = np.asarray(matrix, dtype=np.float32)
    out = np.zeros(len(m), dtype=np.float64)
    if query is None or m.size == 0:
        return out
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    nq = float(np.linalg.norm(q))
    if nq == 0 or not math.isfinite(nq):
        return out
    norms = np.linalg.norm(m, axis=1)
    ok = (norms > 0) & np.isfinite(norms)
    out[ok] = (m[ok] @ q) / (norms[ok] * nq)
    return out


def unit_rows(vectors: Sequence[Vector | None], dim: int) -> np.ndarray:
    """An (n, dim) float32 matrix of unit rows; absent, wrong-length or normless vectors stay zero."""
    mat = np.zeros((len(vectors), max(dim, 1)), dtype=np.float32)
    for i, v in enumerate(vectors):
        if v is not None and len(v) == dim:
            norm = float(np.linalg.norm(v))
            if norm > 0 and math.isfinite(norm):
                mat[i] = np.asarray(v, dtype=np.float32) / norm
    return mat


class MarginalRelevance:
    """Greedy MMR state: value = `w_rel` x relevance - `w_red` x redundancy, where redundancy is
    the maximum similarity to an already chosen item.

    `similarity_row(j)` gives the similarity of every item to item j (an n-vector). `initial`
    is the redundancy before any similarity is known: -inf means "unset" (it counts as 0 in a
    value, and a later negative similarity lowers it), 0.0 floors redundancy at 0.
    """

    def __init__(
        self,
        relevance: Sequence[float] | np.ndarray,
        similarity_row: Callable[[int], np.ndarray],
        *,
        w_rel: float,
        w_red: float,
        initial: float = -math.inf,
    ) -> None:
        self.relevance = np.asarray(relevance, dtype=np.float64)
        self._row = similarity_row
        self._w_rel = w_rel
        self._w_red = w_red
        n = len(self.relevance)
        self.redundancy = np.full(n, initial, dtype=np.float64)
        self.chosen = np.zeros(n, dtype=bool)

    def values(self) -> np.ndarray:
        """The marginal value of every item; chosen items are -inf."""
        red = np.where(np.isfinite(self.redundancy), self.redundancy, 0.0)
        value = self._w_rel * self.relevance - self._w_red * red
        value[self.chosen] = -math.inf
        return value

    def best(
        self, eligible: np.ndarray | None = None, tie_break: Callable[[int], tuple[float, ...]] | None = None
    ) -> int | None:
        """The index of the most valuable eligible unchosen item; ties go to `tie_break`'s larger
        key, then to the earlier item. None when nothing is eligible."""
        value = self.values()
        if eligible is not None:
            value[~eligible] = -math.inf
        open_ = np.flatnonzero(~self.chosen if eligible is None else (~self.chosen & eligible))
        if open_.size == 0:
            return None
        if tie_break is None:
            return int(open_[np.argmax(value[open_])])  # first maximum: the earlier item wins ties
        return int(max(open_, key=lambda i: (value[i], *tie_break(int(i)))))

    def choose(self, i: int) -> None:
        self.chosen[i] = True
        self.redundancy = np.maximum(self.redundancy, np.asarray(self._row(i), dtype=np.float64))


def mmr(
    relevance: Sequence[float] | np.ndarray,
    similarity_row: Callable[[int], np.ndarray],
    *,
    lam: float,
    k: int,
    tie_break: Callable[[int], tuple[float, ...]] | None = None,
) -> list[tuple[int, float]]:
    """The first `k` picks of greedy MMR with weight `lam` on relevance and `1 - lam` on
    redundancy: (index, marginal value at its pick), in pick order."""
    state = MarginalRelevance(relevance, similarity_row, w_rel=lam, w_red=1.0 - lam)
    picks: list[tuple[int, float]] = []
    for _ in range(min(k, len(state.relevance))):
        value = state.values()
        i = state.best(tie_break=tie_break)
        if i is None:
            break
        picks.append((i, float(value[i])))
        state.choose(i)
    return picks
