"""pytrec_eval semantics for nDCG@10, recall@100 and MRR@10; span metrics; dataset loading."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evidence.errors import RequestValidationError
from evidence.evaluation import (
    documents_from_chunks,
    find_dataset,
    load_qrels,
    mrr_at,
    ndcg_at,
    percentile,
    recall_at,
    span_metrics,
)


def test_ndcg_graded_log2() -> None:
    rels = {"a": 2, "b": 1}
    dcg = 1 / math.log2(3) + 2 / math.log2(4)  # b at rank 2, a at rank 3
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at(["x", "b", "a"], rels, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at(["a", "b"], rels, 10) == pytest.approx(1.0)
    assert ndcg_at([], rels, 10) == 0.0
    assert ndcg_at(["a"], {}, 10) == 0.0


def test_recall_and_mrr() -> None:
    rels = {"a": 1, "b": 1, "z": 0}
    assert recall_at(["a", "x"], rels, 100) == 0.5
    assert mrr_at(["x", "y", "b"], rels, 10) == pytest.approx(1 / 3)
    assert mrr_at(["x"] * 10 + ["a"], rels, 10) == 0.0


def test_chunks_to_documents_keeps_best_position() -> None:
    assert documents_from_chunks(["d1", "d2", "d1", "d3"]) == ["d1", "d2", "d3"]


def test_percentile() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 95) == 5.0
    assert percentile([], 50) == 0.0


def test_span_metrics_half_overlap_rules() -> None:
    gold = [("d", 0, 100)]
    assert span_metrics([("d", 40, 100)], gold, 5) == (1.0, 1.0)  # covers 60% of gold
    assert span_metrics([("d", 60, 100)], gold, 5) == (0.0, 1.0)  # 40% of gold, all of span
    assert span_metrics([("e", 0, 100)], gold, 5) == (0.0, 0.0)  # other document
    assert span_metrics([], gold, 5) == (0.0, 0.0)


def test_qrels_crlf_and_header(tmp_path: Path) -> None:
    p = tmp_path / "qrels-test.tsv"
    p.write_bytes(b"query-id\tcorpus-id\tscore\r\n1\tA\t1\r\n1\tB\t2\r\n")
    assert load_qrels(p) == {"1": {"A": 1, "B": 2}}


def test_missing_dataset_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text("")
    with pytest.raises(RequestValidationError, match=r"queries\.jsonl"):
        find_dataset(tmp_path)
