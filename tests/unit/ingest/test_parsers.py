from __future__ import annotations

import io
import logging
import random
import re

import pytest

from evidence.errors import DocumentParseError
from evidence.ingest import detect_format, extract_spans, parse_bytes, parse_text
from evidence.records import SpanType
from tests.unit.ingest.ingestkit import make_docx, make_pdf, pdf_file

# --- plain text and encodings ----------------------------------------------------------------


def test_txt_utf8_text_is_kept_and_crlf_normalised() -> None:
    doc = parse_bytes("Héllo wörld.\r\nSecond line.\r\n".encode(), filename="a.txt")
    assert doc.fmt == "txt"
    assert doc.text == "Héllo wörld.\nSecond line.\n"
    assert doc.sections == ()
    assert doc.page_starts == ()
    assert doc.page_at(3) is None


def test_txt_utf8_bom_is_dropped() -> None:
    doc = parse_bytes(b"\xef\xbb\xbfcaf\xc3\xa9", filename="a.txt")
    assert doc.text == "café"


def test_txt_utf16_with_bom() -> None:
    doc = parse_bytes("naïve text".encode("utf-16"), filename="a.txt")
    assert doc.text == "naïve text"


def test_txt_falls_back_to_cp1252_only_when_utf8_fails() -> None:
    assert parse_bytes(b"caf\xe9 \x93quoted\x94", filename="a.txt").text == "café \u201cquoted\u201d"
    # valid UTF-8 is never re-read as cp1252
    assert parse_bytes("café".encode(), filename="a.txt").text == "café"


def test_txt_mixed_utf8_and_latin1_keeps_its_utf8_lines() -> None:
    """Issue 26: a file pasted from a UTF-8 and a latin-1 source; decoded whole as cp1252, every
    UTF-8 line became mojibake ("naÃ¯ve")."""
    data = "naïve café — 25 µg\n".encode() + "Ångström crème\n".encode("latin-1") + "日本語\n".encode()
    text = parse_bytes(data, filename="mixed.txt").text
    assert text == "naïve café — 25 µg\nÅngström crème\n日本語\n"
    # A declared charset still decodes the whole file.
    assert (
        parse_bytes(
            "é\n".encode("latin-1"), filename="a.txt", content_type="text/plain; charset=latin-1"
        ).text
        == "é\n"
    )
    with pytest.raises(DocumentParseError, match="neither UTF-8 nor cp1252"):
        parse_bytes(b"ok\n\x81\x8d\x8f binary\n", filename="b.txt")


def test_txt_latin1_label_on_cp1252_text_reads_its_quotes_and_dashes() -> None:
    """Windows-1252 text served as ISO-8859-1: its quotes and dashes decode to C1 controls, which
    the cleaning then drops ("\x93ok\x94" read as "ok"); they are read as windows-1252 instead."""
    data = "The \u201cLicensee\u201d \u2013 any person \u2026 pays \u20ac5.\n".encode("cp1252")
    for label in ("latin-1", "ISO-8859-1", "iso8859-1"):
        doc = parse_bytes(data, filename="a.txt", content_type=f"text/plain; charset={label}")
        assert doc.text == "The \u201cLicensee\u201d \u2013 any person \u2026 pays \u20ac5.\n"
    # True latin-1 text has no C1 bytes and reads as before; other labels are trusted as given.
    assert (
        parse_bytes(
            "Ångström\n".encode("latin-1"), filename="a.txt", content_type="text/plain; charset=latin-1"
        ).text
        == "Ångström\n"
    )
    greek = "\u0391\u03b8\u03ae\u03bd\u03b1\n".encode("iso-8859-7")
    assert (
        parse_bytes(greek, filename="a.txt", content_type="text/plain; charset=iso-8859-7").text
        == "\u0391\u03b8\u03ae\u03bd\u03b1\n"
    )


# --- Markdown --------------------------------------------------------------------------------

MD = """# Product Label

Intro paragraph before sections.

## Dosage

Take 5 mg daily.

```
# not a heading inside code
```

Warnings
--------

- Do not exceed the dose.
"""


def test_markdown_keeps_source_verbatim_and_finds_headings() -> None:
    doc = parse_bytes(MD.encode(), filename="label.md")
    assert doc.fmt == "md"
    assert doc.text == MD
    assert doc.title == "Product Label"
    names = [s.name for s in doc.sections]
    assert names == ["Product Label", "Dosage", "Warnings"]
    for sec in doc.sections:
        assert sec.name in doc.text[sec.char_start :].split("\n", 1)[0]
    assert [s.level for s in doc.sections] == [1, 2, 2]
    # contiguous and covering to the end
    assert doc.sections[-1].char_end == len(MD)
    assert all(a.char_end == b.char_start for a, b in zip(doc.sections, doc.sections[1:], strict=False))


def test_markdown_headings_become_span_sections_not_spans() -> None:
    doc = parse_bytes(MD.encode(), filename="label.md")
    spans = extract_spans(doc)
    texts = [s.text for s in spans]
    assert "Take 5 mg daily." in texts
    assert not any(t.startswith("#") and "Dosage" in t for t in texts)
    by_text = {s.text: s for s in spans}
    assert by_text["Take 5 mg daily."].section == "Dosage"
    assert by_text["- Do not exceed the dose."].span_type is SpanType.BULLET
    assert by_text["- Do not exceed the dose."].section == "Warnings"
    assert by_text["Intro paragraph before sections."].section == "Product Label"


def test_text_plain_content_type_defers_to_markdown_extension() -> None:
    assert detect_format(b"# x", filename="a.md", content_type="text/plain; charset=utf-8") == "md"
    assert detect_format(b"# x", filename="a.txt", content_type="text/markdown") == "md"


