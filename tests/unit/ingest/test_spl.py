"""FDA SPL XML: sections with LOINC codes and nesting, product names, lists and tables as rows, safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence.errors import DocumentParseError
from evidence.ingest.sections import label_sections
from evidence.ingest.spans import extract_spans
from evidence.ingest.spl import NS, is_spl, parse_spl
from evidence.records import SpanType

SAMPLE = (Path(__file__).parent / "data" / "spl-sample.xml").read_bytes()


def test_sections_keep_their_codes_levels_and_text() -> None:
    doc = parse_spl(SAMPLE, "label.xml")
    assert doc.fmt == "spl"
    assert [(s.name, s.level, s.code) for s in doc.sections] == [
        ("1 INDICATIONS AND USAGE", 1, "34067-9"),
        ("2 DOSAGE AND ADMINISTRATION", 1, "34068-7"),
        ("2.1 Recommended Dosage", 2, "42229-5"),
        ("4 CONTRAINDICATIONS", 1, "34070-3"),
        ("12 CLINICAL PHARMACOLOGY", 1, "34090-1"),
        ("12.3 Pharmacokinetics", 2, "43682-4"),
        ("16 HOW SUPPLIED/STORAGE AND HANDLING", 1, "34069-5"),
    ]
    for s in doc.sections:
        assert doc.text[s.char_start :].startswith(s.name)
    labels = label_sections(doc.sections)
    assert [lab.canonical for lab in labels] == [
        "indications", "dosage", "dosage", "contraindications", "pharmacology", "pharmacokinetics", "storage",
    ]  # fmt: skip


def test_product_names_are_the_subject_and_the_title() -> None:
    doc = parse_spl(SAMPLE, "label.xml")
    assert doc.subject == ("Lipravex", "ferlostatin calcium")
    assert doc.title == "Lipravex (ferlostatin calcium)"


def test_lists_tables_and_captions_become_spans_and_highlights_are_left_out() -> None:
    doc = parse_spl(SAMPLE, "label.xml")
    spans = extract_spans(doc)
    by_type: dict[SpanType, list[str]] = {}
    for sp in spans:
        assert doc.text[sp.char_start : sp.char_end] == sp.text
        by_type.setdefault(sp.span_type, []).append(sp.text)
    assert "- Concomitant use with gemfibrozil." in by_type[SpanType.BULLET]
    assert "| Adults of Asian ancestry | 5 mg once daily | 20 mg once daily |" in by_type[SpanType.TABLE_ROW]
    assert "Table 1: Recommended Dosage of LIPRAVEX by Patient Population" in by_type[SpanType.CAPTION]
    # inline markup flattened, the footnote out of the sentence it is attached to: its own
    # paragraph after the paragraph
    assert (
        "The terminal elimination half-life (t1/2) of ferlostatin is approximately 19 hours."
        in by_type[SpanType.SENTENCE]
    )
    assert "19 hours.Geometric" not in doc.text
    assert "Ferlostatin is 96% bound to plasma proteins.\n\nGeometric mean." in doc.text
    assert "(1)" not in doc.text  # the highlights excerpt
    assert "product data elements" not in doc.text.lower()
    assert "Store at 20°C to 25°C (68°F to 77°F)." in doc.text


def test_is_spl_sniffs_the_namespace() -> None:
    assert is_spl(SAMPLE)
    assert not is_spl(b"<html><body>x</body></html>")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa">]><document xmlns="urn:hl7-org:v3"/>', "DTD"),
        (b"<document xmlns='urn:hl7-org:v3'><component>", "malformed XML"),
        (b"<other/>", "not an SPL document"),
        (b"<document xmlns='urn:hl7-org:v3'/>", "structuredBody"),
        (
            b"<document xmlns='urn:hl7-org:v3'><component><structuredBody/></component></document>",
            "empty document",
        ),
    ],
)
def test_bad_input_is_a_parse_error_naming_the_file(data: bytes, reason: str) -> None:
    with pytest.raises(DocumentParseError, match=reason) as info:
        parse_spl(data, "bad.xml")
    assert info.value.source == "bad.xml"


def test_parse_bytes_recognises_spl_by_extension_content_type_and_content() -> None:
    from evidence.ingest import parse_bytes

    for kw in (
        {"filename": "label.xml"},
        {"filename": "upload", "content_type": "application/xml"},
        {"filename": "blob"},
    ):
        doc = parse_bytes(SAMPLE, **kw)
        assert doc.fmt == "spl" and doc.subject == ("Lipravex", "ferlostatin calcium")
    with pytest.raises(DocumentParseError, match="not FDA Structured Product Labeling"):
        parse_bytes(b"<?xml version='1.0'?><catalog><book/></catalog>", filename="books.xml")


_BULLETS = b"""<document xmlns="urn:hl7-org:v3"><component><structuredBody><component><section>
<code code="34071-1"/><title>5 WARNINGS</title><text><list listType="unordered">
<item><caption>\xe2\x80\xa2</caption>Take with food.</item>
<item><caption>a)</caption>Avoid alcohol.</item>
<item>Stop if a rash appears<list><item>including a mild one</item></list> and call your doctor.</item>
</list></text></section></component></structuredBody></component></document>"""


def test_list_items_keep_the_text_after_a_caption_or_a_nested_list() -> None:
    # ElementTree keeps the words after an element in its tail: removing the caption (a drawn
    # bullet) or a nested list must not take the item's own text with it.
    text = parse_spl(_BULLETS, "bullets.xml").text
    assert "- Take with food." in text  # a bullet glyph caption is the marker, not a label
    assert "- a) Avoid alcohol." in text
    assert "- Stop if a rash appears and call your doctor." in text
    assert "  - including a mild one" in text


def test_table_and_paragraph_footnotes_are_kept_after_their_block() -> None:
    # Drug-label tables carry facts in footnotes ("Abnormal Vision: Mild to moderate in severity
    # ..."); they were dropped with the media. Each is a paragraph after its table or paragraph,
    # never inside a cell or a sentence.
    xml = f"""<document xmlns="{NS}"><component><structuredBody>
      <component><section><code code="34084-4"/><title>6 ADVERSE REACTIONS</title><text>
        <table><tbody>
          <tr><td>Abnormal vision<footnote ID="a">Mild and transient, predominantly color tinge
            to vision.</footnote></td><td>3%</td></tr>
        </tbody></table>
        <paragraph>Take it with water.<footnote ID="b">Or with milk.</footnote> Do not chew.</paragraph>
      </text></section></component>
    </structuredBody></component></document>""".encode()
    doc = parse_spl(xml, "label.xml")
    assert "| Abnormal vision | 3% |" in doc.text
    assert "| 3% |\n\nMild and transient, predominantly color tinge to vision." in doc.text
    assert "Take it with water. Do not chew.\n\nOr with milk." in doc.text
    spans = {sp.text for sp in extract_spans(doc)}
    assert "Mild and transient, predominantly color tinge to vision." in spans
