"""bench/qa/recall_gaps.py and bench/qa/scope_variants.py: the classes of a verbatim answer that is
nowhere in the evidence, and the `whole_name` variant's rule (docs/verbatim.md, "Answers nowhere in
the evidence")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.benchkit import load_bench

gaps: Any = load_bench("qa/recall_gaps.py", "qa_recall_gaps")
variants: Any = load_bench("qa/scope_variants.py", "qa_scope_variants")


@dataclass(frozen=True)
class _Span:
    text: str
    document_id: str


def _cls(**kw: Any) -> str:
    base: dict[str, Any] = {
        "path": "HYBRID_FACTSPAN",
        "in_scope": [4],
        "answer_elsewhere": False,
        "across_in_scope": False,
        "hybrid_in_bounds": False,
        "candidates": {1, 4},
        "lexical_head": {1, 4},
    }
    return str(gaps.gap_class(**{**base, **kw}))


def test_an_answer_outside_the_scope_is_the_scopes_loss() -> None:
    assert _cls(in_scope=[], answer_elsewhere=True) == "scope"
    assert _cls(in_scope=[], answer_elsewhere=False) == "not_parsed"
    assert _cls(in_scope=[], across_in_scope=True) == "across_spans"


def test_an_answer_in_the_scope_is_placed_by_what_lost_it() -> None:
    assert _cls(path="NO_RESULT") == "refused"
    assert _cls(path="SECTION_EXACT", hybrid_in_bounds=True) == "rule_path"
    # a rule path whose fill would not have brought it either is ranked like the safety net
    assert _cls(path="SECTION_EXACT", hybrid_in_bounds=False) == "below_budget"
    assert _cls(candidates={1}) == "not_candidate"
    assert _cls(lexical_head={1}) == "below_top_n"
    assert _cls() == "below_budget"


def test_across_reads_runs_of_one_document_only() -> None:
    spans = [_Span("The name may hold", "a"), _Span("letters and digits.", "a"), _Span("x", "b")]
    wanted = [gaps.squash("may hold letters and digits")]
    assert gaps.across(spans, wanted)
    split = [_Span("The name may hold", "a"), _Span("letters and digits.", "b")]
    assert not gaps.across(split, wanted)
    assert gaps.holds("The  name\nmay hold", [gaps.squash("name may")])
    assert gaps.run_start(spans, wanted) is spans[0] and gaps.run_start(split, wanted) is None


def test_misses_reads_a_cut_answer_with_the_gap_reading() -> None:
    """bench/qa/misses.py classifies with recall_gaps' readings (`holds`, `run_start`), not a
    copy of them: the run that holds a cut answer is found by the same code in both."""
    misses: Any = load_bench("qa/misses.py", "qa_misses")
    spans = [_Span("x", "b"), _Span("The name may hold", "a"), _Span("letters and digits.", "a")]
    answers = ["may  hold letters and digits"]
    assert misses.classify(answers, spans, []) == ("across_spans", spans[1])
    assert misses.classify(["The name"], spans, []) == ("ranked_out", spans[1])
    assert misses.classify(["digits. More"], spans, ["letters and digits. More"]) == ("passage_only", None)
    assert misses.run_start.__module__ == misses.holds.__module__ == "recall_gaps"


@pytest.mark.parametrize(
    ("question", "names", "dropped"),
    [
        # one word of a page's longer title is what is asked
        ("How do I represent a C union?", ["arrays unions enums"], []),
        ("How do I represent a C union?", ["arrays unions enums", "union"], []),
        # the whole name given: a name, dropped
        ("Can you take Lipitor while pregnant?", ["lipitor", "atorvastatin"], ["lipitor"]),
        ("Is size and alignment computed for me?", ["size and alignment"], ["size and alignment"]),
    ],
)
def test_whole_name_drops_only_names_given_whole(question: str, names: list[str], dropped: list[str]) -> None:
    assert variants.whole_names(question, names) == dropped


def test_cascade_runs_keeps_each_runs_state_once_and_puts_the_path_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One recorder of the cascade's runs (`recall_gaps.cascade_runs`) for this script and
    bench/span_rank_fit.py, which each patched `CascadePaths.run_path` themselves."""
    from evidence.verbatim.cascade_paths import CascadePaths

    calls: list[tuple[object, str]] = []

    def stub(self: object, path: str) -> tuple[list[Any], str]:
        calls.append((self, path))
        return [], path

    monkeypatch.setattr(CascadePaths, "run_path", stub)
    a, b = object(), object()
    with gaps.cascade_runs() as runs:
        for state, path in ((a, "SECTION_EXACT"), (a, "HYBRID_FACTSPAN"), (b, "SECTION_EXACT")):
            assert CascadePaths.run_path(state, path) == ([], path)  # type: ignore[arg-type]
    assert runs == [a, b] and len(calls) == 3
    assert CascadePaths.run_path is stub
    with pytest.raises(RuntimeError), gaps.cascade_runs():
        raise RuntimeError
    assert CascadePaths.run_path is stub
    fit: Any = load_bench("span_rank_fit.py", "span_rank_fit")
    assert fit.cascade_runs.__module__ == "recall_gaps"


@dataclass(frozen=True)
class _Cite:
    section: str | None


@dataclass(frozen=True)
class _Hit:
    text: str
    document_id: str
    citation: _Cite


@dataclass(frozen=True)
class _Telemetry:
    path_used: str


@dataclass(frozen=True)
class _Resp:
    hits: list[_Hit]
    telemetry: _Telemetry


def test_a_late_answer_says_which_hit_holds_it_and_what_is_ahead() -> None:
    """An answer in the evidence but past character 600 is a `late` row (not one of the classes):
    the hit that first holds it, where it starts as the eval reads the evidence, and the hits of
    its document and section ahead of it."""
    filler = "x " * 200  # 400 characters a hit
    hits = [
        _Hit(filler, "a", _Cite("Dosage")),
        _Hit(filler, "b", _Cite("Dosage")),
        _Hit("Take  it twice\na day.", "a", _Cite("Dosage")),
    ]
    resp = _Resp(hits, _Telemetry("HYBRID_FACTSPAN"))
    row = gaps.late_row({"answers": ["Take it twice a day"]}, resp)
    assert row["class"] == "late" and row["path"] == "HYBRID_FACTSPAN"
    assert row["hit"] == 3 and row["hits"] == 3
    assert row["offset"] == len(gaps.squash("\n".join(h.text for h in hits[:2]))) + 1
    assert row["same_document_ahead"] == 1 and row["same_section_ahead"] == 1
    # only two hits read together hold it: no hit, the offset still
    split = _Resp([_Hit(filler, "a", _Cite(None)), _Hit("twice", "a", _Cite(None))], _Telemetry("X"))
    cut = gaps.late_row({"answers": ["x twice"]}, split)
    assert cut["hit"] is None and cut["offset"] is not None and "same_section_ahead" not in cut
