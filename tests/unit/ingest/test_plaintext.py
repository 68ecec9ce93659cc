"""Plain text gets structure: numbered clauses, ALL-CAPS and underlined headings (issue 22 item 4)."""

from __future__ import annotations

import textwrap

from evidence.ingest.parsers import parse_bytes, parse_text
from evidence.ingest.spans import extract_spans

CONTRACT = """SERVICE AGREEMENT

This Agreement is made between the Provider and the Customer.

1. Definitions.
"Service" means the hosted software described in Schedule A.

2. Fees and Payment. The Customer pays the fees in Schedule B within 30 days of each invoice.
Late payments bear interest at 1% per month.

2.1 Taxes. Fees exclude taxes.

8. Termination. Either party may terminate this Agreement on 60 days' written notice.

LIMITATION OF LIABILITY

THE PROVIDER IS NOT LIABLE FOR INDIRECT DAMAGES,
LOST PROFITS OR LOST DATA.

Governing Law
-------------

This Agreement is governed by the laws of Ontario.
"""


def _names(text: str) -> list[tuple[int, str]]:
    return [(s.level, s.name) for s in parse_text(text, filename="a.txt").sections]


def test_numbered_clauses_caps_and_underlined_headings_become_sections() -> None:
    assert _names(CONTRACT) == [
        (1, "SERVICE AGREEMENT"),
        (2, "1. Definitions"),
        (2, "2. Fees and Payment"),
        (3, "2.1 Taxes"),
        (2, "8. Termination"),
        (1, "LIMITATION OF LIABILITY"),
        (2, "Governing Law"),
    ]


def test_a_clause_heading_that_runs_on_keeps_its_sentence_as_a_span() -> None:
    doc = parse_text(CONTRACT, filename="a.txt")
    spans = {s.text: s.section for s in extract_spans(doc)}
    sentence = "Either party may terminate this Agreement on 60 days' written notice."
    assert any(sentence in t and sec == "8. Termination" for t, sec in spans.items())
    assert any("30 days of each invoice" in t and sec == "2. Fees and Payment" for t, sec in spans.items())
    # A heading line alone is not a fact; the all-caps disclaimer under a heading is.
    assert "LIMITATION OF LIABILITY" not in spans
    assert any(t.startswith("THE PROVIDER IS NOT LIABLE") for t in spans)
    assert all(doc.text[s.char_start : s.char_end] == s.text for s in extract_spans(doc))


def test_prose_numbers_and_caps_paragraphs_are_not_headings() -> None:
    text = (
        "Take the tablets as follows.\n\n1. Take one tablet with water.\n2. Wait two hours.\n\n"
        "3 tablets were taken daily.\n\nTHE SOFTWARE IS PROVIDED AS IS, WITHOUT WARRANTY\n"
        "OF ANY KIND.\n"
    )
    assert _names(text) == []


def test_one_numbered_line_is_not_a_structure() -> None:
    assert _names("Intro text.\n\n1. Scope\n\nThe rest.\n") == []


def test_the_first_short_line_is_the_title_unless_given() -> None:
    doc = parse_bytes(b"  Example Public License\n  Version 1.0\n\nText here.\n", filename="l.txt")
    assert doc.title == "Example Public License"
    assert parse_text("Intro text that is a sentence.\n", filename="a.txt", title="Given").title == "Given"


def test_a_question_or_labelled_first_line_is_not_a_title() -> None:
    for text in ("Q: Do you encrypt data at rest?\nA: Yes.\n", "Note: keys rotate yearly\nMore text.\n"):
        assert parse_text(text, filename="f.txt").title == ""


LICENCE_CLAUSES = """LICENSE

1. Definitions.

     1.1. "Covered Code" means the Original Code.

4. Inability to Comply Due to Statute or Regulation.

     If it is impossible for You to comply with any of the terms of this
     License, You must comply to the maximum extent possible.

5. Application of this License.

     This License applies to code to which the Initial Developer has
     attached the notice in Exhibit A.

9. LIMITATION OF LIABILITY.

     UNDER NO CIRCUMSTANCES SHALL THE INITIAL DEVELOPER BE LIABLE.

10. U.S. GOVERNMENT END USERS.

     The Covered Code is a "commercial item," as that term is defined in
     48 C.F.R. 2.101 (Oct. 1995). Consistent with 48
     C.F.R. 12.212 and 48 C.F.R. 227.7202-1 (June 1995), all U.S.
     Government End Users acquire Covered Code with only those rights.

11. MISCELLANEOUS.

     This License represents the complete agreement.
"""


def test_dot_ended_clause_titles_over_an_indented_body_and_initialisms_are_sections() -> None:
    # MPL 1.1 (an audit document): "5. Application of this License." (lower-case words, a closing
    # dot) and "10. U.S. GOVERNMENT END USERS." (an initialism's dots) were not sections, so clause
    # 5 read as part of clause 4 and clause 10 of clause 9.
    doc = parse_text(LICENCE_CLAUSES, filename="l.txt")
    names = [s.name for s in doc.sections]
    assert "5. Application of this License" in names
    assert "10. U.S. GOVERNMENT END USERS" in names
    assert not any("C.F.R" in n for n in names)  # "C.F.R. 12.212 …" is not Roman numeral C
    ten = next(s for s in doc.sections if s.name.startswith("10."))
    assert "commercial item" in doc.text[ten.char_start : ten.char_end]


def test_a_dot_ended_list_item_or_sentence_is_not_a_clause_title() -> None:
    steps = (
        "1. Scope\n\nThe steps follow.\n\n2. Procedure\n\n"
        "3. The package's files are removed.\n\n   4. postrm remove\n\n   It runs last.\n\n"
        "4. The fee is due within thirty days.\n\nLate fees apply after that.\n"
    )
    names = [s.name for s in parse_text(steps, filename="s.txt").sections]
    assert names == ["1. Scope", "2. Procedure"]


def test_addendum_exhibit_schedule_appendix_and_annex_headings_are_sections() -> None:
    """An attached part's heading standing alone is a section, with or without its letter or
    number and title; a sentence that opens with the word is not."""
    from evidence.ingest.parsers.plaintext import plaintext_headings

    text = (
        "TERMS OF SERVICE\n\n1. Definitions\n\nWords mean what they say.\n\n2. Fees\n\nFees are due.\n\n"
        "EXHIBIT A -Mozilla Public License.\n\n     The contents of this file are subject to it.\n\n"
        "ADDENDUM: How to use this License for your documents\n\nInclude a copy of the License.\n\n"
        "Schedule 1 \u2013 Fees\n\nThe fees are listed below.\n\nAPPENDIX B\n\nMore text.\n\n"
        "Exhibit A shows the layout of the building.\n\n"
        "Schedule 1. The customer pays the fees within thirty days.\n\n"
        "Appendix C: how the keys rotate\n"
    )
    names = [name for _, _, name in plaintext_headings(text)]
    for expected in (
        "EXHIBIT A -Mozilla Public License",
        "ADDENDUM: How to use this License for your documents",
        "Schedule 1 \u2013 Fees",
        "APPENDIX B",
    ):
        assert expected in names
    assert not any(n.startswith(("Exhibit A shows", "Schedule 1. The", "Appendix C")) for n in names)


