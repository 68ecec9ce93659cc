"""bench/qa/default_gaps.py: each `default` miss within 2,000 characters is put in the class of the
furthest stage its answer reached (bench/data/session49/dgaps21.md)."""

from __future__ import annotations

from typing import Any

from tests.benchkit import load_bench

gaps: Any = load_bench("qa/default_gaps.py", "qa_default_gaps")

_DOC = "Intro sentence here. The limit is 42 rows. Closing remark. Then more text, to the end."
_DOCS = {"d": (_DOC, [("d:p0", 0, 60), ("d:p1", 60, len(_DOC))])}
_AT = _DOC.index("limit is 42")


def _row(stages: dict[str, list[Any]], hits: list[Any], answers: tuple[str, ...] = ("limit is 42",)) -> Any:
    return {"answers": answers, "hits": hits, "stages": stages, "refused": False}


def _all(entries: list[Any]) -> dict[str, list[Any]]:
    """Every stage before focus with the same output."""
    return dict.fromkeys(gaps.STAGES, entries)


def test_a_late_answer_says_where_it_starts() -> None:
    long = "x" * 2100
    row = _row(_all([]), [("o", "o", 0, 2100, long), ("d:p0", "d", 0, 60, _DOC[:60])])
    got = gaps.classify(row, _DOCS)
    assert got["class"] == "late" and got["at"] > 2000


def test_a_cut_answer_is_first_or_later_by_its_fused_rank_and_its_distance_from_the_kept_run() -> None:
    p0 = ("d:p0", "d", 0, 60, None)
    other = ("o:p0", "o", 0, 60, None)
    kept = ("d:p0", "d", 0, 20, _DOC[:20])  # "Intro sentence here."
    assert gaps.classify(_row(_all([p0, other]), [kept]), _DOCS)["class"] == "cut_first"
    got = gaps.classify(_row(_all([other, p0]), [("o:p0", "o", 0, 5, "other"), kept]), _DOCS)
    assert got["class"] == "cut_later" and got["fused_rank"] == 2 and got["dist"] == _AT - 20


def test_an_answer_past_top_k_or_never_a_candidate() -> None:
    p0 = ("d:p0", "d", 0, 60, None)
    other = ("o:p0", "o", 0, 60, None)
    stages = _all([other])
    stages["mmr"] = [other, p0]
    got = gaps.classify(_row(stages, [("o:p0", "o", 0, 60, "other")]), _DOCS)
    assert got["class"] == "ranked_out" and got["stage_rank"] == 2
    p1 = ("d:p1", "d", 60, len(_DOC), None)  # same document, not the answering passage
    assert gaps.classify(_row(_all([p1]), []), _DOCS)["class"] == "passage_not_candidate"
    assert gaps.classify(_row(_all([other]), []), _DOCS)["class"] == "document_not_candidate"
    assert gaps.classify(_row(_all([]), [], answers=("nowhere",)), _DOCS)["class"] == "answer_not_in_text"


def test_an_answer_no_single_passage_holds_is_a_chunking_miss() -> None:
    docs = {"d": (_DOC, [("d:p0", 0, _AT + 5), ("d:p1", _AT + 5, len(_DOC))])}
    assert gaps.classify(_row(_all([]), []), docs)["class"] == "across_passages"


def test_an_answer_whose_hit_the_extra_runs_pushed_out_or_whose_run_edge_splits_it() -> None:
    p0 = ("d:p0", "d", 0, 60, None)
    other = ("o:p0", "o", 0, 60, None)
    stages = _all([other, p0])
    assert gaps.classify(_row(stages, [("o:p0", "o", 0, 5, "other")]), _DOCS)["class"] == "pushed_out"
    split = ("d:p0", "d", 0, _AT + 5, _DOC[: _AT + 5])
    assert gaps.classify(_row(stages, [split]), _DOCS)["class"] == "split_by_cut"


def test_the_table_counts_per_family_largest_class_first() -> None:
    rows = [
        {"family": "a", "class": "cut_later"},
        {"family": "b", "class": "cut_later"},
        {"family": "b", "class": "late"},
    ]
    lines = gaps.table(rows).splitlines()
    assert lines[0] == "| family | cut_later | late | misses |"
    assert lines[-1] == "| **all** | **2** | **1** | **3** |"
