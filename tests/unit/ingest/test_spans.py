from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence.ingest import extract_spans, parse_text, split_sentences
from evidence.ingest.spans import split_long
from evidence.records import ParsedDocument, Section, SpanType


def sentences(text: str) -> list[str]:
    return [s.text for s in extract_spans(ParsedDocument(text=text))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It works. It still works.", ["It works.", "It still works."]),
        ("Use a buffer, e.g. Tris. Then wash.", ["Use a buffer, e.g. Tris.", "Then wash."]),
        (
            "Some drugs, i.e. NSAIDs, interact. Others do not.",
            ["Some drugs, i.e. NSAIDs, interact.", "Others do not."],
        ),
        ("Dr. Smith and Mrs. Jones agreed. We did too.", ["Dr. Smith and Mrs. Jones agreed.", "We did too."]),
        (
            "As shown in Fig. 3 the curve rises. It then falls.",
            ["As shown in Fig. 3 the curve rises.", "It then falls."],
        ),
        (
            "Smith et al. Showed this first. Later work agreed.",
            ["Smith et al. Showed this first.", "Later work agreed."],
        ),
        (
            "The half-life is 3.5 hours. Peak is at 1.2 h.",
            ["The half-life is 3.5 hours.", "Peak is at 1.2 h."],
        ),
        ("J. R. Smith wrote it. He was right.", ["J. R. Smith wrote it.", "He was right."]),
        (
            "Patients lacked vitamin D. Supplements helped.",
            ["Patients lacked vitamin D.", "Supplements helped."],
        ),
        ("Values were 4.2 +/- 0.3 mg. Ranges varied.", ["Values were 4.2 +/- 0.3 mg.", "Ranges varied."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        (
            "The effect was large (p < 0.01). The control was not.",
            ["The effect was large (p < 0.01).", "The control was not."],
        ),
        ("Was it safe? Yes! It was.", ["Was it safe?", "Yes!", "It was."]),
        ("Levels fell. mRNA levels rose.", ["Levels fell.", "mRNA levels rose."]),
        ("It rose in 2010. 25 patients died.", ["It rose in 2010.", "25 patients died."]),
        ("See No. 5 for details. Done.", ["See No. 5 for details.", "Done."]),
        ("This is the end. and lower case follows.", ["This is the end. and lower case follows."]),
        (
            "Effects (see Fig. 2. Left panel) were small. Good.",
            ["Effects (see Fig. 2. Left panel) were small.", "Good."],
        ),
        ("The U.S. Army and the U.K. Navy. They met.", ["The U.S. Army and the U.K. Navy.", "They met."]),
        ("Wait... Then go.", ["Wait...", "Then go."]),
        ("No terminal punctuation", ["No terminal punctuation"]),
    ],
)
def test_sentence_splitter(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_split_sentences_is_contiguous() -> None:
    text = "One. Two.  Three?"
    parts = split_sentences(text)
    assert parts[0][0] == 0
    assert parts[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))


def test_hard_wrapped_paragraph_is_one_prose_run() -> None:
    text = "The patient was\ngiven 5 mg daily. She\nrecovered."
    assert sentences(text) == ["The patient was\ngiven 5 mg daily.", "She\nrecovered."]


def test_line_types_and_sequences() -> None:
    text = (
        "Intro sentence one. Intro two.\n"
        "\n"
        "- dash bullet\n"
        "* star bullet\n"
        "\u2022 round bullet\n"
        "\u25e6 hollow bullet\n"
        "1. numbered\n"
        "a) lettered\n"
        "(ii) roman\n"
        "\n"
        "| Drug | Dose |\n"
        "|------|:----:|\n"
        "| A | 5 mg. Twice. |\n"
        "\n"
        "Figure 2: Kaplan-Meier curves. Second sentence of caption.\n"
        "Table 3. Baseline characteristics\n"
        "Fig. 4 - Survival\n"
        "Figure 5 shows the trend. That is prose.\n"
    )
    spans = extract_spans(ParsedDocument(text=text))
    got = [(s.span_type, s.text) for s in spans]
    assert got == [
        (SpanType.SENTENCE, "Intro sentence one."),
        (SpanType.SENTENCE, "Intro two."),
        (SpanType.BULLET, "- dash bullet"),
        (SpanType.BULLET, "* star bullet"),
        (SpanType.BULLET, "\u2022 round bullet"),
        (SpanType.BULLET, "\u25e6 hollow bullet"),
        (SpanType.BULLET, "1. numbered"),
        (SpanType.BULLET, "a) lettered"),
        (SpanType.BULLET, "(ii) roman"),
        (SpanType.TABLE_ROW, "| Drug | Dose |"),
        (SpanType.TABLE_ROW, "| A | 5 mg. Twice. |"),
        (SpanType.CAPTION, "Figure 2: Kaplan-Meier curves. Second sentence of caption."),
        (SpanType.CAPTION, "Table 3. Baseline characteristics"),
        (SpanType.CAPTION, "Fig. 4 - Survival"),
        (SpanType.SENTENCE, "Figure 5 shows the trend."),
        (SpanType.SENTENCE, "That is prose."),
    ]
    assert [s.sequence for s in spans] == list(range(len(spans)))
    for s in spans:
        assert text[s.char_start : s.char_end] == s.text


def test_a_caption_whose_title_is_set_apart_by_spaces_is_a_caption() -> None:
    """PDF labels put the title after the number with spaces, no separator (session 45, H3)."""
    text = (
        "Table 11 Pharmacokinetic Properties of the Drug\n"
        "| Tmax (h) | 0.67 |\n"
        "\n"
        "Table 1    Recommended Dilution Instructions\n"
        "\n"
        "Table 2 summarizes the reactions. Figure 3 shows the curves. See Table 9, and Table 10.\n"
    )
    spans = extract_spans(ParsedDocument(text=text))
    assert [(s.span_type, s.text) for s in spans] == [
        (SpanType.CAPTION, "Table 11 Pharmacokinetic Properties of the Drug"),
        (SpanType.TABLE_ROW, "| Tmax (h) | 0.67 |"),
        (SpanType.CAPTION, "Table 1    Recommended Dilution Instructions"),
        (SpanType.SENTENCE, "Table 2 summarizes the reactions."),
        (SpanType.SENTENCE, "Figure 3 shows the curves."),
        (SpanType.SENTENCE, "See Table 9, and Table 10."),
    ]


def test_pipe_table_without_outer_pipes() -> None:
    text = "Drug | Dose\n--- | ---\nA | 5 mg\nB | 10 mg\n\nAfter."
    spans = extract_spans(ParsedDocument(text=text))
    assert [(s.span_type, s.text) for s in spans] == [
        (SpanType.TABLE_ROW, "Drug | Dose"),
        (SpanType.TABLE_ROW, "A | 5 mg"),
        (SpanType.TABLE_ROW, "B | 10 mg"),
        (SpanType.SENTENCE, "After."),
    ]


def test_wrapped_bullets_continue() -> None:
    text = (
        "- first item that wraps\n  onto an indented line\n- second item that\nwraps in PDF text\nNew prose."
    )
    spans = extract_spans(ParsedDocument(text=text))
    assert [s.text for s in spans] == [
        "- first item that wraps\n  onto an indented line",
        "- second item that\nwraps in PDF text",
        "New prose.",
    ]


def test_rules_and_fences_are_not_spans() -> None:
    text = "Para one.\n\n---\n\n***\n\n```python\nx = 1. Y = 2\n```\n"
    texts = sentences(text)
    assert texts == ["Para one.", "x = 1. Y = 2"]  # code is one span per line


def test_a_tilde_underline_is_a_heading_underline_not_a_code_fence() -> None:
    # reStructuredText-style plain text (standards, manuals) underlines headings with "~": read as
    # a fence, every wrapped line after it became a span of its own.
    text = (
        "6.3. Controlling terminal\n~~~~~~~~~~~~~~~~~~~~~~~~~\n\nScripts are not guaranteed to run\n"
        "with a terminal. They must fall\nback.\n\n~~~\ncode line one\ncode line two\n~~~\n"
    )
    texts = sentences(text)
    assert "Scripts are not guaranteed to run\nwith a terminal." in texts
    assert "They must fall\nback." in texts
    assert "code line one" in texts and "code line two" in texts  # a real fence stays line by line
    assert not any("~" in t for t in texts)


def test_sections_and_pages_on_spans() -> None:
    text = "HEAD\nAlpha one. Alpha two.\n\nOTHER\nBeta one."
    head = Section("HEAD", 0, text.index("OTHER"))
    other = Section("OTHER", text.index("OTHER"), len(text))
    doc = ParsedDocument(text=text, sections=(head, other), page_starts=(0, text.index("OTHER")), fmt="pdf")
    spans = extract_spans(doc)
    assert [(s.text, s.section, s.page) for s in spans] == [
        ("Alpha one.", "HEAD", 1),
        ("Alpha two.", "HEAD", 1),
        ("Beta one.", "OTHER", 2),
    ]


def test_span_before_first_section_has_empty_section() -> None:
    doc = parse_text("Preamble here.\n\n# Title\n\nBody.", filename="x.md", fmt="md")
    spans = extract_spans(doc)
    assert [(s.text, s.section) for s in spans] == [("Preamble here.", ""), ("Body.", "Title")]


def test_long_sentence_is_split_at_semicolons_then_commas() -> None:
    clause = "The measured concentration rose steadily across every cohort we examined"
    long = "; ".join([clause] * 30) + "."
    doc = ParsedDocument(text="Short start. " + long + " Short end.")
    spans = extract_spans(doc)
    assert spans[0].text == "Short start."
    assert spans[-1].text == "Short end."
    middle = spans[1:-1]
    assert len(middle) >= 2
    assert all(len(s.text) <= 1000 for s in spans)
    assert all(s.text.endswith((";", ".")) for s in middle)
    # nothing lost: the pieces tile the long sentence apart from the separating spaces
    joined = " ".join(s.text for s in middle)
    assert joined == long


def test_split_long_never_cuts_words_when_spaces_exist() -> None:
    text = " ".join(["word"] * 600)
    pieces = split_long(text, 0, len(text), 100)
    assert all(text[a:b].split() == ["word"] * len(text[a:b].split()) for a, b in pieces)
    assert all(b - a <= 100 for a, b in pieces)


def test_spans_without_letters_or_digits_are_dropped() -> None:
    assert sentences("... !!! \n| | |\n- \n***") == []


# --- properties ------------------------------------------------------------------------------

_alphabet = st.sampled_from(
    [
        *"abcXYZ019 .,;:!?()\"'|-*\u2022\n\t\r",
        "e.g.",
        "Dr.",
        "Fig. 2",
        "3.5",
        "\n\n",
        "| a | b |\n",
        "- item\n",
        "Figure 1: cap\n",
        "# H\n",
        "\u00e9",
        "\u4e2d",
    ]
)
texts = st.lists(_alphabet, max_size=200).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_span_offsets_always_exact(text: str) -> None:
    for fmt in ("txt", "md"):
        doc = ParsedDocument(text=text, fmt=fmt)
        if fmt == "md" and text.strip():
            doc = parse_text(text, filename="p.md", fmt="md")
        spans = extract_spans(doc)
        assert [s.sequence for s in spans] == list(range(len(spans)))
        last_end = 0
        for s in spans:
            assert doc.text[s.char_start : s.char_end] == s.text
            assert s.text == s.text.strip()
            assert s.text
            assert s.char_start >= last_end  # in order, never overlapping
            last_end = s.char_end


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400), st.integers(min_value=20, max_value=200))
def test_split_long_tiles_without_loss(text: str, max_chars: int) -> None:
    a, b = 0, len(text)
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    pieces = split_long(text, a, b, max_chars)
    assert all(x < y for x, y in pieces)
    assert all(y - x <= max_chars for x, y in pieces)
    non_space = "".join(ch for ch in text[a:b] if not ch.isspace())
    assert "".join(ch for x, y in pieces for ch in text[x:y] if not ch.isspace()) == non_space


