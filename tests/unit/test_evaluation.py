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
from evidence.service import EvidenceService


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


def test_a_changed_span_extractor_re_indexes_a_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The BEIR index's fingerprint covers the ingestion code, as the QA suite's does: rationale
    recall reads the spans, so a changed extractor must not score the spans of the old one."""
    from evidence.config import Settings
    from evidence.evaluation import beir

    for name in ("corpus.jsonl", "queries.jsonl"):
        (tmp_path / name).write_text('{"_id": "1", "text": "x"}\n')
    (tmp_path / "qrels-test.tsv").write_text("1\t1\t1\n")
    ds = find_dataset(tmp_path)
    service = EvidenceService(Settings(store_dir=tmp_path / "store"))
    before = beir._fingerprint(ds, service, False)
    assert beir._fingerprint(ds, service, False) == before
    monkeypatch.setattr(beir, "ingest_code_digest", lambda: "another extractor")
    assert beir._fingerprint(ds, service, False) != before


# --- verbatim QA ------------------------------------------------------------------------------


def _qa_service(tmp_path: Path, label: Path) -> EvidenceService:
    from evidence.config import Settings

    service = EvidenceService(Settings(store_dir=tmp_path / "store"))
    assert not service.index_paths("label", [label], embed=False).failed
    return service


def test_qa_eval_on_the_demo_label(tmp_path: Path) -> None:
    from evidence.demo import DATA
    from evidence.evaluation import run_qa
    from evidence.verbatim.cascade import REPORTED_PATHS

    service = _qa_service(tmp_path, DATA / "label" / "lipravex.md")
    result = run_qa(service, DATA / "label" / "lipravex-qa.jsonl", index="label")
    assert result["questions"] >= 60 and result["unanswerable"] >= 3
    assert result["answer_recall"] >= 0.95
    # 1 of the 5 unanswerable questions refused (3 before the refit of 2026-11-26): this test's
    # index is lexical-only, so the refusal reads the model with its cosine fixed, and the yes/no
    # questions (no expected answer type to miss) land just above the safety net's floor. The
    # refusal is fitted on bench/qa leave-one-family-out (docs/verbatim.md#honest-refusal); a floor
    # raised for one bundled question is the tuning issue 22 forbids. Never a false refusal.
    assert result["no_result_precision"] == 1.0 and result["no_result_recall"] >= 0.2
    assert (
        set(result["paths"]) <= set(REPORTED_PATHS) and sum(result["paths"].values()) == result["questions"]
    )
    assert result["latency_ms"]["p50"] > 0 and result["evidence_chars"] == 600


def test_qa_eval_on_a_label_in_another_style(tmp_path: Path) -> None:
    """A label the rules were not written against (EU SmPC headings), with its own questions."""
    from evidence.evaluation import run_qa

    data = Path(__file__).parent / "verbatim" / "data"
    service = _qa_service(tmp_path, data / "quenzaril-smpc.md")
    result = run_qa(service, data / "quenzaril-qa.jsonl", index="label")
    assert result["answer_recall"] >= 0.9 and result["no_result_precision"] == 1.0


def test_answers_count_only_in_the_first_600_characters() -> None:
    from evidence.evaluation import answer_found

    filler = "x" * 580
    assert answer_found([filler, "the  half-life\nis 19 hours"], ["the half-life"])
    assert not answer_found([filler, "the half-life is 19 hours"], ["half-life is 19 hours"])
    assert not answer_found(["anything"], [])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ('{"question": "", "answers": []}', "question"),
        ('{"question": "q", "answers": "a"}', "answers"),
        ('{"question": "q", "answers": [""]}', "answers"),
        ("[1]", "JSON object"),
    ],
)
def test_bad_qa_files_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    from evidence.evaluation import load_qa

    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "ok", "answers": []}\n' + line + "\n")
    with pytest.raises(RequestValidationError, match=message) as info:
        load_qa(path)
    assert "qa.jsonl:2" in info.value.message
