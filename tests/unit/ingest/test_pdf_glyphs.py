"""PDF text as extractors return it: ligature glyphs (U+FB00-FB06) and glyphs with no character."""

from __future__ import annotations

import logging

import pytest

from evidence.errors import DocumentParseError
from evidence.ingest import parse_bytes
from evidence.ingest.parsers.pdf import drop_glyph_names
from evidence.ingest.spans import extract_spans
from tests.unit.ingest.ingestkit import make_pdf


def test_ligature_glyphs_are_read_as_their_letters() -> None:
    # LaTeX and InDesign set "fi", "ffi", "fl" as one glyph; pypdf returns U+FB01 etc., which no
    # analyser folds: "first" never matched "\ufb01rst".
    pdf = make_pdf([["The Xrst eYcacy test of Zow.", "Second line here."]], differences="88 /fi /ffi /fl")
    doc = parse_bytes(pdf, filename="paper.pdf")
    assert "The first efficacy test of flow." in doc.text
    for sp in extract_spans(doc):
        assert doc.text[sp.char_start : sp.char_end] == sp.text


def test_glyph_names_of_unmapped_glyphs_are_dropped_and_named(caplog: pytest.LogCaptureFixture) -> None:
    # pypdf writes a glyph its font maps to no character as "/g18"; pages of such text were
    # indexed as words "g18 g152 ...".
    lines = ["Abstract", "User acceptance of technology matters.", "WWWW WWW WWWWW", "WWW WWWW"]
    pdf = make_pdf([lines, ["WWWWWW WWW", "Readable closing line."]], differences="87 /g18")
    with caplog.at_level(logging.WARNING):
        doc = parse_bytes(pdf, filename="paper.pdf")
    assert "/g18" not in doc.text
    assert "User acceptance of technology matters." in doc.text
    assert "Readable closing line." in doc.text
    messages = [r.getMessage() for r in caplog.records]
    assert any("paper.pdf" in m and "glyph names dropped" in m for m in messages)


def test_a_pdf_of_unmapped_glyphs_only_is_refused_by_name() -> None:
    pdf = make_pdf([["WWWW WWW WWWWW", "WWW WWWW WW"], ["WWWWWW"]], differences="87 /g18")
    with pytest.raises(DocumentParseError, match="map glyphs to no characters"):
        parse_bytes(pdf, filename="scan.pdf")


def test_a_url_path_is_not_a_glyph_name() -> None:
    pages = ["See https://example.org/v1/api and /usr/lib64 for details.", "Version /v2 notes."]
    assert drop_glyph_names(pages) == (pages, 0)
