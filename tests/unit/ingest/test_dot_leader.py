"""`layout.dot_leader`: the contents-line shape the plain-text parser and the span extractor share."""

from __future__ import annotations

import re

import pytest

from evidence.ingest.parsers.layout import dot_leader


@pytest.mark.parametrize(
    "line",
    ["4.1.2.  Semantics . . . . 10", "Scope ....4", "Preface ..... iv", "Index . . . . 212  "],
)
def test_a_contents_line_matches(line: str) -> None:
    assert dot_leader(3, r"[\divxlc]{1,5}", re.IGNORECASE).search(line)


@pytest.mark.parametrize(
    "line",
    [
        "The value is 3.14",  # a decimal, not a leader
        "Wait... 10",  # too few dots for the bound
        "Scope .... page four",  # no page number at the end
        "Preface ..... iv",  # roman pages: not in this bound (spans._CONTENTS_LINE adds them apart)
    ],
)
def test_the_extractors_bounds_refuse(line: str) -> None:
    assert not dot_leader(4, r"\d{1,4}").search(line)


def test_a_run_of_dots_is_matched_from_its_first_dot() -> None:
    m = dot_leader(3, r"\d+").search("Title" + " ." * 5 + " 7")
    assert m is not None and m.start() == len("Title ")