def test_wrapped_line_starting_with_genus_initial_is_not_a_bullet() -> None:
    text = "Cultures of\nV. cholerae grew. X. laevis\nwas used too."
    assert sentences(text) == ["Cultures of\nV. cholerae grew.", "X. laevis\nwas used too."]


def test_pathological_paragraph_stays_linear() -> None:
    import time

    text = "(" + "(a. B) " * 40_000  # 280k chars, one unclosed parenthesis, 40k candidate periods
    # CPU time of this thread (a busy machine preempts the run without charging it): the
    # quadratic version took minutes, the linear one well under a second.
    started = time.thread_time()
    spans = extract_spans(ParsedDocument(text=text))
    assert time.thread_time() - started < 3.0
    for s in spans:
        assert text[s.char_start : s.char_end] == s.text
        assert len(s.text) <= 1000


def test_bullet_with_open_parenthesis_continues_on_next_line() -> None:
    text = (
        "\u2022 maps (from XML (namespaceURI, localName) pairs to\nMIME types) (see\nSection 3)\n\u2022 next"
    )
    spans = extract_spans(ParsedDocument(text=text))
    assert [s.text for s in spans] == [
        "\u2022 maps (from XML (namespaceURI, localName) pairs to\nMIME types) (see\nSection 3)",
        "\u2022 next",
    ]