def test_a_no_break_space_after_a_clause_number_still_makes_a_heading() -> None:
    """A DocBook chapter printed to text sets a no-break space after the number ("1.\u00a0
    Introduction"); the heading is read as with a space, and its offsets are the text's own."""
    text = (
        "Configuration\n\n1.\u00a0 Introduction\n\n   Configuration matters.\n\n"
        "2.\u00a0 Configuration data\n\n   The data is stored.\n\n"
        "  2.1.\u00a0 The configuration space\n\n   It is a tree.\n"
    )
    doc = parse_text(text, filename="spec.txt")
    assert [s.name for s in doc.sections][-3:] == [
        "1.  Introduction",
        "2.  Configuration data",
        "2.1.  The configuration space",
    ]
    assert doc.text == text
    assert text[doc.sections[-1].char_start :].startswith("2.1.\u00a0 The configuration space")


def test_a_contents_list_without_dot_leaders_makes_no_sections() -> None:
    """A contents list of numbered entries with blank lines between (no dot leaders, no page
    numbers) repeats the headings below it: its entries are no sections; the headings are, once,
    also where the body adds a keyword ("Chapter 2.") or the entry wraps."""
    text = (
        "Perl Policy\n\n   Table of Contents\n\n   1. Perl Packaging\n\n                1.1. Versions\n\n"
        "                1.2. Base Package and Other Architecture\n                Dependent Parts\n\n"
        "   2. Locally Installed Modules\n\n                2.1. Site Directories\n\n"
        "Chapter 1. Perl Packaging\n\n1.1. Versions\n\n   Perl is versioned.\n\n"
        "1.2. Base Package and Other Architecture Dependent Parts\n\n   The base package holds perl.\n\n"
        "Chapter 2. Locally Installed Modules\n\n2.1. Site Directories\n\n   Local modules go here.\n"
    )
    names = [s.name for s in parse_text(text, filename="policy.txt").sections]
    assert names == [
        "Chapter 1. Perl Packaging",
        "1.1. Versions",
        "1.2. Base Package and Other Architecture Dependent Parts",
        "Chapter 2. Locally Installed Modules",
        "2.1. Site Directories",
    ]


def test_the_last_item_of_a_numbered_list_is_no_heading() -> None:
    """A list's items run on line after line; the last one ("6. The Project Secretary.") reads
    like a clause heading but follows its sibling item with no blank line: an item, not a section.
    Clauses set the same way but each a heading ("2. Source Code" under "1. Free
    Redistribution" and its body) stay sections."""
    constitution = (
        "1. Introduction\n\n   The project decides.\n\n2. Decision-making bodies\n\n"
        "   Each decision is made by one of the following:\n"
        "    1. The Developers, by way of General Resolution or an election;\n"
        "    2. The Project Leader;\n"
        "    3. Delegates appointed by the Project Leader for specific tasks;\n"
        "    4. The Project Secretary.\n\n   Most of this document outlines their powers.\n\n"
        "3. Individual Developers\n\n   A developer may decide.\n"
    )
    names = [s.name for s in parse_text(constitution, filename="c.txt").sections]
    assert names == ["1. Introduction", "2. Decision-making bodies", "3. Individual Developers"]
    guidelines = (
        "    1. Free Redistribution\n       The licence may not restrict selling.\n"
        "    2. Source Code\n       The program must include source code.\n"
        "    3. Derived Works\n       The licence must allow modifications.\n"
    )
    names = [s.name for s in parse_text(guidelines, filename="g.txt").sections]
    assert names == ["1. Free Redistribution", "2. Source Code", "3. Derived Works"]


def test_a_flush_left_heading_may_open_with_a_quote() -> None:
    """Over an indented body, a short flush-left line is a heading also when it opens with a
    quotation mark ('"Social Contract" with the Free Software Community')."""
    body = "".join(f"   Line {k} of the indented body text of the document.\n" for k in range(24))
    text = body + '\n"Social Contract" with the Free Software Community\n\n' + body
    names = [s.name for s in parse_text(text, filename="sc.txt").sections]
    assert '"Social Contract" with the Free Software Community' in names


def test_an_appendix_letter_continues_the_numbering() -> None:
    """Under a lettered appendix, "A.2. Withdrawing ballot options" (sentence case) continues
    "A.1" as "4.2" continues "4.1"; and an appendix heading in sentence case after the last
    numbered section of the one before it ("Appendix B.  Use of the form media type" after
    "A.18") is one too."""
    text = (
        "1. Scope\n\n   Text.\n\n2. Terms\n\n   Text.\n\nA. Standard Resolution Procedure\n\n"
        "  A.1. Discussion and Amendment\n\n   Text.\n\n  A.2. Withdrawing ballot options\n\n   Text.\n\n"
        "  A.3. Calling for a vote\n\n   Text.\n\n"
        "Appendix B.  Use of the form media type\n\n   Text.\n"
    )
    names = [s.name for s in parse_text(text, filename="c.txt").sections]
    assert names[-4:] == [
        "A.1. Discussion and Amendment",
        "A.2. Withdrawing ballot options",
        "A.3. Calling for a vote",
        "Appendix B.  Use of the form media type",
    ]


def test_a_long_sentence_case_title_over_its_own_first_sub_number_is_a_heading() -> None:
    """A numbered title of nine to twelve words in sentence case is a heading where its next text
    line is its own first sub-number ("4. The Developers …" over "4.1. Powers"): a list item has
    none. The same title over a sibling item or over prose stays text."""
    text = (
        "1. Introduction\n\n   Text.\n\n2. Scope\n\n  2.1. Powers\n\n   Text.\n\n"
        "3. The Developers by way of General Resolution or election\n\n"
        "  3.1. Powers\n\n   Text.\n\n  3.2. Procedure\n\n   Text.\n\n"
        "4. The members who were elected at the last annual meeting\n\n"
        "   Text under it.\n\n"
        "5. Votes of the members who were elected at the last meeting\n\n"
        "6. Votes of the members who were appointed by the board later\n"
    )
    names = [s.name for s in parse_text(text, filename="c.txt").sections]
    assert "3. The Developers by way of General Resolution or election" in names
    assert (
        names.index("3.1. Powers")
        == names.index("3. The Developers by way of General Resolution or election") + 1
    )
    assert not any(n.startswith(("4.", "5.", "6.")) for n in names)


