"""An ATX heading that opens a list item is a heading (issue 22: terms of service whose numbered
clauses are "1. #### Introduction" inside an ordered list kept the whole list in one section)."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes

TERMS = b"""# Frobnix Terms

## Terms

1. #### Introduction

    These terms govern your use of Frobnix, a made-up kettle service.

2. #### Fees

    (a) The monthly fee is 4 crowns.

    (b) Fees are due on the first day of the month.

- ## Contact

    Write to the kettle office.

3. A plain item that is no heading.

4. #Hashtag is no heading either.
"""


def test_a_heading_opening_a_list_item_heads_its_section_named_with_its_number() -> None:
    doc = parse_bytes(TERMS, filename="terms.md")
    assert [(s.name, s.level) for s in doc.sections] == [
        ("Frobnix Terms", 1),
        ("Terms", 2),
        ("1. Introduction", 4),
        ("2. Fees", 4),
        ("Contact", 2),
    ]
    fees = next(s for s in doc.sections if s.name == "2. Fees")
    assert "monthly fee is 4 crowns" in doc.text[fees.char_start : fees.char_end]
    spans = [s.text for s in extract_spans(doc)]
    # the heading line is no fact; the clause text is
    assert not any("####" in s for s in spans)
    assert "(a) The monthly fee is 4 crowns." in spans
