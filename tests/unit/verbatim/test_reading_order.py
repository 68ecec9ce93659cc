"""Evidence read in document order where the sentence splitter cut a fact in two
(`verbatim.spans.reading_order`, `VerbatimCascade._reading_order`)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from evidence.evaluation.qa import answer_found
from evidence.records import Chunk, ChunkKind, SpanType
from evidence.verbatim.cascade import HYBRID_FACTSPAN, CascadeConfig, SpanHit, VerbatimCascade
from evidence.verbatim.spans import inside, is_label, reading_order, scoring_texts
from tests.unit.verbatim.verbatimkit import placed_span

span = partial(placed_span, section="9.2.2. UID and GID classes", doc="policy")


NOBODY = span('65534: User "nobody".', 40)
NOGROUP = span('The corresponding gid refers to the group "nogroup".', 41)
RANGE = span("0-99: Globally allocated by the Debian project.", 12)
ADDUSER = span('By default "adduser" will choose UIDs and GIDs in this range.', 30)
LONG = span("x" * 250, 60)


def test_a_document_next_span_ranked_close_after_follows_its_predecessor() -> None:
    ranked = [NOBODY, RANGE, ADDUSER, NOGROUP]
    assert reading_order(ranked, 200) == [0, 3, 1, 2]
    texts = [ranked[i].text for i in reading_order(ranked, 200)]
    answer = 'User "nobody". The corresponding gid refers to the group "nogroup".'
    assert answer_found(texts, [answer])
    assert not answer_found([c.text for c in ranked], [answer])


def test_a_neighbour_ranked_far_down_stays_where_it_is() -> None:
    # 250 characters ranked between them: pulling the neighbour up would push them down. (A
    # sentence: a label such as '65534: User "nobody".' is followed from any rank, see below.)
    first = span("The range 60000-64999 is allocated on the fly by the base-passwd package.", 50)
    second = span("Packages must not rely on any fixed entry in that range.", 51)
    ranked = [first, LONG, second]
    assert reading_order(ranked, 200) == [0, 1, 2]
    assert reading_order(ranked, 300) == [0, 2, 1]
    assert reading_order(ranked, 0) == [0, 1, 2]


def test_a_lead_in_is_followed_by_its_first_item_from_any_rank() -> None:
    lead = span("The affinity is determined by the following rules, in the order shown:", 70)
    first = span(
        '1. If the declared type contains the string "INT" then it is assigned INTEGER affinity.', 71
    )
    second = span("2. Otherwise, if it contains CHAR, CLOB or TEXT, TEXT affinity.", 72)
    ranked = [lead, LONG, RANGE, ADDUSER, second, first]
    order = reading_order(ranked, 200)
    # The first item joins its lead-in across 360 characters; the second follows the first.
    assert order == [0, 5, 4, 1, 2, 3]
    texts = [ranked[i].text for i in order]
    assert answer_found(texts, ["in the order shown: 1. If the declared type contains"])


def test_only_the_next_span_of_the_same_document_and_section_joins() -> None:
    # (a sentence, not a label: a label ranked below the span it labels moves up, see below)
    earlier = span("An earlier sentence of the same section, ranked below the next one.", 39)
    other_doc = span('The corresponding gid refers to the group "nogroup".', 41, doc="copyright")
    other_section = span("A new section starts here.", 41, section="9.2.3. Other")
    # A predecessor ranked below stays below; another document's or section's span 41 is no neighbour.
    assert reading_order([NOBODY, RANGE, earlier], 200) == [0, 1, 2]
    assert reading_order([NOBODY, RANGE, other_doc], 200) == [0, 1, 2]
    assert reading_order([NOBODY, RANGE, other_section], 200) == [0, 1, 2]


def test_a_run_of_three_reads_in_order_and_nothing_is_lost() -> None:
    third = span("Packages must not use it.", 42)
    ranked = [NOBODY, RANGE, NOGROUP, ADDUSER, third]
    order = reading_order(ranked, 200)
    assert order == [0, 2, 4, 1, 3]
    assert sorted(order) == list(range(len(ranked)))


def test_the_cascade_returns_the_reading_order_with_scores_still_falling() -> None:
    hits = [
        SpanHit(c, s, HYBRID_FACTSPAN)
        for c, s in zip([NOBODY, RANGE, ADDUSER, NOGROUP], [0.9, 0.8, 0.7, 0.6], strict=True)
    ]
    out = VerbatimCascade()._reading_order(hits)
    assert [h.chunk for h in out] == [NOBODY, NOGROUP, RANGE, ADDUSER]
    assert [h.score for h in out] == [0.9, 0.8, 0.7, 0.6]
    off = VerbatimCascade(CascadeConfig(join_within_chars=0))._reading_order(hits)
    assert off == hits


FALLBACK = span("3. Public License Fallback.", 22, section="3. Public License Fallback")
SHOULD = span(
    "Should any part of the Waiver for any reason be judged legally invalid or ineffective under "
    "applicable law, then the Waiver shall be preserved to the maximum extent permitted.",
    23,
    section="3. Public License Fallback",
)


def test_a_label_ranked_below_the_span_it_labels_is_read_right_before_it() -> None:
    ranked = [SHOULD, RANGE, ADDUSER, FALLBACK]
    order = reading_order(ranked, 200)
    assert order == [3, 0, 1, 2]
    texts = [ranked[i].text for i in order]
    assert answer_found(texts, ["3. Public License Fallback. Should any part of the Waiver"])
    # A sentence ranked below its successor is no label: it stays where the ranking put it.
    sentence = span(
        "Affirmer makes the Waiver for the benefit of each member of the public at large.",
        22,
        section="3. Public License Fallback",
    )
    assert reading_order([SHOULD, RANGE, sentence], 200) == [0, 1, 2]
    # A label that closes the section before labels nothing in this one.
    waiver = span("2. Waiver.", 22, section="2. Waiver")
    assert reading_order([SHOULD, RANGE, waiver], 200) == [0, 1, 2]


def test_a_label_is_a_few_words_never_a_sentence_or_a_table_row() -> None:
    assert is_label(FALLBACK) and is_label(span("user_data", 5)) and is_label(span("Package.", 6))
    assert not is_label(SHOULD) and not is_label(ADDUSER)
    assert not is_label(FALLBACK, 3)  # what a span is scored on reads only the shortest labels
    row = Chunk(
        chunk_id="t:1",
        document_id="t",
        kind=ChunkKind.SPAN,
        text="| Dose | 5 mg |",
        char_start=0,
        char_end=15,
        sequence=1,
        span_type=SpanType.TABLE_ROW,
    )
    assert not is_label(row)


def test_a_continuation_is_scored_with_the_span_before_it() -> None:
    term = span("The type void.", 2, section="Primitive Types")
    this = span(
        "This cannot be used for argument types, only for return values.", 3, section="Primitive Types"
    )
    dt = span("user_data", 23, section="The Closure API")
    dd = span(
        "An arbitrary datum that is passed, uninterpreted, to your closure function.",
        24,
        section="The Closure API",
    )
    after = span("The C unsigned char type.", 25, section="The Closure API")
    texts = scoring_texts([term, this, dt, dd, after])
    assert texts[1] == "The type void. This cannot be used for argument types, only for return values."
    assert texts[3] == "user_data An arbitrary datum that is passed, uninterpreted, to your closure function."
    # A sentence after a sentence, a span after a gap in the sequence, the first span: their own text.
    assert texts[0] == term.text and texts[2] == dt.text
    assert scoring_texts([ADDUSER, NOBODY, NOGROUP])[1] == NOBODY.text
    stated = span("The libffi library provides a portable interface.", 1, section="Primitive Types")
    assert scoring_texts([stated, this])[1] == this.text
    far_term = span("The type void.", 1, section="Primitive Types")
    assert scoring_texts([far_term, this])[1] == this.text  # a label, but not next in sequence
    # A sentence before an anaphor is no label: the anaphor keeps its own text (scored with its
    # antecedent it outranked the antecedent, often the answer); a list of labels does not chain.
    cif = span("Calls are made through a call interface.", 2, section="Primitive Types")
    assert scoring_texts([cif, this])[1] == this.text
    links = scoring_texts([span("- What is libffi?", 6), span("- Using libffi", 7)])
    assert links == ["- What is libffi?", "- Using libffi"]


def test_a_label_is_followed_by_the_span_it_labels_from_any_rank() -> None:
    dt = span("user_data", 23, section="The Closure API")
    dd = span(
        "An arbitrary datum that is passed, uninterpreted, to your closure function.",
        24,
        section="The Closure API",
    )
    ranked = [dt, LONG, RANGE, dd]
    assert reading_order(ranked, 200) == [0, 3, 1, 2]
    assert reading_order([NOBODY, LONG, NOGROUP], 200) == [0, 2, 1]


def test_a_span_is_inside_a_passage_of_its_document_within_its_offsets_bounds_included() -> None:
    s = span("The dose is 10 mg.", 2)  # characters 200-218 of "policy"
    passage = replace(s, chunk_id="p", kind=ChunkKind.PASSAGE, char_start=150, char_end=300)
    assert inside(s, passage)
    assert inside(s, replace(passage, char_start=200, char_end=218))  # the same offsets
    assert not inside(s, replace(passage, char_start=201))  # starts before the passage
    assert not inside(s, replace(passage, char_end=217))  # ends after it
    assert not inside(s, replace(passage, document_id="other"))  # another document's offsets