def test_numbered_prose_paragraphs_are_a_documents_clauses() -> None:
    """A licence whose clauses are numbered paragraphs of running prose, no title line over them
    ("  1. You may lend the Widget to a friend …"): each clause opens a section named by its number
    and first words, its text staying a span; a clause already a heading (ALL CAPS) stays one."""
    licence = (
        "WIDGET SHARING TERMS\n\n"
        "  0. These terms apply to any widget which carries a notice saying\n"
        "it may be shared under them.\n\n"
        "  1. You may lend the Widget to a friend, provided that you keep\n"
        "this notice on it.\n\n"
        "  2. You may paint the Widget any colour; a painted Widget is still\n"
        "a Widget for these terms.\n\n"
        "  3. THE WIDGET COMES WITH NO WARRANTY OF ANY KIND\n\n"
        "Thank you for sharing.\n"
    )
    doc = parse_text(licence, filename="terms.txt")
    assert [s.name for s in doc.sections] == [
        "WIDGET SHARING TERMS",
        "0. These terms apply to any widget which carries",
        "1. You may lend the Widget to a friend",
        "2. You may paint the Widget any colour",
        "3. THE WIDGET COMES WITH NO WARRANTY OF ANY KIND",
    ]
    spans = {s.text: s.section for s in extract_spans(doc)}
    lend = "1. You may lend the Widget to a friend, provided that you keep\nthis notice on it."
    assert spans[lend] == "1. You may lend the Widget to a friend"


def test_a_numbered_list_inside_a_numbered_section_or_of_one_liners_is_no_clause_run() -> None:
    """Numbered paragraphs under a numbered heading are that section's list, and a run of one-line
    items is a list: neither makes sections."""
    manual = (
        "1. Setup\n\nInstall it first.\n\n2. Steps\n\n"
        "  1. Open the lid and take the widget out of\nits box.\n\n"
        "  2. Turn the crank until the widget starts to\nhum quietly.\n\n"
        "  3. Close the lid when you are done with\nthe widget.\n"
    )
    assert [s.name for s in parse_text(manual, filename="m.txt").sections] == ["1. Setup", "2. Steps"]
    items = "Shopping\n\n1. Buy eggs today.\n\n2. Buy milk today.\n\n3. Buy bread today.\n\nThat is all.\n"
    assert [s.name for s in parse_text(items, filename="i.txt").sections] == []


def test_an_faq_question_standing_alone_is_a_heading_and_a_pilcrow_is_no_part_of_a_name() -> None:
    """An FAQ printed to text: each entry is a numbered question standing alone, some wrapped onto
    a second line that ends the question; a web page printed to text keeps the permalink's pilcrow
    after each heading ("2. Brewing¶"), which is no part of its name."""
    faq = (
        "1. Kettles\n\n    Kettles boil water.\n\n"
        "1.1. What is the best kettle for me?\n\n    A small one.\n\n"
        "1.2. Which kettle (electric/stove/campfire) is better\nfor me?\n\n    It depends on the kitchen.\n\n"
        "2. Brewing\u00b6\n\n    Brew for four minutes.\n"
    )
    names = [s.name for s in parse_text(faq, filename="faq.txt").sections]
    assert names == [
        "1. Kettles",
        "1.1. What is the best kettle for me?",
        "1.2. Which kettle (electric/stove/campfire) is better",
        "2. Brewing",
    ]


def test_each_agreement_of_a_licence_bundle_has_its_clause_run() -> None:
    """Several agreements one after another, each numbering its prose clauses from 1 under its own
    capitals title: every run is clauses."""
    one = (
        "  1. This agreement is between the Maker and the Borrower of\nthe widget.\n\n"
        "  2. The Borrower may use the widget at home and at\nwork alike.\n\n"
        "  3. The Maker gives the widget as it is, without any\npromise at all.\n\n"
    )
    bundle = "MAKER WIDGET AGREEMENT\n\n" + one + "SECOND MAKER AGREEMENT\n\n" + one
    names = [s.name for s in parse_text(bundle, filename="b.txt").sections]
    assert names.count("2. The Borrower may use the widget at home") == 2
    assert len(names) == 8


def test_an_faq_contents_list_neither_heads_sections_nor_breaks_the_numbering() -> None:
    """An FAQ printed to text opens with its contents: every entry numbered as its body's heading
    is, some wrapped, one in title case at the end ("2.1.2. Tools"). The entries are no sections,
    and the body's sentence-case questions continue their own numbering, not the contents'."""
    contents = (
        "Table of Contents\n\n"
        "1. Kettles and their care\n"
        "    1.1. What is the best kettle for me?\n"
        "    1.2. Which kettle (electric/stove/campfire) is better\n"
        "    for me?\n"
        "2. Brewing a pot of tea\n"
        "    2.1. How long should the tea brew?\n"
        "        2.1.1. Leaves\n"
        "        2.1.2. Tools\n\n"
    )
    body = (
        "Chapter 1. Kettles and their care\n\n"
        "1.1. What is the best kettle for me?\n\n    A small one with a lid.\n\n"
        "1.2. Which kettle (electric/stove/campfire) is better\nfor me?\n\n    It depends on the kitchen.\n\n"
        "Chapter 2. Brewing a pot of tea\n\n"
        "2.1. How long should the tea brew?\n\n    Four minutes for black tea.\n\n"
        "2.1.1. Leaves\n\n    Loose leaves brew best.\n\n"
        "2.1.2. Tools\n\n    A strainer and a pot.\n"
    )
    doc = parse_text(contents + body, filename="faq.txt")
    names = [s.name for s in doc.sections]
    assert names == [
        "Chapter 1. Kettles and their care",
        "1.1. What is the best kettle for me?",
        "1.2. Which kettle (electric/stove/campfire) is better",
        "Chapter 2. Brewing a pot of tea",
        "2.1. How long should the tea brew?",
        "2.1.1. Leaves",
        "2.1.2. Tools",
    ]
    assert doc.sections[0].char_start == len(contents)


def test_a_long_faq_question_wrapped_over_three_lines_is_a_heading() -> None:
    """A numbered question may run past a title's eight words and wrap onto two more lines, the
    last ending it: a heading standing alone all the same; a numbered sentence that is no question
    is not."""
    faq = (
        "1. Kettles\n\n    Kettles boil water.\n\n"
        "1.1. What is the difference between a stove kettle and an electric\n"
        "kettle? Why should I choose one over the other kind of\nkettle?\n\n    Speed.\n\n"
        "1.2. You said electric kettles are quicker, but mine is slow so\n"
        "what should I do?\n\n    Descale it.\n\n"
        "1.3. The kettle you sell is made of steel and has a lid and a handle\n\n    It does.\n\n"
        "2. Brewing\n\n    Brew for four minutes.\n"
    )
    names = [s.name for s in parse_text(faq, filename="faq.txt").sections]
    assert names == [
        "1. Kettles",
        "1.1. What is the difference between a stove kettle and an electric",
        "1.2. You said electric kettles are quicker, but mine is slow so",
        "2. Brewing",
    ]


def test_a_number_closed_by_a_parenthesis_numbers_a_heading() -> None:
    """A policy numbering its sections "1) Guarding use of the kettle" (sentence case, standing
    alone, its body indented): sections, as "1. …" would be."""
    text = (
        "Kettle policy\n\n"
        "1) Guarding use of the kettle\n\n   Any use must be guarded by a test.\n\n"
        "2) Flavour indication\n\n   Each kettle must name its flavour.\n\n"
        "3) Startup strategy\n\n   On startup each kettle must boil once.\n"
    )
    names = [s.name for s in parse_text(text, filename="policy.txt").sections]
    assert names == ["1) Guarding use of the kettle", "2) Flavour indication", "3) Startup strategy"]


