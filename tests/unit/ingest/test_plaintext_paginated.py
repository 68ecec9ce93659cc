"""Paginated plain text (form feeds, running headers and footers, a table of contents): real RFCs
parse into clean sections and spans whose offsets still index the uploaded text."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from evidence.ingest.chunker import chunk_document
from evidence.ingest.parsers import parse_bytes, parse_text
from evidence.ingest.spans import FactSpan, extract_spans
from evidence.records import ChunkKind, ParsedDocument

DATA = Path(__file__).parent / "data"
RFCS = ("rfc3339.txt", "rfc3986.txt")
FOOTER = re.compile(r"\[Page \d+\]")
#: A contents entry: number, title, dot leaders ("....", ". . ."), page number.
TOC_ENTRY = re.compile(r"^ +(\S.*?) *(?:\. ?){3,}[ .,]*\d+$")


def raw(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@cache
def parsed(name: str) -> tuple[ParsedDocument, list[FactSpan]]:
    doc = parse_text(raw(name), filename=name)
    return doc, extract_spans(doc)


def squash(text: str) -> str:
    return " ".join(text.split())


def section_names(name: str) -> list[tuple[int, str]]:
    return [(s.level, squash(s.name)) for s in parsed(name)[0].sections]


def test_rfc_sections_and_levels() -> None:
    names = section_names("rfc3986.txt")
    for expected in [
        (2, "Abstract"),
        (2, "Table of Contents"),
        (2, "1. Introduction"),
        (3, "1.1. Overview of URIs"),
        (4, "1.1.1. Generic Syntax"),
        (5, "6.2.2.1. Case Normalization"),
        (3, "10.2. Informative References"),
        (2, "Appendix A. Collected ABNF for URI"),
        (2, "Appendix D. Changes from RFC 2396"),
        (3, "D.1. Additions"),
        (2, "Authors' Addresses"),
    ]:
        assert expected in names
    # A heading whose title has a lower-case word, continuing the numbering (4.4 → 5).
    assert (2, "5. Date and Time format") in section_names("rfc3339.txt")
    assert (2, "Appendix D. Leap Seconds") in section_names("rfc3339.txt")


@pytest.mark.parametrize("name", RFCS)
def test_every_contents_entry_is_one_section_after_the_contents(name: str) -> None:
    doc, _ = parsed(name)
    toc = [squash(m.group(1)) for line in raw(name).split("\n") if (m := TOC_ENTRY.match(line))]
    assert len(toc) >= 25
    (contents,) = [s for s in doc.sections if s.name == "Table of Contents"]
    numbered = [squash(s.name) for s in doc.sections]
    for entry in toc:
        # once, not a second time as the contents' own one-line section; RFC 3986's contents
        # abbreviate "Appendix A." to "A."
        assert numbered.count(entry) + numbered.count(f"Appendix {entry}") == 1, entry
    assert not [s for s in doc.sections if contents.char_start < s.char_start < contents.char_end]
    # Each entry is one span, its leaders and page number kept ("Generic Syntax ." and "4\n 1.1."
    # fragments when the leaders' dots were read as sentence ends).
    entries = [s for s in parsed(name)[1] if s.section == "Table of Contents"]
    whole = [s for s in entries if "\n" not in s.text and s.text[-1].isdigit()]
    assert len(whole) >= 0.9 * len(entries)


@pytest.mark.parametrize("name", RFCS)
def test_no_page_furniture_in_any_span_or_section(name: str) -> None:
    doc, spans = parsed(name)
    header = squash(
        raw(name).split("\f")[1].strip().split("\n")[0]
    )  # "RFC 3986 URI Generic Syntax January 2005"
    assert header.startswith("RFC ")
    assert len(spans) > 250
    for s in spans:
        assert not FOOTER.search(s.text), s.text
        assert header not in squash(s.text) and "\f" not in s.text, s.text
    assert not [x for x in doc.sections if FOOTER.search(x.name) or x.name.startswith("RFC ")]
    # No table row or address line is a section ("01  January  31", "77 Massachusetts Avenue").
    assert not [
        x
        for x in doc.sections
        if re.search(r"\S {3,}\S", x.name) or (x.name[:1].isdigit() and "." not in x.name)
    ]


@pytest.mark.parametrize("name", RFCS)
def test_offsets_index_the_uploaded_text(name: str) -> None:
    original = raw(name)
    doc, spans = parsed(name)
    # Furniture is blanked in place: same length, and every other character is the upload's own.
    assert len(doc.text) == len(original)
    assert all(a == b or b.isspace() for a, b in zip(original, doc.text, strict=True))
    assert len(doc.page_starts) == original.count("\f") + 1
    for s in spans:
        assert doc.text[s.char_start : s.char_end] == s.text
        # a span starts and ends on the upload's own text, whatever page furniture lies between
        first, last = original[s.char_start], original[s.char_end - 1]
        assert (first, last) == (s.text[0], s.text[-1]) and not (first.isspace() or last.isspace())


def test_a_sentence_across_a_page_break_is_one_clean_span() -> None:
    original = raw("rfc3986.txt")
    doc, spans = parsed("rfc3986.txt")
    sentence = (
        "Nevertheless, nothing in this specification prevents an application from limiting itself "
        "to particular types of resources, or to a subset of URIs that maintains characteristics "
        "desired by that application."
    )
    (span,) = [s for s in spans if "Nevertheless, nothing in this" in s.text]
    assert squash(span.text) == sentence
    # The range cited is the upload's: it holds the page break the span reads across.
    assert "[Page 5]" in original[span.char_start : span.char_end]
    assert span.page == 5
    crossing = [s for s in spans if any(s.char_start < p < s.char_end for p in doc.page_starts)]
    assert len(crossing) >= 15


def test_the_memo_title_is_its_centred_line() -> None:
    assert parsed("rfc3986.txt")[0].title == "Uniform Resource Identifier (URI): Generic Syntax"
    assert parsed("rfc3339.txt")[0].title == "Date and Time on the Internet: Timestamps"


def test_a_crlf_upload_is_blanked_in_the_text_its_chunks_slice() -> None:
    data = raw("rfc3339.txt").replace("\n", "\r\n").encode("utf-8")
    doc = parse_bytes(data, filename="rfc3339.txt")
    assert doc.source_text is not None and len(doc.source_text) == len(data)
    chunks = chunk_document(doc, document_id="d", source="rfc3339.txt", metadata={}).chunks
    spans = [c for c in chunks if c.kind is ChunkKind.SPAN]
    assert len(spans) > 250
    for c in chunks:
        assert doc.source_text[c.char_start : c.char_end] == c.text
        assert not FOOTER.search(c.text)
    plain = {squash(s.text) for s in parsed("rfc3339.txt")[1]}
    assert {squash(c.text) for c in spans} == plain


def test_form_feeds_without_running_lines_keep_the_authors_layout() -> None:
    text = "".join(f"Part {i}\n\nThe text of part {i} ends here\n\f\n" for i in range(1, 6))
    doc = parse_text(text, filename="a.txt")
    assert doc.text == text.replace("\f", " ")
    assert len(doc.page_starts) == 6
    assert [squash(s.text) for s in extract_spans(doc)][:2] == ["Part 1", "The text of part 1 ends here"]


def test_running_lines_are_blanked_and_a_broken_sentence_joined() -> None:
    kinds = ["invoices", "contracts", "payroll", "emails", "logs", "tickets"]
    pages = [
        ("POLICY-7                 Data Retention                 May 2020\n\n" if i else "")
        + (f"   {kinds[i]} held by the finance team.\n\n" if i else "")
        + f"   Section {i} of this policy applies to {kinds[i]}.\n\n"
        f"   Records of this class are kept on site.\n\n"
        f"   The retention period for {kinds[i + 1]} is {i + 2} years for\n\n\n"
        f"Example Corp            Retention Policy            [Page {i + 1}]\n\f"
        for i in range(5)
    ]
    text = "".join(pages)
    doc = parse_text(text, filename="policy.txt")
    spans = [squash(s.text) for s in extract_spans(doc)]
    assert "The retention period for payroll is 3 years for payroll held by the finance team." in spans
    assert not [s for s in spans if "Page" in s or "POLICY-7" in s]
    assert len(doc.text) == len(text)