# --- HTML ------------------------------------------------------------------------------------

HTML = b"""<!DOCTYPE html><html><head><title>Policy &amp; Rules</title>
<style>p { color: red }</style><script>var s = "<p>not text</p>";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Data Retention</h1>
<p>We keep data for <b>90</b>&nbsp;days.   Backups are encrypted, e.g. with AES-256.</p>
<ul><li>Daily backups</li><li><p>Weekly <em>offsite</em> copies</p><ul><li>nested item</li></ul></li></ul>
<ol><li>First step</li><li>Second step</li></ol>
<h2>Encryption</h2>
<table><caption>Table 2: Ciphers in use</caption>
<thead><tr><th>Algorithm</th><th>Bits</th></tr></thead>
<tbody><tr><td>AES</td><td>256</td></tr><tr><td>RSA | PSS</td><td>4096</td></tr></tbody></table>
<figure><img src="a.png" alt="diagram"><figcaption>Figure 1. Architecture overview</figcaption></figure>
<p>Caf&eacute; &lt;tag&gt; &#8212; done</p><div hidden>secret</div>
<script>document.write("late script")</script>
</body></html>"""


def test_html_drops_script_style_nav_and_decodes_entities() -> None:
    doc = parse_bytes(HTML, filename="policy.html")
    assert doc.fmt == "html"
    assert doc.title == "Policy & Rules"
    for gone in ("not text", "color", "Home", "About", "late script", "secret"):
        assert gone not in doc.text
    assert "We keep data for 90 days. Backups are encrypted, e.g. with AES-256." in doc.text
    assert "Café <tag> \u2014 done" in doc.text


def test_html_structure_lists_tables_captions_sections() -> None:
    doc = parse_bytes(HTML, filename="policy.html")
    lines = doc.text.split("\n")
    assert "- Daily backups" in lines
    assert "- Weekly offsite copies" in lines
    assert "  - nested item" in lines
    assert "1. First step" in lines
    assert "2. Second step" in lines
    assert "| Algorithm | Bits |" in lines
    assert "| AES | 256 |" in lines
    assert "| RSA \\| PSS | 4096 |" in lines
    assert "Figure 1. Architecture overview" in lines
    assert [s.name for s in doc.sections] == ["Data Retention", "Encryption"]
    for sec in doc.sections:
        assert doc.text[sec.char_start : sec.char_start + len(sec.name)] == sec.name

    spans = extract_spans(doc)
    kinds = {s.text: s.span_type for s in spans}
    assert kinds["- Daily backups"] is SpanType.BULLET
    assert kinds["1. First step"] is SpanType.BULLET
    assert kinds["| AES | 256 |"] is SpanType.TABLE_ROW
    assert kinds["Table 2: Ciphers in use"] is SpanType.CAPTION
    assert kinds["Figure 1. Architecture overview"] is SpanType.CAPTION
    assert kinds["We keep data for 90 days."] is SpanType.SENTENCE
    assert kinds["Backups are encrypted, e.g. with AES-256."] is SpanType.SENTENCE
    section_of = {s.text: s.section for s in spans}
    assert section_of["| AES | 256 |"] == "Encryption"
    assert section_of["- Daily backups"] == "Data Retention"


def test_html_a_paragraph_of_only_bold_text_is_a_heading_one_level_down() -> None:
    html = (
        "<h2>Limits</h2><ol>"
        "<li><p><b>Maximum Number Of Columns</b></p><p>The default setting is 2000.</p></li>"
        "<li><p><b>Maximum Length Of A Statement</b></p><p>The default is 1,000,000.</p></li></ol>"
        "<p><b>Note:</b> a bold lead-in followed by text stays prose.</p>"
        "<p><b>This whole bold sentence ends with a full stop.</b></p>"
    )
    doc = parse_bytes(html.encode(), filename="limits.html")
    names = [s.name for s in doc.sections]
    assert names == ["Limits", "Maximum Number Of Columns", "Maximum Length Of A Statement"]
    for sec in doc.sections:
        assert doc.text[sec.char_start : sec.char_start + len(sec.name)] == sec.name
    section_of = {s.text: s.section for s in extract_spans(doc)}
    assert section_of["The default setting is 2000."] == "Maximum Number Of Columns"
    assert section_of["The default is 1,000,000."] == "Maximum Length Of A Statement"


def test_html_pre_keeps_its_lines_and_sniffing_finds_html() -> None:
    data = b"<html><body><p>Before.</p><pre>a  b\n  c</pre><p>After.</p></body></html>"
    assert detect_format(data, filename="noext") == "html"
    doc = parse_bytes(data, filename="noext")
    assert doc.text == "Before.\n\na  b\n  c\n\nAfter."


def test_html_with_only_scripts_is_empty() -> None:
    with pytest.raises(DocumentParseError, match=r"s\.html: empty"):
        parse_bytes(b"<html><script>x()</script><nav>menu</nav></html>", filename="s.html")


# --- PDF -------------------------------------------------------------------------------------


