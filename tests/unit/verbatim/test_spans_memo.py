"""The heading normalisations the scope scan repeats for every question are remembered
(`spans._heading_key`, `spans.span_path`'s canonical name): the same answers as computing them
afresh, each string normalised once per process (bench/data/session44/verblat16.md)."""

from __future__ import annotations

from evidence.ingest.sections import SECTION_PATH_KEY, default_vocabulary
from evidence.records import Chunk
from evidence.verbatim import spans as sp
from tests.unit.verbatim.verbatimkit import doc_span

HEADINGS = [
    "12.3 Pharmacokinetics:",
    "HOW SUPPLIED/STORAGE & HANDLING",
    "References",
    "* 3.4. The description of a package ........ 12",
    "Part II 4.3 Termination",
    "",
    "   ",
    "Scope \u00b7 \u00b7 \u00b7 4",
    "An unusual heading that names no canonical section",
    "1. " * 400,  # past _MEMO_CHARS: computed afresh, not kept
]


def test_heading_key_is_the_plain_key_and_remembered() -> None:
    sp._heading_key_memo.cache_clear()
    for h in HEADINGS:
        assert sp._heading_key(h) == sp._key_of_heading(h)
    first = sp._heading_key_memo.cache_info()
    for h in HEADINGS:
        assert sp._heading_key(h) == sp._key_of_heading(h)
    again = sp._heading_key_memo.cache_info()
    short = [h for h in HEADINGS if len(h) <= sp._MEMO_CHARS]
    assert again.hits - first.hits == len(short)
    assert again.currsize == len(set(short))  # the long heading is not kept


def test_span_path_is_the_vocabulary_canonical_name_and_remembered() -> None:
    sp._canonical_memo.cache_clear()
    vocab = default_vocabulary()
    for h in HEADINGS:
        own = vocab.canonical(h) if h else None
        assert sp.span_path(doc_span("text", h)) == ((own,) if own else ())
    assert sp.span_path(doc_span("text", "12.3 Pharmacokinetics:")) == ("pharmacokinetics",)
    hits = sp._canonical_memo.cache_info().hits
    sp.span_path(doc_span("other text", "12.3 Pharmacokinetics:", doc="e"))
    assert sp._canonical_memo.cache_info().hits == hits + 1
    # A path recorded at ingestion is read as it is, not from the heading.
    recorded = doc_span("text", "References", metadata={SECTION_PATH_KEY: ["dosage", "warnings"]})
    assert sp.span_path(recorded) == ("dosage", "warnings")


def test_heading_echoes_unchanged() -> None:
    def plain(spans: list[Chunk]) -> set[int]:
        headings: dict[str, set[str]] = {}
        for c in spans:
            if c.section:
                headings.setdefault(c.document_id, set()).add(sp._key_of_heading(c.section))
        return {
            i
            for i, c in enumerate(spans)
            if len(c.text) <= 200 and sp._key_of_heading(c.text) in headings.get(c.document_id, ())
        }

    spans = [
        doc_span("* 1. Installing the widget filter", ""),
        doc_span("- 2. Replacing the widget filter ...... 4", ""),
        doc_span("Install the widget filter on a level floor.", "1. Installing the widget filter"),
        doc_span("The filter must be replaced every 6 months.", "2. Replacing the widget filter"),
        doc_span("1. Installing the widget filter", "", doc="other"),  # another document's heading
    ]
    for _ in range(2):  # afresh, then remembered
        assert sp.heading_echoes(spans) == plain(spans) == {0, 1}