def test_paragraph_long_bullet_is_sentence_split_but_keeps_its_type() -> None:
    body = " ".join(
        f"{n}. Finding number {n} was replicated in a second independent cohort of patients."
        for n in range(1, 9)
    )
    spans = extract_spans(ParsedDocument(text=body))
    assert len(body) > 400
    assert [s.text for s in spans] == [
        f"{n}. Finding number {n} was replicated in a second independent cohort of patients."
        for n in range(1, 9)
    ]
    assert all(s.span_type is SpanType.BULLET for s in spans)
    assert all(len(s.text) < 120 for s in spans)
    short = extract_spans(ParsedDocument(text="- Keep cold. Do not freeze."))
    assert [s.text for s in short] == ["- Keep cold. Do not freeze."]


def test_a_numbered_clause_wrapped_at_its_numbers_column_continues() -> None:
    # Plain-text licences wrap a numbered clause at (or left of) its number's column: a line that
    # ends on an article or a preposition stops mid-phrase, so the next line is the same item, even
    # with a capital ("… of this" / "Package."); a line ending on a noun still ends the item.
    text = (
        "5. You may charge a reasonable copying fee for any distribution of this\n"
        "Package.  You may charge any fee.\n"
        "  6. A program that contains no derivative of any portion of the\n"
        "Library is called a work that uses the Library.\n"
        "- an item that ends on a noun\nNew prose.\n"
        "- Sign in\nThe account page lists your keys.\n"
        "1. Turn the power on\nThe light goes green."
    )
    texts = [s.text for s in extract_spans(ParsedDocument(text=text))]
    assert texts == [
        "5. You may charge a reasonable copying fee for any distribution of this\n"
        "Package.  You may charge any fee.",
        "6. A program that contains no derivative of any portion of the\n"
        "Library is called a work that uses the Library.",
        "- an item that ends on a noun",
        "New prose.",
        # a phrasal verb's particle ends a statement: the capitalised line is a new one
        "- Sign in",
        "The account page lists your keys.",
        "1. Turn the power on",
        "The light goes green.",
    ]