def test_pdf_two_pages_page_starts_and_page_numbers() -> None:
    pdf = make_pdf(
        [
            ["PRODUCT LABEL", "The drug is taken orally. Dr. Smith approved it.", "- Take with food"],
            ["Table 1: Doses by age", "The half-life is 3.5 hours."],
        ],
        title="Axid Label",
    )
    doc = parse_bytes(pdf, filename="label.pdf")
    assert doc.fmt == "pdf"
    assert doc.title == "Axid Label"
    assert len(doc.page_starts) == 2
    assert doc.page_starts[0] == 0
    p2 = doc.page_starts[1]
    assert doc.text[p2 - 2 : p2] == "\n\n"
    assert doc.text[p2:].startswith("Table 1: Doses by age")
    assert doc.page_at(0) == 1
    assert doc.page_at(p2 - 1) == 1
    assert doc.page_at(p2) == 2
    assert doc.page_at(len(doc.text) - 1) == 2

    spans = {s.text: s for s in extract_spans(doc)}
    assert spans["The drug is taken orally."].page == 1
    assert spans["Dr. Smith approved it."].page == 1
    assert spans["- Take with food"].span_type is SpanType.BULLET
    assert spans["Table 1: Doses by age"].span_type is SpanType.CAPTION
    assert spans["Table 1: Doses by age"].page == 2
    assert spans["The half-life is 3.5 hours."].page == 2
    # heading-like line → a section, not a span
    assert doc.sections[0].name == "PRODUCT LABEL"
    assert "PRODUCT LABEL" not in spans
    assert spans["The half-life is 3.5 hours."].section == "PRODUCT LABEL"


def test_pdf_sniffed_without_extension_or_content_type() -> None:
    pdf = make_pdf([["Sniffed text."]])
    assert detect_format(pdf, filename="upload") == "pdf"
    assert parse_bytes(pdf, filename="upload").text == "Sniffed text."


def test_pdf_with_empty_middle_page_keeps_numbering() -> None:
    doc = parse_bytes(make_pdf([["One."], [], ["Three."]]), filename="x.pdf")
    assert len(doc.page_starts) == 3
    three = doc.text.index("Three.")
    assert doc.page_at(three) == 3


def test_pdf_without_text_layer_says_scanned() -> None:
    with pytest.raises(DocumentParseError) as info:
        parse_bytes(make_pdf([[], []]), filename="scan.pdf")
    assert info.value.source == "scan.pdf"
    assert "scanned? no text layer" in info.value.reason


def test_encrypted_pdf_is_refused() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([["Secret text."]]))))
    writer.encrypt("s3cret", algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    with pytest.raises(DocumentParseError, match=r"locked\.pdf: encrypted PDF"):
        parse_bytes(buf.getvalue(), filename="locked.pdf")


def test_owner_password_only_pdf_is_readable() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([["Readable text."]]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    assert parse_bytes(buf.getvalue(), filename="o.pdf").text == "Readable text."


def test_corrupt_pdf_names_file() -> None:
    with pytest.raises(DocumentParseError) as info:
        parse_bytes(b"%PDF-1.7\n this is not really a pdf at all", filename="broken.pdf")
    assert info.value.source == "broken.pdf"
    assert "PDF" in info.value.reason
    assert str(info.value).startswith("broken.pdf: ")


# --- docx ------------------------------------------------------------------------------------


def test_docx_headings_lists_tables() -> None:
    data = make_docx(
        [
            ("Title", "Security Policy"),
            ("Heading1", "Scope"),
            ("", "This policy applies to all staff. It is reviewed yearly."),
            ("list", "Laptops are encrypted"),
            ("list", "MFA is required"),
            ("Heading2", "Ciphers"),
            [["Name", "Bits"], ["AES", "256"]],
        ]
    )
    doc = parse_bytes(data, filename="policy.docx")
    assert doc.fmt == "docx"
    assert doc.title == "Security Policy"
    assert [s.name for s in doc.sections] == ["Security Policy", "Scope", "Ciphers"]
    spans = {s.text: s for s in extract_spans(doc)}
    assert spans["This policy applies to all staff."].section == "Scope"
    assert spans["- Laptops are encrypted"].span_type is SpanType.BULLET
    assert spans["| AES | 256 |"].span_type is SpanType.TABLE_ROW
    assert spans["| AES | 256 |"].section == "Ciphers"


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"   \n\t  \r\n"])
def test_empty_document(data: bytes) -> None:
    with pytest.raises(DocumentParseError, match=r"^notes\.txt: empty document"):
        parse_bytes(data, filename="notes.txt")


def test_unsupported_extension_names_supported_types() -> None:
    with pytest.raises(DocumentParseError) as info:
        parse_bytes(b"\x89PNG\r\n\x1a\n....", filename="photo.png")
    assert info.value.source == "photo.png"
    for fmt in ("txt", "md", "html", "pdf"):
        assert fmt in info.value.reason


def test_unsupported_content_type() -> None:
    with pytest.raises(DocumentParseError, match="unsupported content type 'image/png'"):
        parse_bytes(b"abc", filename="x", content_type="image/png")


def test_content_type_wins_over_extension_and_octet_stream_is_ignored() -> None:
    assert detect_format(b"<p>x</p>", filename="a.txt", content_type="text/html") == "html"
    assert detect_format(b"# x", filename="a.md", content_type="application/octet-stream") == "md"


def test_binary_garbage_is_refused() -> None:
    rng = random.Random(7)
    junk = bytes(rng.randrange(256) for _ in range(4000))
    with pytest.raises(DocumentParseError) as info:
        parse_bytes(junk, filename="blob.dat")
    assert info.value.source == "blob.dat"
    assert "binary" in info.value.reason


def test_magic_numbers_are_named_when_unknown_extension() -> None:
    with pytest.raises(DocumentParseError, match="PNG image"):
        parse_bytes(b"\x89PNG\r\n\x1a\nrest", filename="upload")


def test_parse_text_for_records_and_api_text() -> None:
    doc = parse_text("# T\n\nBody.", filename="x.md", fmt="md")
    assert doc.sections[0].name == "T"
    with pytest.raises(DocumentParseError, match="x: empty document"):
        parse_text("  ", filename="x")


