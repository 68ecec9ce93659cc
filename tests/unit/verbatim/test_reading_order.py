"""Evidence read in document order where the sentence splitter cut a fact in two
(`verbatim.spans.reading_order`, `VerbatimCascade._reading_order`)."""

from __future__ import annotations

from evidence.evaluation.qa import answer_found
from evidence.records import Chunk, ChunkKind
from evidence.verbatim.cascade import HYBRID_FACTSPAN, CascadeConfig, SpanHit, VerbatimCascade
from evidence.verbatim.spans import reading_order


def span(text: str, seq: int, section: str = "9.2.2. UID and GID classes", doc: str = "policy") -> Chunk:
    return Chunk(
        chunk_id=f"{doc}:{seq}",
        document_id=doc,
        kind=ChunkKind.SPAN,
        text=text,
        char_start=seq * 100,
        char_end=seq * 100 + len(text),
        sequence=seq,
        section=section,
    )


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
    # 250 characters ranked between them: pulling the neighbour up would push them down.
    ranked = [NOBODY, LONG, NOGROUP]
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
    earlier = span("An earlier sentence.", 39)
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
