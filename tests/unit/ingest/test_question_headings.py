"""A heading that is a question stays a fact span in HTML and in SPL section titles, as in
Markdown and plain text (issue 22: an FAQ's or a label's questions are what a reader asks)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes

PAGE = b"""<html><body>
<h1>Frobnix manual</h1>
<h2>1 What is Frobnix?</h2>
<p>Frobnix is a made-up tool that folds tickets.</p>
<h2>2 Installing</h2>
<p>Run the installer.</p>
</body></html>"""


def test_an_html_question_heading_is_a_span_and_other_headings_are_not() -> None:
    doc = parse_bytes(PAGE, filename="manual.html")
    assert [s.name for s in doc.sections] == ["Frobnix manual", "1 What is Frobnix?", "2 Installing"]
    spans = [s.text for s in extract_spans(doc)]
    assert "1 What is Frobnix?" in spans
    assert "Frobnix is a made-up tool that folds tickets." in spans
    assert "2 Installing" not in spans and "Frobnix manual" not in spans


def _section(code: str, title: str, text: str) -> str:
    return (
        f'<component><section><code code="{code}" codeSystem="2.16.840.1.113883.6.1"/>'
        f"<title>{title}</title><text><paragraph>{text}</paragraph></text></section></component>"
    )


LABEL = (
    '<?xml version="1.0" encoding="UTF-8"?><document xmlns="urn:hl7-org:v3">'
    '<code code="34390-5" codeSystem="2.16.840.1.113883.6.1"/><title>Made-up label</title>'
    "<component><structuredBody>"
    + _section("55106-9", "Active ingredient", "Frobnamine 10 mg")
    + _section("53413-1", "Questions or comments?", "Call the made-up number 555-0100 on weekdays.")
    + "</structuredBody></component></document>"
).encode()


def test_an_spl_section_titled_by_a_question_is_a_span_and_other_titles_are_not() -> None:
    doc = parse_bytes(LABEL, filename="label.xml")
    assert [s.name for s in doc.sections] == ["Active ingredient", "Questions or comments?"]
    spans = [s.text for s in extract_spans(doc)]
    assert "Questions or comments?" in spans
    assert "Call the made-up number 555-0100 on weekdays." in spans
    assert "Active ingredient" not in spans