def test_a_numbered_path_or_a_title_with_a_closing_aside_heads_its_section() -> None:
    """A policy whose fourth section is titled by a directory ("4) /srv/kettle/<flavour>/") and whose
    fifth runs long only by an aside in parentheses: both continue the numbering, so both are
    sections; a list of paths under a heading stays in its section."""
    text = (
        "Kettle policy\n\n"
        "1) Guarding use of the kettle\n\n   Any use must be guarded by a test.\n\n"
        "2) Flavour indication\n\n   Each kettle must name its flavour.\n\n"
        "3) Startup strategy\n\n   On startup each kettle must boil once.\n\n"
        "4) /srv/kettle/<flavour>/spout/\n\n   This directory holds the spouts.\n\n"
        "5) Kettle add-on support (the examples below should make this much clearer)\n\n"
        "   Each add-on must depend on the kettle.\n\n"
        "6) Mandatory lid\n\n   Every kettle has a lid.\n\n"
        "Paths\n\n1) /srv/one/\n\n2) /srv/two/\n"
    )
    names = [s.name for s in parse_text(text, filename="policy.txt").sections]
    assert names == [
        "1) Guarding use of the kettle",
        "2) Flavour indication",
        "3) Startup strategy",
        "4) /srv/kettle/<flavour>/spout/",
        "5) Kettle add-on support (the examples below should make this much clearer)",
        "6) Mandatory lid",
    ]


def test_title_case_lines_standing_alone_head_a_document_without_other_headings() -> None:
    """A licence whose parts are titled by Title Case lines standing alone over clauses numbered
    "(1)": with no other heading in the document, those lines are its sections; a document with
    only one such line (its title aside) has none."""
    text = (
        "The Kettle Licence 2.0\n\n    Copyright (c) 2000, The Kettle Foundation.\n\n"
        "Preamble\n\nThis licence sets the terms for a kettle.\n\n"
        'Definitions\n\n    "Kettle" means the vessel.\n\n'
        "Permissions for Use of the Standard Kettle\n\n"
        "(1)  You may use the kettle for any purpose.\n\n"
        "General Provisions\n\n(2)  Nothing here limits the brewer.\n"
    )
    names = [s.name for s in parse_text(text, filename="licence.txt").sections]
    assert names == [
        "Preamble",
        "Definitions",
        "Permissions for Use of the Standard Kettle",
        "General Provisions",
    ]
    one = "The Kettle Licence\n\nPreamble\n\nThis licence sets the terms for a kettle.\n"
    assert parse_text(one, filename="licence.txt").sections == ()


def test_a_long_faq_question_after_a_statement_is_named_by_the_question() -> None:
    """A long FAQ line opening on a statement before its question ("2.1  I want to sell kettles
    made to my own design in a shop of mine. Does this mean …?") is named by its number and the
    question (statements before it are its setting, not its name); the whole line stays spans."""
    q = (
        "2.1  I want to sell kettles made to my own design in a shop of mine. Some have spouts. "
        "Does this mean my kettles also have to be licensed?"
    )
    text = (
        "KETTLE FAQ\n\n1  SELLING KETTLES\n\n"
        "1.1  Can I sell a kettle?\nYes.\n\n"
        f"1.2  {q[5:]}\nNo. They stay yours.\n\n"
        "1.3  Must the kettle be new?\nNo.\n"
    )
    doc = parse_text(text, filename="faq.txt")
    names = [s.name for s in doc.sections]
    assert names[2:] == [
        "1.1  Can I sell a kettle?",
        "1.2 Does this mean my kettles also have to be licensed?",
        "1.3  Must the kettle be new?",
    ]
    spans = [s.text for s in extract_spans(doc)]
    assert "1.2  I want to sell kettles made to my own design in a shop of mine." in spans
    assert "Does this mean my kettles also have to be licensed?" in spans


def test_an_faq_question_right_over_its_answer_is_a_heading_however_long() -> None:
    """An FAQ setting each numbered question on one line, its answer right under it (no blank
    line), some questions longer than any title; the contents list's last entry is a lettered
    appendix. Every question is a section (a long one named by its first words, its line kept as a
    span), the numbering unbroken by the contents."""
    long_q = (
        "1.1  Can I use the kettle for a cafe or other public place, to boil water for tea or even "
        "to heat soup for the guests?"
    )
    text = (
        "KETTLE FAQ\n\nCONTENTS\n1  USING KETTLES\n2  CLEANING KETTLES\nAPPENDIX A - KETTLE LOG\n\n"
        "1  USING KETTLES\n\n"
        f"{long_q}\nYes. You are welcome to do so.\n\n"
        "1.1.1  Does that restrict the kettle?\nNo. It stays yours.\n\n"
        "1.1.2  Is any thanks required?\nNo, but it is welcome.\n\n"
        "2  CLEANING KETTLES\n\n"
        "2.1  How often should I descale it?\nOnce a month.\n\n"
        "APPENDIX A - KETTLE LOG\n\nA log of the kettle's changes.\n"
    )
    doc = parse_text(text, filename="faq.txt")
    names = [s.name for s in doc.sections]
    assert names == [
        "KETTLE FAQ",
        "1  USING KETTLES",
        long_q[: long_q.rfind(" ", 0, 100)].rstrip(" ,"),
        "1.1.1  Does that restrict the kettle?",
        "1.1.2  Is any thanks required?",
        "2  CLEANING KETTLES",
        "2.1  How often should I descale it?",
        "APPENDIX A - KETTLE LOG",
    ]
    assert any(s.text.startswith("1.1  Can I use the kettle") for s in extract_spans(doc))


def test_nroff_overstrikes_read_as_their_characters() -> None:
    """A manual printed by nroff without `col -b`: bold as "B\\bB", underline as "_\\bw". The
    heading is read (and named) by its words, and the text holds no backspace."""
    bold = "".join(f"{c}\b{c}" if c != " " else c for c in "1.  Basic Concepts")
    under = "".join(f"_\b{c}" for c in "manual")
    text = f"{bold}\n\n     Read the {under} first.\n\n2.  More Concepts\n\n     Then the rest.\n"
    doc = parse_text(text, filename="intro.txt")
    assert "\b" not in doc.text
    assert [s.name for s in doc.sections] == ["1.  Basic Concepts", "2.  More Concepts"]
    assert "Read the manual first." in doc.text


def test_a_long_numbered_title_with_a_file_name_over_an_indented_body_heads_its_section() -> None:
    """A policy's third section titled by a ten-word sentence naming a file ("… in the
    kettle-start.d files.") over a paragraph indented deeper: the dot of the file name ends no
    title and the title may run as long as a parent title, since it is the very next number; a
    long numbered sentence that skips numbers (6 after 3) or does not continue them stays prose."""
    text = (
        "Kettle policy\n\n"
        "1) Guarding use of the kettle\n\n   Any use must be guarded by a test.\n\n"
        "2) Kettle load path.\n\n   Each kettle must set its load path.\n\n"
        "3) Usage of autoload instead of load in the kettle-start.d files.\n\n"
        "   Maintainers should switch to autoload where they can.\n\n"
        "6) All the kettle scripts except the last one are then removed.\n\n"
        "   Nothing else is removed.\n\n"
        "Examples:\n\n"
        "2) Now assume that the kettle and its spout are not installed at all.\n\n"
        "   Then nothing is done.\n"
    )
    names = [s.name for s in parse_text(text, filename="policy.txt").sections]
    assert names == [
        "1) Guarding use of the kettle",
        "2) Kettle load path",
        "3) Usage of autoload instead of load in the kettle-start.d files",
    ]


