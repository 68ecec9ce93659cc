"""A passage's terms joined from its spans' terms (`store_lexical._tiled_terms`) are exactly the
terms of the passage analysed whole, whatever the layout: when the spans do not tile it with
separating gaps, it is analysed whole."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evidence.search.analysis import EnglishAnalyzer
from evidence.search.store_lexical import _tiled_terms

ANALYZER = EnglishAnalyzer()


def _spans(text: str, cuts: list[tuple[int, int]], offset: int = 0) -> list[tuple[int, int, str, list[str]]]:
    return sorted((offset + a, offset + b, text[a:b], ANALYZER.analyze(text[a:b])) for a, b in cuts)


def _tiled(text: str, spans: list[tuple[int, int, str, list[str]]], start: int = 0) -> list[str]:
    return _tiled_terms(ANALYZER, text, start, spans, [s[0] for s in spans])


def test_sentences_separated_by_spaces_are_joined_from_their_spans() -> None:
    text = "Patients' outcomes improved. The U.S. cohort grew; e.g. 3.5 mg doses."
    cut = text.index(" The") + 1
    spans = _spans(text, [(0, cut - 1), (cut, len(text))])
    calls: list[str] = []

    class Spy(EnglishAnalyzer):
        def analyze(self, text: str) -> list[str]:
            calls.append(text)
            return super().analyze(text)

    assert _tiled_terms(Spy(), text, 0, spans, [s[0] for s in spans]) == ANALYZER.analyze(text)
    assert calls == []  # no second analysis of the passage


def test_a_lone_joining_character_between_spans_falls_back_to_the_whole_text() -> None:
    text = "alpha.beta gamma"  # "alpha.beta" is one token
    spans = _spans(text, [(0, 5), (6, 16)])
    assert _tiled(text, spans) == ANALYZER.analyze(text) == ["alpha.beta", "gamma"]


def test_spans_that_straddle_overlap_or_differ_from_the_passage_text() -> None:
    doc = "One two three. Four five six. Seven eight."
    start = doc.index("two")
    passage = doc[start : doc.index("Seven") - 1]
    spans = _spans(doc, [(0, 14), (15, 29), (30, len(doc))])  # the first straddles the start
    assert _tiled(passage, spans, start) == ANALYZER.analyze(passage)
    overlapping = _spans(passage, [(0, 12), (5, 27)], start)
    assert _tiled(passage, overlapping, start) == ANALYZER.analyze(passage)
    wrong = [(start, start + 5, "other", ["other"])]
    assert _tiled(passage, wrong, start) == ANALYZER.analyze(passage)


# Final sigma, a curly apostrophe, an ideograph, joining marks, an over-long token.
_PIECES = st.sampled_from([*"ab \u03a3\u03c39.,'\u2019 \n-\u4e2ds:", "The ", "cat's ", "U.S. ", "x" * 300])


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_PIECES, min_size=1, max_size=40),
    data=st.data(),
)
def test_tiled_terms_equal_the_whole_analysis(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    bounds = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=10))))
    cuts = [(a, b) for a, b in zip(bounds[::2], bounds[1::2], strict=False) if a < b]
    assert _tiled(text, _spans(text, cuts)) == ANALYZER.analyze(text)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=40))
def test_spans_cut_at_whitespace_are_joined_and_equal_the_whole_analysis(pieces: list[str]) -> None:
    """Cut at every whitespace run, the spans tile the text: the joined path itself is checked."""
    import re

    text = "".join(pieces)
    cuts = [m.span() for m in re.finditer(r"\S+", text)]
    spans = _spans(text, cuts)
    whole = ANALYZER.analyze(text)
    assert _tiled(text, spans) == whole
    if cuts:
        assert [t for s in spans for t in s[3]] == whole  # what the joined path returns
