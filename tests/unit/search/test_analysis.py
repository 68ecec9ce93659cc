"""OpenSearch `english` analyzer parity: tokenizer, possessives, stop words, Lucene's Porter."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence.search.analysis import (
    ENGLISH_STOP_WORDS,
    EnglishAnalyzer,
    standard_tokenize,
    with_joined_compounds,
)
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


def test_analyzer_is_configurable_and_recorded_per_index(tmp_path: Path) -> None:
    from evidence.config import Settings
    from evidence.ids import content_hash
    from evidence.records import Chunk, ChunkKind, DocumentChunks
    from evidence.search.analysis import AnalyzerConfig
    from evidence.search.factory import get_backend

    def load(backend: object, index: str) -> None:
        text = "The vendor is rotating the keys"
        chunk = Chunk(
            chunk_id="c",
            document_id="d",
            kind=ChunkKind.PASSAGE,
            text=text,
            char_start=0,
            char_end=len(text),
            sequence=0,
        )
        backend.create_index(index, embedder_id="none", dimension=0)  # type: ignore[attr-defined]
        backend.upsert(index, [DocumentChunks("d", content_hash(text), "d", (chunk,))], [None])  # type: ignore[attr-defined]

    plain = get_backend(Settings(store_dir=tmp_path, analyzer_stemming=False, analyzer_stopwords=False))
    load(plain, "plain")
    assert not plain.lexical("plain", "rotate", k=5)  # no stemming: "rotating" ≠ "rotate"
    assert plain.lexical("plain", "the", k=5)  # no stop words: "the" is a term
    plain.close()

    english = get_backend(Settings(store_dir=tmp_path))  # default analysis for *new* indexes
    load(english, "english")
    assert english.lexical("english", "rotate", k=5)
    assert not english.lexical("english", "the", k=5)
    # the old index is still queried with the analysis it was built with
    assert not english.lexical("plain", "rotate", k=5)
    assert english.lexical("plain", "the", k=5)
    assert AnalyzerConfig.from_name(AnalyzerConfig(stem=False).name) == AnalyzerConfig(stem=False)
    with pytest.raises(ValueError, match="unknown analyzer"):
        AnalyzerConfig.from_name("klingon:stop:porter")


@pytest.mark.parametrize(
    ("query", "expanded"),
    [
        ("Are non-opioid treatments as good?", "Are non-opioid treatments as good? nonopioid"),
        ("co\u2010administered with e-mail", "co\u2010administered with e-mail coadministered email"),
        # A non-breaking hyphen joins like any other; a soft hyphen is an invisible break hint in
        # a pasted word, which the query then also asks as the word it breaks.
        ("non\u2011opioid encryp\u00adtion", "non\u2011opioid encryp\u00adtion nonopioid encryption"),
        ("data-at-rest", "data-at-rest dataatrest"),
        ("größen-abhängig", "größen-abhängig größenabhängig"),
        # Numbers are no compound words: a range, a version, a name with a number.
        ("2-3 weeks of COVID-19, p53-dependent", "2-3 weeks of COVID-19, p53-dependent"),
        ("--flag -wal file", "--flag -wal file"),
        # A part is the analyser's token: letters joined by an apostrophe or a full stop stay
        # together ("don't" is one token), so no fragment ("tcare", "yz") is asked.
        ("don't-care states", "don't-care states don'tcare"),
        ("x.y-z and non-opioid's", "x.y-z and non-opioid's x.yz nonopioid's"),
        ("rock\u2019n\u2019roll-style", "rock\u2019n\u2019roll-style rock\u2019n\u2019rollstyle"),
        ("no hyphen", "no hyphen"),
    ],
)
def test_a_query_asks_its_hyphenated_compounds_joined_too(query: str, expanded: str) -> None:
    """The standard tokenizer splits "non-opioid" into "non" and "opioid", so a document that
    writes "Nonopioid" is found by neither; the query also asks the joined word."""
    assert with_joined_compounds(query) == expanded
    assert "nonopioid" in EnglishAnalyzer().analyze(with_joined_compounds("non-opioid"))


def test_joining_compounds_reads_a_long_run_once() -> None:
    """A match starts only where a run of letters starts: 200,000-character runs without a
    compound take milliseconds, where a retry from each of their characters would take minutes
    (no clock is read: a quadratic scan shows as a hung test)."""
    run = "a" * 200_000
    assert with_joined_compounds(f"{run} {run}- -{run} x-y") == f"{run} {run}- -{run} x-y xy"
    assert with_joined_compounds("-".join(["ab"] * 50_000) + "9") == "-".join(["ab"] * 50_000) + "9"
    for text in ("'".join(["ab"] * 50_000) + "-9", ".".join(["ab"] * 50_000) + "9"):
        assert with_joined_compounds(text) == text