def test_html_br_lines_of_a_listing_are_spans_of_their_own() -> None:
    """Each <br> line of an address or a changelog is one span; a sentence wrapped with <br> stays
    one sentence. (A <pre> block's lines are not split: that cost answers, ingest13.md.)"""
    from evidence.ingest import chunk_document, parse_bytes
    from evidence.records import ChunkKind

    page = (
        "<html><body><h1>Manual</h1><p>Its output looks like this:</p>"
        "<pre>==1234== Memcheck, a memory error detector\n==1234== Copyright (C) 2002-2017\n"
        "==1234== Command: ./prog\n</pre>"
        "<p>Acme Corporation<br>100 Main Street<br>Springfield, IL 62701</p>"
        "<p>The tablets are taken with<br>food. They last a day.<br>Keep them dry.</p>"
        "<ul><li>- fixed the parser<br>- added an option</li></ul></body></html>"
    )
    doc = parse_bytes(page.encode(), filename="manual.html")
    chunks = chunk_document(doc, document_id="d", source="manual.html", metadata={})
    spans = [c.text for c in chunks.chunks if c.kind is ChunkKind.SPAN]
    for line in (
        "Acme Corporation",
        "100 Main Street",
        "Springfield, IL 62701",
        "The tablets are taken with\nfood.",
        "Keep them dry.",
        "- - fixed the parser",
        "- added an option",
    ):
        assert line in spans