def test_an_faq_question_heading_its_answer_stays_a_fact_span() -> None:
    """An FAQ's numbered question over its answer heads its section and is a span of its own too
    (a reader asks it); a heading that is no question is still left out of the spans."""
    text = (
        "KETTLE FAQ\n\n"
        "1.1  Can I use the kettle for soup?\nYes. Any liquid may be boiled in it.\n\n"
        "1.2  May I sell the kettle?\nNo. The kettle may not be sold by itself.\n"
    )
    doc = parse_text(text, filename="faq.txt")
    assert [s.name for s in doc.sections] == [
        "KETTLE FAQ",
        "1.1  Can I use the kettle for soup?",
        "1.2  May I sell the kettle?",
    ]
    spans = [s.text for s in extract_spans(doc)]
    assert "1.1  Can I use the kettle for soup?" in spans
    assert "1.2  May I sell the kettle?" in spans
    assert "Yes." in spans
    assert "KETTLE FAQ" not in spans


def test_a_licence_quoted_in_a_deb822_copyright_file_gets_its_headings() -> None:
    """A machine-readable copyright file quotes a licence in a field, each empty line written as a
    space and a dot: the dots are blanked in place (the text keeps its length), so the licence's
    capitals headings stand alone as in its own file; a text with one such dot is left as it is."""
    text = (
        "Format: https://example.org/copyright-format/1.0/\n"
        "Upstream-Name: Kettle\n\n"
        "Files: *\n"
        "Copyright: 2020 The Kettle Foundation\n"
        "License: Kettle-1.0\n"
        " KETTLE LICENCE Version 1.0\n"
        " .\n"
        " PREAMBLE\n"
        " This licence lets anyone boil water with the kettle.\n"
        " .\n"
        " DEFINITIONS\n"
        ' "Kettle" means the vessel and its lid.\n'
        " .\n"
        " PERMISSION & CONDITIONS\n"
        " Anyone may use the kettle, subject to these conditions:\n"
        " .\n"
        " 1) The kettle may not be sold by itself.\n"
        " .\n"
        " TERMINATION\n"
        " This licence ends when a condition is broken.\n"
    )
    doc = parse_text(text, filename="copyright")
    assert len(doc.text) == len(text)
    assert "\n .\n" not in doc.text
    assert [s.name for s in doc.sections] == [
        "PREAMBLE",
        "DEFINITIONS",
        "PERMISSION & CONDITIONS",
        "TERMINATION",
    ]
    once = "Kettle\n .\n Notes\n"
    assert parse_text(once, filename="notes.txt").text == once


def test_an_article_titled_in_brackets_heads_its_section_and_a_glued_item_does_not() -> None:
    """A contract's articles titled in brackets after their keyword ("Article 2 (Grant of
    Licence)") head sections; a list item glued to its number ("2.If the Brewer …", no space
    after the dot) is no heading, however its words are set."""
    text = (
        "Kettle Licence Agreement\n\n"
        "Article 1 (Definitions)\n 1.\u201cKettle\u201d shall mean the vessel.\n\n"
        "Article 2 (Grant of Licence)\n The Licensor grants the use of the kettle.\n\n"
        "Article 3 (Restriction)\n\n"
        " 1.If the Kettle Is Sold By Itself\n   the licence ends.\n"
        " 2.If the Brewer Changes the Lid\n   the brewer says so.\n"
        " 3.THE KETTLE IS PROVIDED AS IS\n   WITHOUT WARRANTY.\n\n"
        "Article 4 (Governing Law)\n This Agreement is read under the law of Kettleland.\n"
    )
    names = [s.name for s in parse_text(text, filename="licence.txt").sections]
    assert names == [
        "Article 1 (Definitions)",
        "Article 2 (Grant of Licence)",
        "Article 3 (Restriction)",
        "Article 4 (Governing Law)",
    ]


def test_a_short_capitals_title_over_a_capitals_disclaimer_heads_its_section() -> None:
    """A licence's last part titled "DISCLAIMER" right over its all-caps paragraph heads a
    section; an all-caps paragraph whose first line is a full line stays prose."""
    text = (
        "PREAMBLE\nThis licence lets anyone boil water with the kettle.\n\n"
        "TERMINATION\nThis licence ends when a condition is broken.\n\n"
        "DISCLAIMER\nTHE KETTLE IS PROVIDED AS IS, WITHOUT WARRANTY OF ANY KIND, EXPRESS\n"
        "OR IMPLIED, INCLUDING BUT NOT LIMITED TO FITNESS FOR BOILING.\n\n"
        "IN NO EVENT SHALL THE MAKER\nBE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY\n"
        "ARISING FROM THE USE OF THE KETTLE.\n"
    )
    names = [s.name for s in parse_text(text, filename="licence.txt").sections]
    assert names == ["PREAMBLE", "TERMINATION", "DISCLAIMER"]


def test_an_item_glued_to_its_number_is_a_span_of_its_own() -> None:
    """Clauses set with no space after their number ("1.If a Kettle …", "(2)The notice …") are
    items: each ends its span, so a list of them is not one long run of text."""
    text = (
        "Restrictions\n\n"
        " 1.If a Kettle is sold, the following conditions must be\n   met:\n"
        "   (1)The notice must be sold with it.\n"
        "   (2)The lid must be sold with it.\n"
        " 2.\u201cSpout\u201d shall mean the part water leaves by.\n"
        " 3.THE KETTLE IS PROVIDED AS IS.\n"
    )
    spans = [s.text for s in extract_spans(parse_text(text, filename="licence.txt"))]
    assert "(1)The notice must be sold with it." in spans
    assert "(2)The lid must be sold with it." in spans
    assert "2.\u201cSpout\u201d shall mean the part water leaves by." in spans
    assert "3.THE KETTLE IS PROVIDED AS IS." in spans


def _reference(entries: int, *, filler: int) -> str:
    """A made-up command reference printed to text: each term on its own line, its definition
    indented under it, one entry with a nested option list, one right under the definition
    before it, one with three terms."""
    sentence = "The server records the change and mails a note to the owner of the ticket. "
    out = ["Ticket server manual", "", "Commands", "========", "", "   The server reads these commands.", ""]
    for n in range(entries - 1):
        out.append(f"   frob{n} ticket [ level ]")
        body = (f"Sets frob {n} on the ticket. " + sentence * filler).strip()
        out += ["          " + line for line in textwrap.wrap(body, 60)]
        if n == 2:
            out += ["", "          Options:", "", "             --quiet", "                  Mails nobody."]
            out += ["", "             --loud", "                  Mails everybody.", ""]
        if n == 5:
            out.append("          See also: frob4")  # no sentence end, and no blank line after it
            continue
        out.append("")
    out += ["   quit", "   stop", "   thanks", "          Stops reading the message.", ""]
    out += ["   Commands the server does not know are answered with a help text.", ""]
    return "\n".join(out)


