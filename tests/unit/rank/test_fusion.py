"""Fusion: RRF, min-max and z-score, with weights and the edge cases of docs/ranking.md#fusion."""

from __future__ import annotations

import pytest

from evidence.errors import RequestValidationError
from evidence.rank.fusion import FusionConfig, FusionMethod, fuse
from evidence.records import Chunk, ChunkKind, SearchHit


def hit(cid: str, score: float) -> SearchHit:
    return SearchHit(
        chunk=Chunk(
            chunk_id=cid,
            document_id=cid,
            kind=ChunkKind.PASSAGE,
            text=cid,
            char_start=0,
            char_end=len(cid),
            sequence=0,
        ),
        score=score,
    )


LEX = [hit("a", 9.0), hit("b", 5.0), hit("c", 1.0)]
DENSE = [hit("c", 0.9), hit("a", 0.8), hit("d", 0.1)]


def test_rrf_scores_and_order() -> None:
    out = fuse({"lexical": LEX, "dense": DENSE}, FusionConfig(FusionMethod.RRF, rank_constant=60))
    scores = {c.chunk_id: c.score for c in out}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert [c.chunk_id for c in out] == ["a", "c", "b", "d"]
    assert out[0].scores["lexical"] == 9.0 and out[0].scores["dense"] == 0.8


def test_minmax_weighted_mean() -> None:
    out = fuse({"lexical": LEX, "dense": DENSE}, FusionConfig(FusionMethod.MINMAX))
    scores = {c.chunk_id: c.score for c in out}
    assert scores["a"] == pytest.approx((1.0 + 0.875) / 2)
    assert scores["d"] == pytest.approx(0.0)  # the dense minimum; absent from lexical
    assert scores["b"] == pytest.approx(0.5 / 2)


def test_weights_shift_the_balance() -> None:
    cfg = FusionConfig(FusionMethod.MINMAX, weights={"lexical": 0.0, "dense": 1.0})
    assert [c.chunk_id for c in fuse({"lexical": LEX, "dense": DENSE}, cfg)][:2] == ["c", "a"]


def test_zscore_missing_leg_gets_floor() -> None:
    out = fuse({"lexical": LEX, "dense": DENSE}, FusionConfig(FusionMethod.ZSCORE))
    assert {c.chunk_id for c in out} == {"a", "b", "c", "d"}
    assert out[0].chunk_id in {"a", "c"}


@pytest.mark.parametrize("method", list(FusionMethod))
def test_edge_cases(method: FusionMethod) -> None:
    cfg = FusionConfig(method)
    assert fuse({}, cfg) == []
    assert fuse({"lexical": [], "dense": []}, cfg) == []
    flat = [hit("x", 2.0), hit("y", 2.0)]
    out = fuse({"lexical": flat}, cfg)  # zero variance → equal scores, ties by chunk id
    assert [c.chunk_id for c in out] == ["x", "y"]
    if method is not FusionMethod.RRF:  # RRF is rank-based: tied inputs still get ranks 1 and 2
        assert out[0].score == out[1].score


def test_invalid_config_names_the_field() -> None:
    with pytest.raises(RequestValidationError) as err:
        FusionConfig(weights={"lexical": -1.0, "dense": 1.0})
    assert err.value.field == "weights"
    with pytest.raises(RequestValidationError, match="valid: rrf, minmax, zscore"):
        FusionMethod.parse("borda")


def test_zscore_exact_values_and_floors() -> None:
    """The default first stage's arithmetic, value by value: each leg is centred AND scaled by
    its own standard deviation, and a chunk a leg missed gets that leg's minimum z-score, not 0.
    Dropping the division, or flooring a missing leg at 0, changes these numbers."""
    from statistics import fmean, pstdev

    def z(scores: list[float]) -> list[float]:
        m, sd = fmean(scores), pstdev(scores)
        return [(s - m) / sd for s in scores]

    lz, dz = z([9.0, 5.0, 1.0]), z([0.9, 0.8, 0.1])  # LEX a, b, c; DENSE c, a, d
    expected = {
        "a": (lz[0] + dz[1]) / 2,
        "b": (lz[1] + min(dz)) / 2,  # missing from dense: the dense floor
        "c": (lz[2] + dz[0]) / 2,
        "d": (min(lz) + dz[2]) / 2,  # missing from lexical: the lexical floor
    }
    out = fuse({"lexical": LEX, "dense": DENSE}, FusionConfig(FusionMethod.ZSCORE))
    assert {c.chunk_id: c.score for c in out} == pytest.approx(expected)
    assert [c.chunk_id for c in out] == sorted(expected, key=lambda k: -expected[k])
    # Scale matters: a leg with a 1000x spread must not outvote the other by 1000x.
    scaled = [hit(h.chunk.chunk_id, h.score * 1000) for h in LEX]
    again = fuse({"lexical": scaled, "dense": DENSE}, FusionConfig(FusionMethod.ZSCORE))
    assert {c.chunk_id: c.score for c in again} == pytest.approx(expected)