# --- fuzzing: bad input is a DocumentParseError, never anything else ----------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_html_bits = st.sampled_from(
    ["<p>", "</p>", "<li>", "<ul>", "</ul>", "<table>", "<tr>", "<td>", "</td>", "</tr>", "<h2>", "</h2>",
     "<script>", "</script>", "<pre>", "</pre>", "&amp;", "&#x41;", "&bogus;", "text", " ", "\n", "<br/>",
     "<!--", "-->", "<", ">", "|", "<ol>", "<nav>", "</nav>", "<caption>", "<figcaption>"]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(_html_bits, max_size=60).map("".join))
def test_html_fuzz_parses_or_refuses(html: str) -> None:
    try:
        doc = parse_bytes(html.encode(), filename="f.html")
    except DocumentParseError:
        return
    assert doc.text.strip()
    for sec in doc.sections:
        assert 0 <= sec.char_start < sec.char_end <= len(doc.text)
    for span in extract_spans(doc):
        assert doc.text[span.char_start : span.char_end] == span.text


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600), st.sampled_from(["a.txt", "a.md", "a.html", "a.pdf", "a.docx", "noext"]))
def test_arbitrary_bytes_parse_or_refuse(data: bytes, filename: str) -> None:
    try:
        doc = parse_bytes(data, filename=filename)
    except DocumentParseError as exc:
        assert exc.source == filename
        return
    assert doc.text.strip()


def test_html_unclosed_tags_inside_skipped_nav_do_not_swallow_the_page() -> None:
    html = b"<html><head><title>T</title><meta charset=utf-8><body><nav><ul><li>Home<li><p>About</nav>"
    html += b"<p>Visible text.<div style='display: none'>gone</div><p hidden>also gone</p><p>More."
    doc = parse_bytes(html, filename="u.html")
    assert doc.text == "Visible text.\n\nMore."
    assert doc.title == "T"


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("INTRODUCTION", True),
        ("DOSAGE AND ADMINISTRATION", True),
        ("2.1 Study Design", True),
        ("3 Results", True),
        ("2 Tablets were taken daily", False),
        ("WARNING: DO NOT EXCEED 4 TABLETS", False),
        ("AES-256", False),
        ("The drug is taken orally", False),
        ("RESULTS OF THE TRIAL WERE POSITIVE.", False),
    ],
)
def test_pdf_heading_heuristic_is_conservative(line: str, heading: bool) -> None:
    from evidence.ingest.parsers.pdf import is_pdf_heading as _is_pdf_heading

    assert _is_pdf_heading(line) is heading


def test_pdf_running_headers_and_page_numbers_are_dropped() -> None:
    pages = [
        ["ACME Security Policy", f"Body sentence on page {n}. Another fact {n}.", f"Page {n} of 4"]
        for n in range(1, 5)
    ]
    doc = parse_bytes(make_pdf(pages), filename="policy.pdf")
    assert "ACME Security Policy" not in doc.text
    assert "Page 2 of 4" not in doc.text
    spans = extract_spans(doc)
    assert [(s.text, s.page) for s in spans] == [
        (f"{kind} {n}.", n) for n in range(1, 5) for kind in ("Body sentence on page", "Another fact")
    ]