def test_cjk_full_stops_and_marks_end_sentences_without_a_space_after_them() -> None:
    # Japanese and Chinese put no space after their full stop, exclamation and question marks: a
    # paragraph of them was one span.
    text = (
        "本書は試験用の文書です。利用者は「本条件」に同意したものとみなします。」"
        "質問がありますか\uff1fあります\uff01\n\n这是第一句。这是第二句｡ English follows. Then more."
    )
    assert sentences(text) == [
        "本書は試験用の文書です。",
        "利用者は「本条件」に同意したものとみなします。」",
        "質問がありますか\uff1f",
        "あります\uff01",
        "这是第一句。",
        "这是第二句｡",
        "English follows.",
        "Then more.",
    ]


def test_bug_tracker_lines_of_a_news_list_are_items() -> None:
    """A NEWS file's list of fixed bugs has no bullet marks and no full stops: each line opening
    with a tracker id is one item (its wrapped, indented line with it), not a slice of one run."""
    bracketed = "\n".join(
        f"  [{10000 + i}] widget: frobnicator loses state number {i} when the queue\n    is drained"
        for i in range(12)
    )
    spans = [s.text for s in extract_spans(ParsedDocument(text=bracketed))]
    assert len(spans) == 12
    assert spans[3] == "[10003] widget: frobnicator loses state number 3 when the queue\n    is drained"
    columns = "\n".join(f"{300100 + i}  gizmo: unhandled opcode 0x{i:02X} in the decoder" for i in range(15))
    spans = [s.text for s in extract_spans(ParsedDocument(text=columns))]
    assert len(spans) == 15 and spans[0] == "300100  gizmo: unhandled opcode 0x00 in the decoder"


def test_footnote_marks_and_prose_numbers_stay_prose() -> None:
    """A footnote mark is a small number and a year inside wrapped prose has one space after it:
    neither opens an item."""
    text = "The rule was set in\n2005 by the board and\n[2] kept since then by all members."
    assert sentences(text) == [text]


def test_box_drawing_border_lines_end_a_span() -> None:
    """A protocol's request frames are drawn with box-drawing borders: a border line ends the
    frame's span, so the text after one frame does not run on into the next."""
    top, bottom = "\u250c\u2500\u2500\u2500", "\u2514\u2500\u2500\u2500"
    frame = f"{top}\n    FooQueryThing\n\t1\tCARD8\t\tmajor opcode\n\t2\t3\t\tlength\n{bottom}"
    text = f"{frame}\n\tErrors: Window, Match\n{frame.replace('Query', 'Select')}\n\tErrors: Value"
    assert sentences(text) == [
        "FooQueryThing\n\t1\tCARD8\t\tmajor opcode\n\t2\t3\t\tlength",
        "Errors: Window, Match",
        "FooSelectThing\n\t1\tCARD8\t\tmajor opcode\n\t2\t3\t\tlength",
        "Errors: Value",
    ]
    # a box-drawing glyph inside a line of text is no border
    assert sentences("The states are \u2500\u2500\u2500 shown below\nin order.") == [
        "The states are \u2500\u2500\u2500 shown below\nin order."
    ]
