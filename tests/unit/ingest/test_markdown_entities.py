"""Markdown's HTML character references outside code are read as the characters they stand for
("soluti&shy;ons" is "solutions", not "soluti", "shy", "ons"); code keeps them as written."""

from __future__ import annotations

from evidence.ingest import chunk_document, parse_bytes
from evidence.records import ChunkKind
from evidence.search.analysis import standard_tokenize

SOURCE = (
    "# R&amp;D &amp; Support\n\n"
    "Our soluti&shy;ons cost &euro;5&nbsp;per seat &#8209; billed &#x2011; monthly.\n\n"
    "Use `a &amp; b` in code.\n\n```\nx &amp; y\n```\n\n"
    "    indented &amp; code\n\n"
    "Escaped \\&amp; stays, &unknown; stays.\n\n## Next &lt;part&gt;\n\nThe end.\n"
)


def _spans(data: str) -> tuple[str, list[str]]:
    doc = parse_bytes(data.encode(), filename="terms.md")
    chunks = chunk_document(doc, document_id="d", source="terms.md", metadata={})
    for c in chunks.chunks:
        base = doc.source_text if doc.source_text is not None else doc.text
        assert base[c.char_start : c.char_end] == c.text
    return doc.text, [c.text for c in chunks.chunks if c.kind is ChunkKind.SPAN]


def test_references_outside_code_are_decoded_and_offsets_follow() -> None:
    text, spans = _spans(SOURCE)
    assert "Our solutions cost \u20ac5\u00a0per seat \u2011 billed \u2011 monthly." in spans
    assert "shy" not in standard_tokenize(text)
    doc = parse_bytes(SOURCE.encode(), filename="terms.md")
    assert [s.name for s in doc.sections] == ["R&D & Support", "Next <part>"]
    assert doc.title == "R&D & Support"
    for sec in doc.sections:
        assert doc.text[sec.char_start :].startswith("#")
    # code, escapes and unknown names are left as written
    assert "Use `a &amp; b` in code." in spans
    assert "x &amp; y" in spans and "indented &amp; code" in spans
    assert "Escaped \\&amp; stays, &unknown; stays." in spans


def test_a_crlf_upload_maps_to_its_decoded_source() -> None:
    _, spans = _spans(SOURCE.replace("\n", "\r\n"))
    assert "Our solutions cost \u20ac5\u00a0per seat \u2011 billed \u2011 monthly." in spans
    assert "x &amp; y" in spans


def test_a_reference_to_a_line_break_stays_as_written() -> None:
    text, _ = _spans("# A\n\nOne&#10;two &#13; three.\n")
    assert "One&#10;two &#13; three." in text


def test_text_between_code_spans_is_not_code() -> None:
    # A span's closing backticks open no second span, and a fenced block later in the file does
    # not hide the inline spans ahead of it.
    text, _ = _spans("Use `a` R&amp;D `b` and `c &amp; d`.\n\n```\nx &amp; y\n```\n\nmore `e` Q&amp;A `f`\n")
    assert "Use `a` R&D `b` and `c &amp; d`." in text
    assert "x &amp; y" in text
    assert "more `e` Q&A `f`" in text


def test_a_tilde_fenced_block_keeps_its_references_when_no_backtick_is_in_the_text() -> None:
    # No backtick, no four-space run and no tab anywhere: only the "~~~" fence says code.
    text, spans = _spans(
        "# Escapes\n\nWrite &lt; as below.\n\n~~~\na &lt; b &amp;&amp; c\n~~~\n\nDone &amp; dusted.\n"
    )
    assert "a &lt; b &amp;&amp; c" in text
    assert "Write < as below." in spans and "Done & dusted." in spans
