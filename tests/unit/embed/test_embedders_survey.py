"""bench/embedders_survey.py: the USE backend's truncation (BOS, the first pieces, EOS; the text cut at
a space before tokenizing) and the fusion of two runs (docs/ranking.md#local-embedders-surveyed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.benchkit import load_bench

survey: Any = load_bench("embedders_survey.py", "embedders_survey")


def test_cut_ids_keeps_the_last_id_and_no_cut_at_zero() -> None:
    ids = [1, 10, 11, 12, 13, 2]
    assert survey.cut_ids(ids, 4) == [1, 10, 11, 2]
    assert survey.cut_ids(ids, 6) == ids
    assert survey.cut_ids(ids, 0) == ids


def test_cut_at_space_keeps_whole_words() -> None:
    assert survey.cut_at_space("alpha beta gamma", 12) == "alpha beta"
    assert survey.cut_at_space("alpha beta gamma", 10) == "alpha beta"
    assert survey.cut_at_space("short", 12) == "short"
    assert survey.cut_at_space("unbroken", 4) == "unbr"


def _scores(*rows: list[float]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32)


def test_rrf_adds_reciprocal_ranks() -> None:
    a = _scores([0.9, 0.5, 0.1])
    b = _scores([0.2, 0.8, 0.1])
    fused = survey.fuse(a, b, "rrf")
    k = survey.RRF_K
    assert fused[0, 0] == pytest.approx(1 / (k + 1) + 1 / (k + 2))
    assert fused[0, 2] == pytest.approx(2 / (k + 3))
    assert fused[0, 0] == pytest.approx(fused[0, 1])  # first and second swapped: equal


def test_z_fusion_ignores_a_models_scale_and_the_cosine_sum_does_not() -> None:
    a = _scores([0.30, 0.32, 0.10])  # a model with a narrow cosine range
    b = _scores([0.9, 0.1, 0.5])
    assert np.argmax(survey.fuse(a, b, "sum")[0]) == 0
    z = survey.fuse(a, b, "z")
    z10 = survey.fuse(a * 10, b, "z")
    assert np.allclose(z, z10)
    assert not np.allclose(survey.fuse(a, b, "sum"), survey.fuse(a * 10, b, "sum"))
    with pytest.raises(ValueError):
        survey.fuse(a, b, "max")


def _run(tmp_path: Path, name: str, docs: list[list[float]], doc_ids: list[str]) -> Path:
    path = tmp_path / f"{name}.npz"
    survey.save_vectors(
        path,
        name,
        doc_ids=doc_ids,
        docs=survey._unit(np.asarray(docs, dtype=np.float32)),
        query_ids=["q1"],
        qvecs=np.asarray([[1.0, 0.0]], dtype=np.float32),
    )
    return path


def test_fuse_runs_scores_each_run_alone_and_fused(tmp_path: Path) -> None:
    ids = ["d1", "d2", "d3"]
    qrels = {"q1": {"d2": 1}}
    left = _run(tmp_path, "left", [[1, 0], [0.8, 0.6], [0, 1]], ids)  # d2 second
    right = _run(tmp_path, "right", [[0, 1], [1, 0], [0.6, 0.8]], ids)  # d2 first
    out = survey.fuse_runs([left, right], qrels)
    assert out["alone:left"]["ndcg@10"] == pytest.approx(round(1 / np.log2(3), 4))
    assert out["alone:right"]["ndcg@10"] == 1.0
    assert out["fused:sum"]["ndcg@10"] == 1.0  # d2: 0.8 + 1.0 beats d1: 1.0 + 0.0
    assert set(out) >= {"fused:rrf", "fused:z"}
    other = _run(tmp_path, "other", [[1, 0], [0.8, 0.6], [0, 1]], ["d1", "d2", "d4"])
    with pytest.raises(SystemExit):
        survey.fuse_runs([left, other], qrels)