def test_docx_content_controls_are_read() -> None:
    import zipfile

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    xml = (
        f'<w:document xmlns:w="{w}"><w:body>'
        "<w:p><w:r><w:t>Outside.</w:t></w:r></w:p>"
        "<w:sdt><w:sdtContent><w:p><w:r><w:t>Inside a control.</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        "</w:body></w:document>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("word/document.xml", xml)
    doc = parse_bytes(buf.getvalue(), filename="c.docx")
    assert doc.text == "Outside.\n\nInside a control."


def test_docx_errors_name_the_file() -> None:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("word/document.xml", "<w:document><unclosed>")
    with pytest.raises(DocumentParseError, match=r"^bad\.docx: corrupt docx"):
        parse_bytes(buf.getvalue(), filename="bad.docx")
    with pytest.raises(DocumentParseError, match=r"^x\.docx: "):
        parse_bytes(b"PK\x03\x04 not a zip", filename="x.docx")


def test_pdf_producer_title_boilerplate_is_cleaned() -> None:
    doc = parse_bytes(make_pdf([["Text."]], title="Microsoft Word - Retention Policy"), filename="r.pdf")
    assert doc.title == "Retention Policy"
    assert parse_bytes(make_pdf([["Text."]], title="untitled"), filename="r.pdf").title == ""


def test_html_line_breaks_pre_endings_and_chrome_roles() -> None:
    html = (
        b"<p>a<br>b<br><br>c</p><pre>$ run\n</pre><p>After pre.</p>"
        b"<div role='navigation'>menu</div><span aria-hidden='true'>icon</span><button>Click</button>"
        b"<ul><li><br>x</li></ul>"
    )
    assert parse_bytes(html, filename="b.html").text == "a\nb\n\nc\n\n$ run\n\nAfter pre.\n\n- x"


# --- real-file quality (issue 13, item 7) ---------------------------------------------------


def test_pdf_code_sample_lines_are_not_headings() -> None:
    """An ALL-CAPS keyword inside a grammar sample ("BEGIN") named every page after it."""
    grammar = [
        "ASN.1 definitions must follow the syntax below:",
        "DEFINITIONS <EXPLICIT or IMPLICIT> TAGS ::=",
        "BEGIN",
        "<type and constants definitions>",
        "END",
        "The parser is case sensitive.",
    ]
    doc = parse_bytes(
        make_pdf([["INTRODUCTION", "The library parses schemas.", "Read on."], grammar]), filename="g.pdf"
    )
    assert [s.name for s in doc.sections] == ["INTRODUCTION"]
    sample = [s for s in extract_spans(doc) if "BEGIN" in s.text]
    assert [s.section for s in sample] == ["INTRODUCTION"]  # still a fact, of the code sample


def test_pdf_running_headers_with_printed_page_numbers_are_dropped() -> None:
    """Book-style headers change per chapter ("Chapter 2: Setup 5", "6 User Guide") but carry the
    printed page number at one offset from the page's position: they are running lines."""
    facts = [
        "Keys rotate yearly.", "Backups are encrypted.", "Access is logged.", "Admins use MFA.",
        "Logs are kept a year.", "Vendors are reviewed.", "Laptops are encrypted.", "Tests run nightly.",
    ]  # fmt: skip
    pages = []
    for n, fact in enumerate(facts, start=1):
        printed = n - 2  # two pages of front matter, then page 1
        if n <= 2:
            pages.append([fact, "Front matter text.", "Printed before the numbering starts."])
            continue
        if n % 2:
            header = f"Chapter {1 + n // 5}: {'Install' if n < 5 else 'Configure'} {printed}"
        else:
            header = f"{printed} User Guide"
        pages.append([header, fact, f"Detail {n * 7} of this chapter.", "More text follows here."])
    doc = parse_bytes(make_pdf(pages), filename="guide.pdf")
    assert "Chapter" not in doc.text and "User Guide" not in doc.text
    assert [doc.text[start:].split("\n")[0] for start in doc.page_starts] == facts
    assert not doc.sections


def test_pdf_heading_like_running_header_names_no_section() -> None:
    """A header that looks like a heading ("1.1. Version" on every page) is dropped, and the real
    sentence-case numbered headings ("1.3. Language used in this specification") name the pages."""
    pages = [
        ["1.1. Version", "1.3. Language used in this specification", "Keywords follow RFC 2119.", "Body."],
        ["1.1. Version", "2.1. Directory layout", "Files live under share.", "Body."],
        ["1.1. Version", "2.2. The source XML files", "Each package installs one.", "Body."],
        ["1.1. Version", "Plain prose without a heading goes on here.", "More prose.", "Body."],
    ]
    doc = parse_bytes(make_pdf(pages), filename="spec.pdf")
    assert "1.1. Version" not in doc.text
    assert [s.name for s in doc.sections] == [
        "1.3. Language used in this specification",
        "2.1. Directory layout",
        "2.2. The source XML files",
    ]
    spans = {s.text: s for s in extract_spans(doc)}
    assert spans["More prose."].section == "2.2. The source XML files"


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("1.3. Language used in this specification", True),
        ("2.10. Storing the MIME type using Extended Attributes", True),
        ("3.5 Patients were followed", False),
    ],
)
def test_pdf_dotted_numbered_headings_may_be_sentence_case(line: str, heading: bool) -> None:
    from evidence.ingest.parsers.pdf import is_pdf_heading

    assert is_pdf_heading(line) is heading


class _RootRecords(logging.Handler):
    """What reaches the root logger, where a CLI or Lambda prints it (caplog cannot tell: pytest
    also attaches its handler to non-propagating loggers such as pypdf's once we own it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_pypdf_repairs_are_reported_once_naming_the_file() -> None:
    """Item 5: pypdf's own warning ("incorrect startxref pointer") used to print with no file name."""
    pdf = make_pdf([["Readable despite a bad trailer."]])
    broken = re.sub(rb"startxref\n\d+", b"startxref\n999", pdf)
    root = logging.getLogger()
    seen = _RootRecords()
    root.addHandler(seen)
    try:
        doc = parse_bytes(broken, filename="vendor/policy.pdf")
        assert doc.text == "Readable despite a bad trailer."
        lines = [r.getMessage() for r in seen.records]
        assert len(lines) == 1, lines
        assert lines[0].startswith("vendor/policy.pdf: pypdf repaired the PDF while reading it: ")
        assert "startxref" in lines[0]
        seen.records.clear()
        parse_bytes(pdf, filename="clean.pdf")
        assert seen.records == []
        # Outside a parse, pypdf's records still reach the root logger as before.
        logging.getLogger("pypdf._reader").warning("outside any parse")
        assert [r.getMessage() for r in seen.records] == ["outside any parse"]
    finally:
        root.removeHandler(seen)


TEXINFO_PAGE = b"""<!DOCTYPE html><html><head><title>Structures (libffi)</title>
<meta name="Generator" content="makeinfo"></head><body>
<span id="Structures"></span><div class="header"><p>
Next: <a href="Size.html" accesskey="n" rel="next">Size and Alignment</a>, Previous:
<a href="Primitive.html" accesskey="p" rel="prev">Primitive Types</a>, Up: <a href="Types.html"
accesskey="u" rel="up">Types</a> &nbsp; [<a href="Index.html" title="Index" rel="index">Index</a>]</p>
</div><hr><h4 class="subsection">2.3.2 Structures</h4>
<p>libffi is happy passing structures back and forth.</p>
<dl><dt id="index-t"><span>Data type: <strong>ffi_type</strong>
<a href='#index-t' class='copiable-anchor'> &para;</a></span></dt>
<dd><p>The ffi_type has members.</p></dd></dl>
<div class="nav-panel"><p>Next: <a href="Size.html">Size</a></p></div>
</body></html>"""