def test_a_long_plain_text_definition_list_heads_a_subsection_at_each_term() -> None:
    # An outermost term list of >= 10 entries over >= 10,000 characters (the HTML `<dl>` rule's
    # bounds) was one section; each term now heads one, its line staying in its fact span.
    text = _reference(12, filler=12)
    doc = parse_text(text, filename="a.txt")
    names = [s.name for s in doc.sections]
    assert names[0] == "Commands"
    assert names[1:4] == ["frob0 ticket [ level ]", "frob1 ticket [ level ]", "frob2 ticket [ level ]"]
    assert "--quiet" not in names  # a list inside a definition is no reference list of its own
    assert names[-2:] == ["quit, stop, thanks", "Commands"]  # the interrupted section resumes
    assert all(s.level == 2 for s in doc.sections if s.name.startswith("frob"))
    last = doc.sections[-1]
    assert doc.text[last.char_start :].startswith("Commands the server does not know")
    spans = [s.text for s in extract_spans(doc)]
    assert any(s.startswith("frob4 ticket [ level ]\n          Sets frob 4 on the ticket.") for s in spans)
    assert "Commands the server does not know are answered with a help text." in spans
    assert any(s.endswith("See also: frob4") for s in spans)  # the next term ends the span
    # Under the bounds (fewer entries, or less text) the list stays in its section.
    assert [s.name for s in parse_text(_reference(9, filler=20), filename="a.txt").sections] == ["Commands"]
    assert [s.name for s in parse_text(_reference(12, filler=8), filename="a.txt").sections] == ["Commands"]


def _menu_tree(subsections: int) -> str:
    """A made-up policy printed to text: a short outer term list (4 top entries, blank lines
    between each term and its definition) whose first entry is defined by one line over a long
    list of its own subsections, each of those with a short nested list of two examples."""
    sentence = "Kettles of this kind are filed here and nowhere else in the catalogue. "
    out = ["Kettle catalogue policy", "", "1. Catalogue Sections", "", "   The sections are these.", ""]
    out += ["   Kettles", "", "           Every kettle the shop sells", ""]
    for n in range(subsections):
        out += [f"                Kettles/Model {n}", ""]
        out += ["                        " + line for line in textwrap.wrap(sentence * 3, 56)]
        out += ["", f"                             Kettles/Model {n}/Red", ""]
        out += ["                                     Red ones.", ""]
        out += [f"                             Kettles/Model {n}/Blue", ""]
        out += ["                                     Blue ones.", ""]
    for top in ("Cups", "Saucers", "Spoons"):
        out += [f"   {top}", "", f"           {top} of every size.", ""]
    out += ["2. Changes", "", "   Changes go to the catalogue list.", ""]
    return "\n".join(out)


def test_a_short_outer_term_list_over_a_long_nested_list_heads_a_subsection_at_each_term() -> None:
    # The outer list has 4 entries (under the 10 of the bounds), but the list its first entry's
    # definition holds meets them: the outer terms head subsections, the nested list's terms one
    # level under theirs; the one-entry "Every kettle the shop sells" level heads nothing, and the
    # two-entry lists of colours (under the bounds) stay their entry's text.
    doc = parse_text(_menu_tree(24), filename="policy.txt")
    names = [(s.level, s.name) for s in doc.sections]
    assert names[:4] == [
        (2, "1. Catalogue Sections"),
        (3, "Kettles"),
        (4, "Kettles/Model 0"),
        (4, "Kettles/Model 1"),
    ]
    assert (3, "Cups") in names and (3, "Spoons") in names
    assert names[-1] == (2, "2. Changes")
    assert not [n for _, n in names if n.endswith(("/Red", "/Blue")) or n.startswith("Every")]
    largest = max(s.char_end - s.char_start for s in doc.sections)
    assert largest < 0.1 * len(doc.text)
    spans = [s.text for s in extract_spans(doc)]
    assert "Kettles/Model 3" in spans  # the term line stays a fact span
    # A term separated from its definition by a blank line is one term, not the blank line too:
    # the top entry ends at the next top term, not at the document's next line at the margin.
    cups = next(s for s in doc.sections if s.name == "Cups")
    assert doc.text[cups.char_start : cups.char_end].strip() == "Cups\n\n           Cups of every size."
    # Under the bounds (a nested list of fewer than 10 subsections) the tree stays whole.
    assert [s.name for s in parse_text(_menu_tree(8), filename="policy.txt").sections] == [
        "1. Catalogue Sections",
        "2. Changes",
    ]


def test_roman_part_numbers_continue_the_numbering_and_a_roman_contents_list_is_no_heading() -> None:
    # "VI. Brewing with kettlex" (sentence case) continues "V." as "6." continues "5."; the Arabic
    # items numbered inside a part ("2) Added KETTLE_COLD") do not break the Roman numbering;
    # the contents' "  V. Pouring Tea" is no heading (the
    # entry after it wraps, so it was one with a body).
    parts = ["Introduction", "Filling Kettles", "Boiling Water", "Kettle Care", "Pouring Tea"]
    more = ["Brewing with kettlex", "Changes in the first edition", "Changes in the second edition"]
    romans = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII"]
    toc = "\n".join(f"  {r:>4}. {t}" for r, t in zip(romans, parts + more, strict=True))
    # a contents entry wrapped onto a second line, as a long title is
    toc = toc.replace("VI. Brewing with kettlex", "VI. Brewing with kettlex and\n        other hot drinks")
    body = "".join(
        f"{r}. {t}\n\nThe part says how kettles work, in several sentences of text.\n\n"
        for r, t in zip(romans, parts + more, strict=True)
    )
    body = body.replace("VII. Changes", "1) Added KETTLE_HOT\n\n2) Added KETTLE_COLD\n\nVII. Changes")
    text = f"Kettle manual\n\n TABLE OF CONTENTS\n\n{toc}\n\n{body}"
    names = [s.name for s in parse_text(text, filename="manual.txt").sections]
    for r, t in zip(romans, parts + more, strict=True):
        assert names.count(f"{r}. {t}") == 1, (r, names)
    assert names.index("V. Pouring Tea") > names.index("I. Introduction")


def _news(versions: list[str]) -> str:
    """A made-up NEWS file: each version's page after a form feed, opening on its title."""
    out = ["Kettlex NEWS - user visible changes.", "Send bug reports to the kettle office."]
    fixes = ["the lid", "the handle", "the spout", "the whistle", "the base", "the switch"]
    for n, v in enumerate(versions):
        out += ["\f", v, "", f"* The kettle now boils {n + 2} cups at a time.", ""]
        out += [f"* Fixed {fixes[n]} of the big model", ""]
    return "\n".join(out)


