"""Format characters (soft hyphen, zero-width characters, BOM, bidi marks) and ligatures are
removed from the document text where it is made, offsets moving with the text."""

from __future__ import annotations

from evidence.ingest import chunk_document, parse_bytes
from evidence.ingest.parsers.invisible import clean_document, clean_text
from evidence.ingest.spans import extract_spans
from evidence.records import ChunkKind, ParsedDocument, Section
from evidence.search.analysis import standard_tokenize

SHY, ZWSP, ZWJ, WJ, BOM, LRM = "\u00ad", "\u200b", "\u200d", "\u2060", "\ufeff", "\u200e"


def test_a_soft_hyphenated_word_is_one_word_in_the_parsed_text() -> None:
    data = f"# Keys\n\nData is protected by encryp{SHY}tion at rest.\n".encode()
    doc = parse_bytes(data, filename="policy.md")
    assert "encryption at rest" in doc.text
    assert "encryption" in standard_tokenize(doc.text)


def test_every_format_character_goes_and_offsets_still_slice_the_text() -> None:
    text = (
        f"{BOM}Intro{ZWSP}duction\n\n"
        f"1. Scope{LRM}\n\nThe po{SHY}licy ap{WJ}plies to all staff.\n\n"
        f"2. Terms\n\nEmo{ZWJ}ji and key{SHY}words stay readable. Sign{SHY}ed by the CISO.\n"
    )
    doc = parse_bytes(text.encode(), filename="policy.txt")
    assert all(ch not in doc.text for ch in (SHY, ZWSP, ZWJ, WJ, BOM, LRM))
    assert "The policy applies to all staff." in doc.text
    names = [s.name for s in doc.sections]
    assert "2. Terms" in names
    for sec in doc.sections:
        assert doc.text[sec.char_start :].startswith(sec.name)
    chunks = chunk_document(doc, document_id="d", source="policy.txt", metadata={})
    spans = [c for c in chunks.chunks if c.kind == ChunkKind.SPAN]
    assert "Signed by the CISO." in {c.text for c in spans}
    for c in chunks.chunks:
        assert doc.text[c.char_start : c.char_end] == c.text


def test_crlf_upload_keeps_mapping_to_its_source_text() -> None:
    text = f"Title\r\n\r\nThe en{SHY}crypted disk.\r\nA second line.\r\n"
    doc = parse_bytes(text.encode(), filename="a.txt")
    assert doc.source_text is not None and SHY not in doc.source_text
    chunks = chunk_document(doc, document_id="d", source="a.txt", metadata={})
    texts = {c.text for c in chunks.chunks if c.kind == ChunkKind.SPAN}
    assert "The encrypted disk." in texts
    for c in chunks.chunks:
        assert doc.source_text[c.char_start : c.char_end] == c.text


def test_ligatures_are_spelled_out_and_sections_and_pages_move_with_the_text() -> None:
    text = "\ufb01rst page\n\n2 Speci\ufb01cation\n\nThe e\ufb03cacy and \ufb02ow.\n"
    start = text.index("2 Speci")
    doc = ParsedDocument(
        text=text,
        title="O\ufb03ce",
        sections=(Section("Speci\ufb01cation", start, len(text), 1),),
        page_starts=(0, start),
        fmt="pdf",
    )
    out = clean_document(doc)
    assert out.text == "first page\n\n2 Specification\n\nThe efficacy and flow.\n"
    assert out.title == "Office"
    (sec,) = out.sections
    assert sec.name == "Specification"
    assert out.text[sec.char_start :].startswith("2 Specification")
    assert sec.char_end == len(out.text)
    assert out.page_starts == (0, sec.char_start)
    for sp in extract_spans(out):
        assert out.text[sp.char_start : sp.char_end] == sp.text


def test_a_clean_document_is_returned_unchanged() -> None:
    doc = ParsedDocument(text="Plain text. Nothing hidden.", title="T")
    assert clean_document(doc) is doc
    assert clean_text("naïve café \u2013 5 µg") == "naïve café \u2013 5 µg"


def test_a_text_of_format_characters_only_is_an_empty_document() -> None:
    import pytest

    from evidence.errors import DocumentParseError
    from evidence.ingest import parse_text

    with pytest.raises(DocumentParseError, match="empty document"):
        parse_text(f"{ZWSP}{SHY}\n{BOM}", filename="blank.md", fmt="md")


def test_the_precomputed_format_ranges_are_category_cf_exactly() -> None:
    """The table that spares every process a scan of all code points is what `unicodedata` says
    (on a Python with another Unicode version the ranges are derived instead)."""
    import unicodedata

    import pytest

    from evidence.ingest.parsers import invisible

    if unicodedata.unidata_version != invisible.FORMAT_RANGES_VERSION:
        pytest.skip("another Unicode version: the ranges are derived, not read from the table")
    assert invisible.derive_format_ranges() == invisible.FORMAT_RANGES
    assert invisible._format_ranges() is invisible.FORMAT_RANGES


def test_a_c1_control_as_a_list_marker_reads_as_a_bullet_and_stray_ones_go() -> None:
    """A PDF font that maps its bullet glyph to a C1 control code (U+0080-U+009F) leaves one where
    each bullet was: at a line's or a table cell's start before a space it is a bullet (same
    length, offsets unchanged), anywhere else it is removed."""
    c1 = "\x88"
    text = (
        "New features\n\nThe release adds:\n"
        f"{c1} Integer overflow is detected.\n"
        f"  {c1} Voxel grids can be read.\n"
        f"| {c1} | Plot style with circles in 3D plots. |\n"
        f"An odd\x9ccode inside a line, and a stray {c1}\x85 here.\n"
    )
    doc = ParsedDocument(
        text=text,
        title=f"Release{c1} notes",
        sections=(Section("New features", 0, len(text), 1),),
        page_starts=(0,),
        fmt="pdf",
    )
    out = clean_document(doc)
    assert not any("\x80" <= ch <= "\x9f" for ch in out.text + out.title)
    assert "\n\u2022 Integer overflow is detected.\n  \u2022 Voxel grids can be read.\n" in out.text
    assert "| \u2022 | Plot style with circles in 3D plots. |" in out.text
    assert "An oddcode inside a line, and a stray  here." in out.text
    assert out.title == "Release notes"
    assert out.sections[0].char_end == len(out.text)
    spans = {sp.text for sp in extract_spans(out)}
    assert "\u2022 Integer overflow is detected." in spans
    for sp in extract_spans(out):
        assert out.text[sp.char_start : sp.char_end] == sp.text
    assert clean_text(f"{c1} a bullet") == "\u2022 a bullet"


def test_a_del_control_as_a_list_marker_reads_as_a_bullet_too() -> None:
    """Some label PDFs' symbol fonts map the bullet glyph to DEL (U+007F) rather than a C1 code:
    the same reading, a bullet at a line's start before a space, removed elsewhere."""
    text = "Call your doctor if you:\n\x7f feel dizzy\n \x7f see double\nA stray\x7f mark.\n"
    doc = ParsedDocument(text=text, title="T", sections=(), page_starts=(0,), fmt="pdf")
    out = clean_document(doc)
    assert out.text == "Call your doctor if you:\n\u2022 feel dizzy\n \u2022 see double\nA stray mark.\n"
    spans = [sp.text for sp in extract_spans(out)]
    assert "\u2022 feel dizzy" in spans and "\u2022 see double" in spans