def test_html_texinfo_navigation_and_permalinks_stay_out() -> None:
    doc = parse_bytes(TEXINFO_PAGE, filename="Structures.html")
    assert doc.text == (
        "2.3.2 Structures\n\nlibffi is happy passing structures back and forth.\n\n"
        "Data type: ffi_type\n\nThe ffi_type has members."
    )
    assert [s.name for s in doc.sections] == ["2.3.2 Structures"]


def test_html_sphinx_headerlinks_and_bare_permalink_marks_stay_out() -> None:
    html = (
        '<h2>Install<a class="headerlink" href="#install" title="Permalink">¶</a></h2>'
        '<p>Run the installer.<a href="#fn1">1</a></p>'
        '<h3 id="x">Usage <a href="#x">§</a></h3><p>Call it. A ¶ in prose stays ¶.</p>'
        '<div class="header"><p>Site title</p></div>'  # not texinfo: a "header" class is content
    )
    doc = parse_bytes(html.encode(), filename="s.html")
    assert (
        doc.text == "Install\n\nRun the installer.1\n\nUsage\n\nCall it. A ¶ in prose stays ¶.\n\nSite title"
    )
    assert [s.name for s in doc.sections] == ["Install", "Usage"]


def test_pdf_a_line_its_table_of_contents_names_is_a_heading() -> None:
    """ "References" in the body font names no section by its form; the PDF's own table of
    contents does, so the bibliography under it is not the conclusion's text."""
    contents = ["CONTENTS", "Conclusion ........................ 2", "References ........................ 2"]
    body = [
        "CONCLUSION",
        "Clinicians should taper slowly.",
        "References",
        "1. Smith AB, Jones CD. Tapering opioids. J Pain 2020;21:1-9.",
    ]
    doc = parse_bytes(make_pdf([contents, body]), filename="guideline.pdf")
    assert [s.name for s in doc.sections][-2:] == ["CONCLUSION", "References"]
    spans = {s.text: s for s in extract_spans(doc)}
    assert spans["Clinicians should taper slowly."].section == "CONCLUSION"
    cited = [s for s in spans.values() if s.text.startswith("1. Smith")]
    assert [s.section for s in cited] == ["References"]
    # A line that only resembles a listed name stays text.
    assert all(s.name != "References to other sites" for s in doc.sections)


def test_pdf_an_index_entry_for_a_symbol_names_no_heading() -> None:
    """A manual's index lists its `{` and `.` commands with leaders and page numbers; a line that
    is just a brace or a dot in a code sample is no section for it."""
    leaders = " " + "." * 24 + " 2"
    index = ["INDEX", "alias" + leaders, "{" + leaders, "." + leaders]
    body = ["Shell Functions", "A function is defined as", "{", "echo hi", "}", "and is called by name", "."]
    doc = parse_bytes(make_pdf([index, body]), filename="manual.pdf")
    assert not any(sum(c.isalpha() for c in s.name) < 2 for s in doc.sections)


def _tex_font_pdf(charset: str) -> bytes:
    """One page set as pdfTeX sets a justified line: a Type 1 subset whose widths give code 32 the
    500 units of T1's visible-space glyph, words spaced by `TJ` gaps of -182/1000 em (no space
    glyph drawn); `charset` is the descriptor's list of the subset's glyphs."""
    widths = " ".join(["500"] * (126 - 32 + 1))
    stream = b"BT /F1 10 Tf 72 720 Td [(If)-182(you)-182(want)-182(to)-182(print)-182(this)] TJ ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >>"
        b" /Contents 6 0 R >>",
        (
            "<< /Type /Font /Subtype /Type1 /BaseFont /ABCDEF+TeXGyreTermes-Regular /FirstChar 32"
            f" /LastChar 126 /Widths [{widths}] /FontDescriptor 5 0 R"
            " /Encoding << /Type /Encoding /Differences [33 /exclam] >> >>"
        ).encode(),
        (
            "<< /Type /FontDescriptor /FontName /ABCDEF+TeXGyreTermes-Regular /Flags 4"
            f" /FontBBox [0 0 1000 1000] /ItalicAngle 0 /Ascent 700 /Descent -200 /CapHeight 700"
            f" /StemV 80 /CharSet ({charset}) >>"
        ).encode(),
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    return pdf_file(objects)


def test_pdf_word_gaps_of_a_font_without_a_space_glyph_are_spaces() -> None:
    """A TeX font subset has no space glyph and its code 32 is T1's wide visible space, so pypdf
    took a tight line's word gaps for no gap at all ("Ifyouwanttoprintthis"); a font that draws
    its spaces keeps pypdf's reading of its own space width."""
    glyphs = "/I/f/y/o/u/w/a/n/t/p/r/i/h/s"
    doc = parse_bytes(_tex_font_pdf(glyphs), filename="manual.pdf")
    assert doc.text == "If you want to print this"
    drawn = parse_bytes(_tex_font_pdf(glyphs + "/space"), filename="manual.pdf")
    assert drawn.text == "Ifyouwanttoprintthis"