def test_a_title_opening_each_page_after_an_authors_form_feed_heads_a_section() -> None:
    # A changelog's pages, split by form feeds with no running header or footer, each open on a
    # version line standing alone: each heads a section (they were one section, or none).
    versions = [f"version 1.{n} - Jo Kettle, 2021-0{n}-1{n}" for n in (9, 8, 7, 6, 5)]
    doc = parse_text(_news(versions), filename="NEWS")
    assert [s.name for s in doc.sections] == versions
    sec = doc.sections[1]
    assert "boils 3 cups" in doc.text[sec.char_start : sec.char_end]
    # One such page is not enough: a single page break is no structure.
    assert [s.name for s in parse_text(_news(versions[:1]), filename="NEWS").sections] == []


def test_a_version_line_on_every_page_is_no_running_header_when_it_differs_on_each() -> None:
    # "Version 2.36" … "Version 2.31" at the top of every page recur with their digits masked, so
    # they were blanked as a running header; each page's own is no header (a footer's page
    # number, which steps with the pages, still is).
    versions = [f"Version 2.3{n}" for n in (6, 5, 4, 3, 2, 1)]
    doc = parse_text(_news(versions), filename="NEWS")
    assert [s.name for s in doc.sections] == versions
    assert all(v in doc.text for v in versions)
    words = ["lids", "spouts", "handles", "bases", "switches", "whistles"]
    pages = [
        f"   Kettle {w} are described here.\n\n   The text ends here.\n\n"
        f"   Example Corp   Kettles   [Page {n}]\n\f"
        for n, w in enumerate(words, start=1)
    ]
    text = "".join(pages)
    assert "[Page" not in parse_text(text, filename="a.txt").text


def test_sgr_escapes_read_as_nothing() -> None:
    """A manual printed by grotty with colour escapes instead of overstrikes: bold as
    "\\x1b[1m…\\x1b[22m", underline as "\\x1b[4m…\\x1b[24m". The numbered headings are read (the
    escapes had glued "[1m" to each number) and the text holds no escape."""
    text = (
        "\x1b[1m1.  Basic Concepts\x1b[0m\n\n     Read the \x1b[4mmanual\x1b[24m first.\n\n"
        "\x1b[1m1.1.  Pages\x1b[0m\n\n     A \x1b[1mpage\x1b[22m is one file.\n\n"
        "\x1b[1m2.  More Concepts\x1b[0m\n\n     Then the rest.\n"
    )
    doc = parse_text(text, filename="intro.txt")
    assert "\x1b" not in doc.text
    assert [s.name for s in doc.sections] == ["1.  Basic Concepts", "1.1.  Pages", "2.  More Concepts"]
    assert "Read the manual first." in doc.text and "A page is one file." in doc.text


def _framed_requests(n: int) -> str:
    """A made-up protocol spec: each request framed by box-drawing rules at the margin, its
    fields indented under the top rule, its description indented under the bottom one."""
    out = ["Kettle protocol", "", "1. Requests", "", "The requests follow.", ""]
    prose = "The server boils the water and reports the temperature in tenths of a degree. " * 14
    for k in range(n):
        out += [
            "\u250c\u2500\u2500\u2500",
            f"    KettleRequest{k}",
            "\twindow: WINDOW",
            "\u2514\u2500\u2500\u2500",
        ]
        out += ["\tErrors: Window", ""] + ["\t" + line for line in textwrap.wrap(prose, 70)] + [""]
    out += ["2. Events", "", "Events are sent when the water boils.", ""]
    return "\n".join(out)


def test_box_drawing_rules_framing_entries_are_no_definition_terms() -> None:
    # 12 framed requests of over 10,000 characters: read as a term list, each "┌───" and "└───"
    # rule headed a subsection named by its dashes. A line with no letter or digit names nothing.
    doc = parse_text(_framed_requests(12), filename="proto.txt")
    assert [s.name for s in doc.sections] == ["1. Requests", "2. Events"]
    # A command named by punctuation is a term all the same.
    text = _reference(12, filler=12).replace("   frob7 ticket [ level ]", "   #...")
    assert "#..." in [s.name for s in parse_text(text, filename="a.txt").sections]


def test_a_version_label_in_a_list_of_versions_is_no_numbered_heading() -> None:
    # "1.5: Added Monitors" (Title Case) was a heading and set the numbering, so the next
    # sentence-case clause ("11. Relationship with other extensions") no longer continued it.
    text = (
        "Kettle protocol\n\n10. Extension Versioning\n\nEach version added something:\n\n"
        "\t1.0: Boils water.\n\n\t1.1: Added steam reports\n\n\t1.5: Added Whistles\n\n"
        "\t1.6: Added timers and a child lock.\n\n"
        "11. Relationship with other extensions\n\nNone of them.\n\n"
        "12. Encoding\n\nAs the core protocol.\n"
    )
    assert [name for _, name in _names(text)] == [
        "10. Extension Versioning",
        "11. Relationship with other extensions",
        "12. Encoding",
    ]
    # At the margin, a version line heads a changelog's release, as before.
    log = "".join(f"1.9.{n}: Kettle Team\n{n + 1} May 2031\n- Fixed the lid.\n\n\n" for n in (9, 8, 7))
    assert [name for _, name in _names(log)] == [
        "1.9.9: Kettle Team",
        "1.9.8: Kettle Team",
        "1.9.7: Kettle Team",
    ]


def test_two_hyphens_typed_for_a_dash_separate_a_clause_number_from_its_title() -> None:
    text = (
        "Kettle Public Licence\n\nBy boiling water you accept these terms.\n\n"
        "Section 1 -- Definitions.\n\n  a. Kettle means the appliance.\n\n"
        "Section 2 -- Scope.\n\n  a. You may boil water.\n\n"
        "Section 3 -- Term and Termination.\n\n  a. The licence lasts forever.\n"
    )
    assert [name for _, name in _names(text)] == [
        "Section 1 -- Definitions",
        "Section 2 -- Scope",
        "Section 3 -- Term and Termination",
    ]


def test_a_missed_first_sub_heading_does_not_lose_its_siblings() -> None:
    # "1.1.  kettled(8)" (a title in lower case with a page reference) is no heading; "1.2"
    # (sentence case) must continue the numbering from "1": one level deeper, one number missed,
    # as "4.1" → "4.3" is tolerated.
    text = (
        "Kettle manual\n\n1.  Introduction\n\nThe kettle suite.\n\n1.1.  kettled(8)\n\nThe daemon.\n\n"
        "1.2.  The water tank\n\nIt holds a litre.\n\n1.3.  Boiling the water\n\nPress the switch.\n\n"
        "2.  Cleaning\n\nDescale it monthly.\n"
    )
    assert [name for _, name in _names(text)] == [
        "1.  Introduction",
        "1.2.  The water tank",
        "1.3.  Boiling the water",
        "2.  Cleaning",
    ]


