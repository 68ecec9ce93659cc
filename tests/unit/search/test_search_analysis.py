"""OpenSearch `english` analyzer parity: tokenizer, possessives, stop words, Lucene's Porter."""

from __future__ import annotations

import pytest

from evidence.search.analysis import ENGLISH_STOP_WORDS, EnglishAnalyzer, standard_tokenize
from evidence.search.porter import porter_stem


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello, world!", ["Hello", "world"]),
        ("U.S.A. economy", ["U.S.A", "economy"]),  # letters joined across '.'
        ("3.5% of 1,000,000 cells", ["3.5", "of", "1,000,000", "cells"]),  # numbers keep . and ,
        ("e-mail data-at-rest", ["e", "mail", "data", "at", "rest"]),  # hyphen splits
        ("foo_bar x:y 12:30", ["foo_bar", "x:y", "12", "30"]),  # _ joins; ':' only between letters
        ("can't won't", ["can't", "won't"]),
        ("中文字 ok", ["中", "文", "字", "ok"]),  # ideographs one by one
        ("", []),
    ],
)
def test_standard_tokenizer(text: str, tokens: list[str]) -> None:
    assert standard_tokenize(text) == tokens


def test_long_tokens_split_at_255() -> None:
    assert [len(t) for t in standard_tokenize("a" * 600)] == [255, 255, 90]


def test_english_chain() -> None:
    a = EnglishAnalyzer()
    # possessive removed, stop words dropped, Porter stems, lower case
    assert a.analyze("The Vendor's policies are RUNNING") == ["vendor", "polici", "run"]
    assert a.analyze("the and of") == []
    assert len(ENGLISH_STOP_WORDS) == 33


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        # classic Porter examples
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("cats", "cat"),
        ("feed", "feed"),
        ("agreed", "agre"),
        ("plastered", "plaster"),
        ("motoring", "motor"),
        ("sing", "sing"),
        ("conflated", "conflat"),
        ("troubled", "troubl"),
        ("sized", "size"),
        ("hopping", "hop"),
        ("falling", "fall"),
        ("hissing", "hiss"),
        ("filing", "file"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("rationalization", "ration"),
        ("adjustment", "adjust"),
        ("adoption", "adopt"),
        ("controll", "control"),
        ("generalizations", "gener"),
        # Lucene's departures from the published algorithm (not in Snowball's porter)
        ("immunology", "immunolog"),
        ("sensibly", "sensibl"),
        ("s", "s"),
        ("is", "is"),
    ],
)
def test_lucene_porter(word: str, stem: str) -> None:
    assert porter_stem(word) == stem
