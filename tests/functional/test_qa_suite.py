"""`evidence eval --qa DIR`: the QA suite's families, its metrics and leave-one-family-out tuning.

A tiny suite is written in each test (two families, a few questions); the service embeds with
`HashingEmbedder`, so these tests are about the bookkeeping, not about ranking quality."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from evidence.cli import common, main
from evidence.errors import RequestValidationError
from evidence.evaluation import (
    QaOutcome,
    find_qa_families,
    leave_one_family_out,
    qa_metrics,
    refuse_below,
    run_qa_suite,
    tune_refusal_threshold,
)
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder

MANUAL = """# Widget manual

## Storage

Keep the widget dry. The widget must be stored between 5 and 30 degrees Celsius.

## Cleaning

Wipe the casing with a damp cloth once a week.
"""

TERMS = """WIDGET TERMS OF SERVICE

1. Warranty. The warranty lasts twenty-four months from the date of purchase.

2. Termination. Either party may end these terms with thirty days written notice.
"""


def _write_family(root: Path, name: str, doc: str, text: str, questions: Sequence[dict[str, object]]) -> None:
    (root / name / "documents").mkdir(parents=True)
    (root / name / "documents" / doc).write_text(text, encoding="utf-8")
    lines = [json.dumps({"document": doc if q["answers"] else None, **q}) for q in questions]
    (root / name / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "qa"
    _write_family(
        root,
        "manual",
        "widget.md",
        MANUAL,
        [
            {
                "question": "At what temperature should the widget be stored?",
                "answers": ["between 5 and 30 degrees Celsius"],
                "mode": "ATTRIBUTE",
            },
            {"question": "How often do I clean the casing?", "answers": ["once a week"], "mode": "ATTRIBUTE"},
            {"question": "What is the widget's battery capacity?", "answers": [], "mode": "NO_RESULT"},
        ],
    )
    _write_family(
        root,
        "terms",
        "terms.txt",
        TERMS,
        [
            {"question": "How long is the warranty?", "answers": ["twenty-four months"], "mode": "ATTRIBUTE"},
            {
                "question": "How much notice to terminate?",
                "answers": ["thirty days written notice"],
                "mode": "ATTRIBUTE",
            },
            {"question": "Which court has jurisdiction?", "answers": [], "mode": "NO_RESULT"},
        ],
    )
    (root / "README.md").write_text("not a family\n")
    (root / "notes").mkdir()  # a folder without questions is not a family either
    return root


def _outcome(
    family: str, answerable: bool, *, refused: bool = False, confidence: float = 0.5, rank: int | None = None
) -> QaOutcome:
    found = answerable and rank is not None and not refused
    return QaOutcome(
        family=family,
        question=f"q {family} {confidence}",
        answers=("x",) if answerable else (),
        mode=None,
        document="d.txt" if answerable else None,
        profile="verbatim",
        path_used="NO_RESULT" if refused else "BM25_FACTSPAN",
        refused=refused,
        can_answer=not refused,
        confidence=confidence,
        features={},
        first_rank=rank if found else None,
        found_600=found,
        found_2000=found,
        evidence_chars=0 if refused else 300,
        hits=0 if refused else 2,
        right_document_first=None if refused or not answerable else True,
        latency_ms=10.0,
    )


# --- metrics ------------------------------------------------------------------------------------


def test_no_result_precision_and_recall() -> None:
    outcomes = [
        _outcome("a", True, rank=1),
        _outcome("a", True, refused=True),  # a false refusal
        _outcome("a", False, refused=True),  # a right refusal
        _outcome("a", False),  # an unanswerable question answered
    ]
    m = qa_metrics(outcomes)
    assert (m["no_result_precision"], m["no_result_recall"], m["false_refusals"]) == (0.5, 0.5, 0.5)
    assert m["answer_recall_600"] == 0.5 and m["answer_in_evidence"] == 0.5
    assert m["paths"] == {"BM25_FACTSPAN": 2, "NO_RESULT": 2}


def test_no_result_metrics_without_unanswerable_questions_or_refusals() -> None:
    m = qa_metrics([_outcome("a", True, rank=1), _outcome("a", True, rank=3)])
    assert m["unanswerable"] == 0
    assert m["no_result_recall"] is None  # nothing to refuse: undefined, not a perfect score
    assert m["no_result_precision"] is None  # nothing refused
    assert m["false_refusals"] == 0.0
    assert m["first_answer_rank"] == {"mean": 2.0, "median": 2.0}


def test_no_result_metrics_when_everything_is_refused() -> None:
    m = qa_metrics(
        [
            _outcome("a", True, refused=True),
            _outcome("a", False, refused=True),
            _outcome("a", False, refused=True),
        ]
    )
    assert m["no_result_recall"] == 1.0
    assert m["no_result_precision"] == pytest.approx(0.6667)
    assert m["false_refusals"] == 1.0 and m["answer_recall_600"] == 0.0
    assert m["first_answer_rank"] == {"mean": None, "median": None}
    assert m["evidence_chars"]["max"] == 0


def test_metrics_of_nothing_are_empty_not_errors() -> None:
    m = qa_metrics([])
    assert m["questions"] == 0 and m["answer_recall_600"] is None and m["no_result_precision"] is None


# --- leave-one-family-out -------------------------------------------------------------------------


def test_threshold_is_tuned_on_the_other_families_and_measured_on_the_held_out_one() -> None:
    # Family a: unanswerable questions score below 0.3, answerable ones above.
    a = [
        _outcome("a", True, confidence=0.8, rank=1),
        _outcome("a", True, confidence=0.6, rank=1),
        _outcome("a", False, confidence=0.2),
    ]
    # Family b: the same rule holds at 0.5, but its answerable questions sit lower.
    b = [
        _outcome("b", True, confidence=0.45, rank=1),
        _outcome("b", False, confidence=0.4),
        _outcome("b", True, confidence=0.9, rank=2),
    ]
    assert tune_refusal_threshold(a) == pytest.approx(0.4)  # halfway between 0.2 and 0.6: catches 0.2
    report = leave_one_family_out(
        a + b, tune_refusal_threshold, lambda o, t: refuse_below(o, t, lambda x: x.confidence)
    )
    # Held out a: tuned on b, halfway between 0.4 (refuse) and 0.45 (answer): a's 0.2 is refused.
    assert report["families"]["a"]["parameter"] == pytest.approx(0.425)
    assert (
        report["families"]["a"]["no_result_recall"] == 1.0
        and report["families"]["a"]["false_refusals"] == 0.0
    )
    # Held out b: tuned on a (threshold 0.4), so b's 0.4 is not refused: the honest held-out miss.
    assert report["families"]["b"]["no_result_recall"] == 0.0
    assert report["held_out"]["unanswerable"] == 2 and report["held_out"]["no_result_recall"] == 0.5


def test_tuning_respects_the_false_refusal_budget() -> None:
    # Unanswerable questions score above the answerable one: no threshold is allowed to catch them.
    train = [_outcome("a", True, confidence=0.1, rank=1), _outcome("a", False, confidence=0.9)]
    assert tune_refusal_threshold(train) == 0.0
    assert tune_refusal_threshold(train, max_false_refusals=1.0) > 0.9


def test_a_withheld_answer_is_not_found() -> None:
    o = refuse_below(_outcome("a", True, confidence=0.1, rank=1), 0.5, lambda x: x.confidence)
    assert o.refused and not o.found_600 and o.evidence_chars == 0 and o.first_rank is None


def test_leave_one_family_out_needs_two_families() -> None:
    with pytest.raises(RequestValidationError, match="two families"):
        leave_one_family_out([_outcome("a", True)], lambda t: 0.0, lambda o, t: o)


# --- the suite on a real (tiny) index ---------------------------------------------------------------


def test_suite_indexes_each_family_once_and_reports_per_family(suite: Path, service: EvidenceService) -> None:
    result = run_qa_suite(service, suite, profile="verbatim")
    assert set(result["families"]) == {"manual", "terms"}
    assert result["evidence_chars"] == [600, 2000]
    for name, fam in result["families"].items():
        assert (fam["questions"], fam["answerable"], fam["unanswerable"]) == (3, 2, 1), name
        assert sum(fam["paths"].values()) == 3 and fam["index_seconds"] > 0
        assert fam["answer_recall_600"] <= fam["answer_recall_2000"] <= fam["answer_in_evidence"]
    overall = result["overall"]
    assert overall["questions"] == 6 and overall["answerable"] == 4
    found = round(overall["answer_recall_600"] * 4)
    misses = [
        m
        for m in result["misses"]
        if m["question"] not in {"What is the widget's battery capacity?", "Which court has jurisdiction?"}
    ]
    assert len(misses) == 4 - found  # every answerable miss is listed, nothing else
    assert {i.name for i in service.list_indexes()} >= {"qa-manual", "qa-terms"}

    # Unchanged families are not re-indexed; a changed document re-indexes only its family.
    again = run_qa_suite(service, suite, profile="verbatim")
    assert {n: f["index_seconds"] for n, f in again["families"].items()} == {"manual": 0.0, "terms": 0.0}
    assert again["overall"] == {**result["overall"], "latency_ms": again["overall"]["latency_ms"]}
    (suite / "terms" / "documents" / "terms.txt").write_text(TERMS.replace("twenty-four", "thirty-six"))
    changed = run_qa_suite(service, suite, profile="verbatim", families=["terms"])
    assert set(changed["families"]) == {"terms"} and changed["families"]["terms"]["index_seconds"] > 0
    assert changed["families"]["terms"]["answer_recall_2000"] <= 0.5  # the warranty answer is gone


def test_families_are_found_and_restricted(suite: Path) -> None:
    assert [f.name for f in find_qa_families(suite)] == ["manual", "terms"]
    assert [f.name for f in find_qa_families(suite, ["terms"])] == ["terms"]
    with pytest.raises(RequestValidationError, match="unknown QA family nope; known: manual, terms"):
        find_qa_families(suite, ["nope"])
    with pytest.raises(RequestValidationError, match="holds no QA family"):
        find_qa_families(suite / "notes")


def test_unknown_profile_fails_before_indexing(suite: Path, service: EvidenceService) -> None:
    with pytest.raises(RequestValidationError, match="unknown profile"):
        run_qa_suite(service, suite, profile="nope")
    assert not [i for i in service.list_indexes() if i.name.startswith("qa-")]


# --- the command --------------------------------------------------------------------------------------


@pytest.fixture
def fast_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    def service(args: argparse.Namespace) -> EvidenceService:
        return EvidenceService(common.settings_from_args(args), embedder=HashingEmbedder())

    monkeypatch.setattr(common, "service_from_args", service)


def test_eval_qa_dir_command(
    suite: Path, tmp_path: Path, fast_cli: None, capsys: pytest.CaptureFixture[str]
) -> None:
    s = str(tmp_path / "store")
    assert (
        main(
            [
                "eval",
                "--qa",
                str(suite),
                "--families",
                "terms",
                "--profile",
                "default",
                "--store",
                s,
                "--json",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.strip().splitlines()
    result = json.loads(out[-1])
    assert result["profile"] == "default" and set(result["families"]) == {"terms"}
    assert result["overall"]["questions"] == 3

    assert main(["eval", "--qa", str(suite), "--store", s]) == 0
    text = capsys.readouterr().out
    assert "manual" in text and "terms" in text and "overall" in text and "paths overall:" in text

    assert main(["eval", "--qa", str(suite), "--families", "nope", "--store", s]) == 2
    assert "unknown QA family nope" in capsys.readouterr().err
    assert main(["eval", "--qa", str(suite), "--index", "x", "--store", s]) == 2
    assert "drop --index" in capsys.readouterr().err
    qa_file = suite / "terms" / "questions.jsonl"
    assert main(["eval", "--qa", str(qa_file), "--families", "terms", "--store", s]) == 2
    assert "--families needs --qa DIR" in capsys.readouterr().err


def test_first_answer_rank_counts_the_hits_the_evidence_needs() -> None:
    from evidence.evaluation.suite import _first_answering_rank

    assert _first_answering_rank(["nothing", "the warranty lasts", "two years"], ["lasts two years"]) == 3
    assert _first_answering_rank(["a", "twenty-four  months"], ["twenty-four months"]) == 2
    assert _first_answering_rank(["a", "b"], ["c"]) is None