def _kettle_manual() -> str:
    """A made-up manual: Roman parts, the long one split by sentence-case lines standing alone."""
    para = "\n".join(
        textwrap.wrap("The kettle library boils water for the application and reports progress. " * 20, 72)
    )
    return (
        "Kettle library manual\n\nI. Introduction\n\n" + para + "\n\nII. Boiling\n\n" + para + "\n\n"
        "Setup\n\n" + para + "\n\n"
        "You must supply the function\n\n    void boil(kettle *k);\n\n" + para + "\n\n"
        "The example is:\n\nSee below\n\n" + para + "\n\n"
        "Input transformations\n\n" + para + "\n\nM\tsrc/kettle.c\n\n" + para + "\n\n"
        "Reading the temperature\n\n"
        + para
        + "\n\nIII. Cleaning\n\n"
        + para
        + "\n\nDescaling\n\n"
        + para
        + "\n\nDrying the lid\n\n"
        + para
        + "\n"
    )


def test_sentence_case_lines_standing_alone_split_a_long_section() -> None:
    # Part II holds over 10,000 characters: its short lines standing alone over a paragraph at
    # their margin head subsections under it. A lead-in over indented code, a line after a colon,
    # a file list's tabbed line and the short part III (under 10,000 characters) head none.
    assert _names(_kettle_manual()) == [
        (2, "I. Introduction"),
        (2, "II. Boiling"),
        (3, "Setup"),
        (3, "Input transformations"),
        (3, "Reading the temperature"),
        (2, "III. Cleaning"),
    ]


def _kettle_protocol(title_71: str, title_72: str) -> str:
    return (
        "Kettle protocol\n\n1. Introduction\n\nThe kettle protocol boils water.\n\n"
        "7. Requests\n\nKettleBoil asks the kettle to boil.\n\n"
        f"{title_71}\n\nKettleDescale asks it to descale.\n\n"
        f"{title_72}\n\nKettleWhistle asks it to whistle.\n\n"
        "8. Events\n\nKettleBoiled says it boiled.\n"
    )


def test_a_version_number_inside_a_numbered_title_is_part_of_it() -> None:
    # The dots of "1.2" are no sentence's end: the title runs on past them.
    text = _kettle_protocol("7.1. Requests added in version 1.2", "7.2. Requests added in version 1.3.1")
    assert [name for _, name in _names(text)] == [
        "1. Introduction",
        "7. Requests",
        "7.1. Requests added in version 1.2",
        "7.2. Requests added in version 1.3.1",
        "8. Events",
    ]


def test_a_long_sub_numbered_title_continuing_the_numbering_is_a_heading() -> None:
    # Ten words, more than a heading's usual eight: a sub-number continuing the numbering, standing
    # alone, may run as long as a parent title.
    text = _kettle_protocol(
        "7.1. Requests that the kettle learned in its second protocol revision",
        "7.2. Requests that the kettle learned in its third protocol revision",
    )
    assert [name for _, name in _names(text)] == [
        "1. Introduction",
        "7. Requests",
        "7.1. Requests that the kettle learned in its second protocol revision",
        "7.2. Requests that the kettle learned in its third protocol revision",
        "8. Events",
    ]
    # Not where it breaks the numbering ("7.5" under "1."), nor with no sub-number.
    assert "7.5. Requests" not in " ".join(
        name
        for _, name in _names(
            "Kettle protocol\n\n1. Introduction\n\nText.\n\n"
            "7.5. Requests that the kettle learned in its second protocol revision\n\nText.\n\n"
            "2. Events\n\nText.\n"
        )
    )


def test_a_sub_numbered_title_in_lower_case_is_a_heading() -> None:
    # "1.1.  kettled": a manual names its programs as they are spelled.
    text = (
        "Kettle manual\n\n1.  Introduction\n\nThe kettle suite.\n\n1.1.  kettled\n\nThe daemon.\n\n"
        "1.2.  The water tank\n\nIt holds a litre.\n\n2.  Cleaning\n\nDescale it monthly.\n\n"
        "2.1.  descale database location\n\nIn /var/lib/kettle.\n"
    )
    assert [name for _, name in _names(text)] == [
        "1.  Introduction",
        "1.1.  kettled",
        "1.2.  The water tank",
        "2.  Cleaning",
        "2.1.  descale database location",
    ]
    # Not where it breaks the numbering, nor as a version's line in a list.
    names = [name for _, name in _names(text.replace("2.1.  descale", "4.4.  descale"))]
    assert "4.4.  descale database location" not in names


def _kettle_faq(questions: int, headings: dict[int, str]) -> str:
    """A made-up FAQ printed to text: numbered questions at the margin, each answer indented under
    it by a tab; the questions numbered in `headings` are Title Case titles (numbered headings),
    the others hold a semicolon (no numbered title: they are only a definition list's terms)."""
    answer = "The element heats the water from below and the lid keeps the steam in until it boils. "
    out = [
        "Kettle questions and answers",
        "",
        "1.0\tGeneral Matters",
        "",
        "\tThese answers are about kettles.",
        "",
    ]
    out += ["2.0\tKettle Problems", ""]
    for n in range(1, questions + 1):
        out += [headings.get(n, f"2.{n}\tI filled kettle {n}; why does it hiss"), ""]
        out += ["\t" + line for line in textwrap.wrap(answer * 12, 60)]
        out.append("")
    out += ["3.0\tOrdering Kettles", "", "\tKettles are ordered by post.", ""]
    return "\n".join(out)


def test_a_numbered_heading_among_definition_terms_does_not_cut_the_list() -> None:
    # "2.1 Filling Kettles" and "2.6 Kettle Care" are numbered headings standing as the questions
    # around them do (a line at the margin over its indented answer): they are entries of the
    # questions' list, so it keeps its 12 entries and 13,000 characters (over the `<dl>` bounds,
    # 10 and 10,000) and every question heads a section; cut at the headings, the runs (0, 4 and
    # 6 entries) were under the bounds and the questions headed nothing. A question takes the
    # level of the heading before it, one deeper per number part more ("2.7.1" under "2.6"); one
    # no number opens ("Descaling; read this first") is its sibling.
    heads = {1: "2.1\tFilling Kettles", 6: "2.6\tKettle Care", 7: "2.7.1\tI descaled it; why does it hiss"}
    heads[10] = "Descaling; read this first"
    doc = parse_text(_kettle_faq(12, heads), filename="faq.txt")
    names = [(s.level, s.name.replace("\t", " ")) for s in doc.sections]
    top = names[1][0]
    assert names[:4] == [
        (top, "1.0 General Matters"),
        (top, "2.0 Kettle Problems"),
        (top, "2.1 Filling Kettles"),
        (top, "2.2 I filled kettle 2; why does it hiss"),
    ]
    assert (top, "2.6 Kettle Care") in names
    assert (top + 1, "2.7.1 I descaled it; why does it hiss") in names
    assert (top, "Descaling; read this first") in names
    assert (top, "2.12 I filled kettle 12; why does it hiss") in names
    assert names[-1] == (top, "3.0 Ordering Kettles")
    assert len(names) == 15
    # Under the bounds (8 questions), the headings alone head sections.
    short = [
        s.name.replace("\t", " ") for s in parse_text(_kettle_faq(8, heads), filename="faq.txt").sections
    ]
    assert short == [
        "1.0 General Matters",
        "2.0 Kettle Problems",
        "2.1 Filling Kettles",
        "2.6 Kettle Care",
        "3.0 Ordering Kettles",
    ]