def _composite_font_pdf(space_mapped: bool) -> bytes:
    """One page set as XeTeX and dvipdfmx set a line: a composite (Type0, Identity-H) font subset
    whose ToUnicode maps no code to a space (unless `space_mapped`), whose widths give code 32 (some
    other glyph of the subset) 1,000 units, words spaced by `TJ` gaps of -293/1000 em."""
    words = ["Like", "most", "Linux", "distributions"]
    shown = "-293".join("<" + "".join(f"{ord(c):04X}" for c in w) + ">" for w in words)
    stream = f"BT /F1 10 Tf 72 720 Td [{shown}] TJ ET".encode()
    space = "<0003> <0020>\n" if space_mapped else ""
    cmap = (
        "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /X-UTF16 def\n"
        "1 begincodespacerange <0000> <FFFF> endcodespacerange\n"
        f"1 beginbfrange <0021> <007E> <0021> endbfrange\n1 beginbfchar\n{space}<0400> <2022>\nendbfchar\n"
        "endcmap CMapName currentdict /CMap defineresource pop end end"
    ).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >>"
        b" /Contents 7 0 R >>",
        b"<< /Type /Font /Subtype /Type0 /BaseFont /ABCDEF+CharisSIL /Encoding /Identity-H"
        b" /DescendantFonts [5 0 R] /ToUnicode 6 0 R >>",
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /ABCDEF+CharisSIL /CIDSystemInfo"
        b" << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 563"
        b" /W [3 [250] 32 [1000] 33 126 500] /CIDToGIDMap /Identity >>",
        b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"\nendstream",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    return pdf_file(objects)


def test_pdf_word_gaps_of_a_composite_font_without_a_space_are_spaces() -> None:
    """A composite font subset maps no code to a space, so pypdf measured word gaps against the
    width of code 32, another glyph's, and read none of them as a space ("LikemostLinux…"); a font
    that maps a space keeps pypdf's reading of its own space width (250 units: the gaps are
    spaces there too)."""
    doc = parse_bytes(_composite_font_pdf(space_mapped=False), filename="faq.pdf")
    assert doc.text == "Like most Linux distributions"
    mapped = parse_bytes(_composite_font_pdf(space_mapped=True), filename="faq.pdf")
    assert mapped.text == "Like most Linux distributions"


def test_pdf_tex_t1_control_codes_read_as_ligatures_and_quotes() -> None:
    """A TeX font in T1 encoding without a ToUnicode map: pypdf returns its ligatures and double
    quotes as control codes ("di\\x1berent", "\\x10wins\\x11"); they read as the letters and quotes."""
    from tests.unit.ingest.test_pdf_tables import positioned_pdf

    data = positioned_pdf(
        [(72, 700, "A \x1cne di\x1berent \x10wins\x11 e\x1eciently."), (72, 680, "Second line here.")]
    )
    doc = parse_bytes(data, filename="t.pdf")
    assert doc.text == "A fine different \u201cwins\u201d efficiently.\nSecond line here."
    # a heading with a ligature in it is still read as the heading (its style runs read alike)
    page: list[str | tuple[str, float, bool]] = [
        ("2 Time dependent coe\x1ecients", 16, True),
        "The \x1crst model is \x1ct to the data.",
        "More text.",
        ("3 Results", 16, True),
        "The results follow.",
    ]
    doc = parse_bytes(make_pdf([page]), filename="h.pdf")
    assert [s.name for s in doc.sections] == ["2 Time dependent coefficients", "3 Results"]


def test_pdf_contents_entries_set_bold_with_page_numbers_are_no_headings() -> None:
    """A contents page set in bold without dot leaders ("1 Kettles and their care 1"): its entries
    name the chapters further on, so they are no sections; the chapters are."""
    contents: list[str | tuple[str, float, bool]] = [
        ("Contents", 16, True),
        ("1 Kettles and their care 1", 12, True),
        "1.1 Choosing a kettle 1",
        ("2 Brewing a pot of tea 2", 12, True),
        "2.1 Timing the brew 2",
    ]
    one: list[str | tuple[str, float, bool]] = [
        ("Kettles and their care", 16, True),
        "A kettle boils water for tea.",
        "Descale it once a month.",
    ]
    two: list[str | tuple[str, float, bool]] = [
        ("Brewing a pot of tea", 16, True),
        "Brew black tea for four minutes.",
    ]
    doc = parse_bytes(make_pdf([contents, one, two]), filename="guide.pdf")
    names = [s.name for s in doc.sections]
    assert "Kettles and their care" in names and "Brewing a pot of tea" in names
    assert not any(name.endswith((" 1", " 2")) for name in names)


def test_pdf_code_listing_lines_set_in_courier_are_spans_of_their_own() -> None:
    """A listing set in a typewriter face right under a prose sentence that does not end on a stop
    ("… as follows") neither runs into that sentence nor into one long span of its own: each of
    its lines is a span, as a fenced block's lines are in Markdown; prose set in the body face
    still joins its wrapped lines into sentences."""
    code = [
        "def brew(kettle):",
        "    kettle.fill(water)",
        "    kettle.boil()",
        "    return kettle.pour(cup)",
    ]
    pdf = make_pdf(
        [
            [
                "The kettle is driven by a short script that fills and boils it",
                "before pouring, as follows",
                *code,
                "The script runs once each morning and",
                "stops when the cup is full.",
            ]
        ],
        courier=frozenset(code),
    )
    spans = [s.text for s in extract_spans(parse_bytes(pdf, filename="guide.pdf"))]
    assert spans == [
        "The kettle is driven by a short script that fills and boils it\nbefore pouring, as follows",
        *[line.strip() for line in code],
        "The script runs once each morning and\nstops when the cup is full.",
    ]


