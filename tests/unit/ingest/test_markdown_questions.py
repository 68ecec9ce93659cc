"""A Markdown heading that is a question stays a fact span (issue 22: an FAQ's or a medication
guide's questions are what a reader asks)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes

GUIDE = b"""# Kettlex guide

## What is Kettlex?

Kettlex is a made-up medicine for headaches.

## How should I take Kettlex? ##

Take one tablet daily.

Can I drink tea with it?
------------------------

Yes.

## Dosage

One tablet a day.
"""


def test_a_question_heading_is_a_span_without_its_marks_and_other_headings_are_not() -> None:
    doc = parse_bytes(GUIDE, filename="guide.md")
    assert [s.name for s in doc.sections] == [
        "Kettlex guide",
        "What is Kettlex?",
        "How should I take Kettlex?",
        "Can I drink tea with it?",
        "Dosage",
    ]
    spans = [s.text for s in extract_spans(doc)]
    assert "What is Kettlex?" in spans
    assert "How should I take Kettlex?" in spans
    assert "Can I drink tea with it?" in spans
    assert not any(s.startswith("#") for s in spans)
    assert "Dosage" not in spans and "Kettlex guide" not in spans
    assert "Kettlex is a made-up medicine for headaches." in spans