def test_pdf_code_set_in_an_unnamed_fixed_pitch_font_is_code_too() -> None:
    """A Type3 font has no face name to read (TeX's bitmap typewriter face, as R vignettes set
    their listings in): glyphs all of one width make it a typewriter face; widths that vary do not."""
    code = ["def brew(kettle):", "    kettle.fill(water)", "    kettle.boil()", "    return kettle.pour(x)"]
    prose = "The kettle is driven by a short script that fills and boils it\nbefore pouring, as follows"
    after = ["The script runs once each morning and", "stops when the cup is full."]
    lines = [*prose.split("\n"), *code, *after]

    def spans(typewriter: str) -> list[str]:
        pdf = make_pdf([lines], courier=frozenset(code), typewriter=typewriter)
        return [s.text for s in extract_spans(parse_bytes(pdf, filename="vignette.pdf"))]

    fixed = spans("type3")
    assert fixed[:5] == [prose, *[line.strip() for line in code]]
    proportional = spans("type3-proportional")
    assert proportional[0].startswith(prose + "\ndef brew(kettle):")


def test_pdf_back_of_book_index_entries_are_spans_of_their_own() -> None:
    """An index column ("clip, 24, 81", a wrapped entry's page numbers on a line of their own)
    is a run of entries, each standing alone, not one run-on span of terms and page numbers;
    prose ending on a number stays prose."""
    entries = [
        "kettle, 4, 12",
        "kettle descaling, 15\u201317",
        "lid, 5",
        "spout, 6, 22, 31",
        "steeping time, 9, 40, 41, 44, 47, 52, 58,",
        "61, 63",
        "teapot, 3",
        "warming, 8",
    ]
    prose = "The pages below refer to the printed edition of\nthe guide, chapter 2."
    pdf = make_pdf([[*prose.split("\n"), *entries, "Every pot is warmed first, then", "filled to 4."]])
    spans = [s.text for s in extract_spans(parse_bytes(pdf, filename="manual.pdf"))]
    assert spans == [
        prose,
        *entries[:4],
        "steeping time, 9, 40, 41, 44, 47, 52, 58,",
        "61, 63",
        *entries[6:],
        "Every pot is warmed first, then\nfilled to 4.",
    ]


def test_pdf_heading_set_apart_by_type_next_to_a_listing_is_a_heading() -> None:
    """A bold, larger numbered heading between two listings set as text ("}" ends the one before
    it) is the next section's title, not a line of the listing; a line set like the code around
    it still is not; and a numbered heading line right under another heading line of its style
    ("Contents" over "1 Introduction") starts a heading of its own rather than continuing it."""
    pdf = make_pdf(
        [
            [
                ("Contents", 16, True),
                ("1 Introduction", 16, True),
                "The brewer keeps a small program that times each pot of tea.",
                "int steep(int minutes) {",
                "    return minutes * 60;",
                "}",
                ("2 Input and Output", 16, True),
                "int pour(int cups) {",
                "    return cups;",
                "}",
                "BEGIN",
                "int rest(void);",
            ]
        ]
    )
    names = [s.name for s in parse_bytes(pdf, filename="brewer.pdf").sections]
    assert names == ["Contents", "1 Introduction", "2 Input and Output"]


def test_pdf_description_list_entries_are_spans_of_their_own() -> None:
    """A description list (each entry's line opening on its term in a TeX bold face, SFBX, whose
    name says "bold" only as "BX") has no full stops: its entries ran into one span with the
    paragraph after it. Each entry is a span, and the paragraph after the list is one too; an
    entry wrapped onto a line that opens on a bold word inside parentheses keeps that line."""
    pdf = make_pdf(
        [
            [
                "The kettle comes in four kinds, each for one sort of leaf.",
                ("copperKettle", " Kettles for green tea in copper"),
                ("steelKettle", " Kettles for black tea in brushed steel"),
                ("glassKettle", " Kettles for herbal tea in tempered glass"),
                ("clayKettle", " ditto in unglazed clay"),
                "Methods for these kettles include pouring and boiling the water before steeping",
                "the leaves in it.",
                ("Warning:", " the handle of every kettle gets hot when the water in it boils over"),
                "and it should be held with a cloth.",
                ("Note:", " the lid of a kettle rattles when the water in it comes to the boil,"),
                ("(", "whistle", " and steam) so the brewer hears it from the next room."),
            ]
        ],
        bold_face="ABCDEF+SFBX1000",
    )
    spans = [s.text for s in extract_spans(parse_bytes(pdf, filename="kettles.pdf"))]
    assert "copperKettle Kettles for green tea in copper" in spans
    assert "clayKettle ditto in unglazed clay" in spans
    assert any(s.startswith("Methods for these kettles") for s in spans)
    # entries that wrap keep their second line
    assert any(s.startswith("Warning:") and s.endswith("held with a cloth.") for s in spans)
    assert any(s.startswith("Note:") and s.endswith("from the next room.") for s in spans)


def test_pdf_plot_title_is_no_heading_and_a_trailing_ellipsis_ends_no_sentence() -> None:
    """A plot's bold title ("Dimensions: 4 x 54") over its axis words and tick labels is figure
    text, not a section; a numbered heading trailing off in dots ("4 Steeping two leaves,.....")
    is a heading, though it ends on a full stop."""
    pdf = make_pdf(
        [
            [
                ("3 Steeping one leaf", 14, True),
                "The matrix of steeping times is drawn below for each pot of the morning.",
                ("Dimensions: 4 x 54", 12, True),
                "Column",
                "Row",
                "1",
                "2",
                "10 20 30 40 50",
                "The times are shorter when the leaves are broken, as the plot shows.",
                ("4 Steeping two leaves,.....", 14, True),
                "With two leaves the water cools faster than with one.",
                ("Serving", 12, True),
                "Tea is served hot in cups warmed beforehand with water.",
            ]
        ]
    )
    names = [s.name for s in parse_bytes(pdf, filename="steeping.pdf").sections]
    assert names == ["3 Steeping one leaf", "4 Steeping two leaves,.....", "Serving"]
