"""The kept evidence's order by what a span states (session 50, `vrank22`): an introducing span's
continuation (`cascade.continue_intros`) and the asked answer type first (`cascade.type_first`)."""

from __future__ import annotations

from evidence.records import Chunk, ChunkKind
from evidence.verbatim.cascade import HYBRID_FACTSPAN, SpanHit, continue_intros, introduces, type_first


def span(text: str, seq: int, section: str = "Renewal", doc: str = "handbook") -> Chunk:
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


ASK = span("How do I renew a lapsed membership card online?", 10)
ANSWER = span("Sign in to the portal and choose the renewal form under your account settings.", 11)
OTHER = span("Membership cards are issued to every registered member of the club.", 3)
MORE = span("A lapsed membership card cannot be used at partner venues in the meantime.", 20)


def hits(*chunks: Chunk) -> list[SpanHit]:
    return [SpanHit(c, 1.0 - 0.1 * n, HYBRID_FACTSPAN) for n, c in enumerate(chunks)]


def test_a_question_the_document_states_is_followed_by_its_answer_even_when_not_kept() -> None:
    assert introduces(ASK) and not introduces(OTHER)
    out = continue_intros(hits(ASK, OTHER, MORE), [OTHER, ASK, ANSWER, MORE], 1)
    assert [h.chunk for h in out] == [ASK, ANSWER, OTHER, MORE]
    assert all(a.score > b.score for a, b in zip(out, out[1:], strict=False))


def test_a_kept_continuation_moves_up_and_a_plain_first_span_changes_nothing() -> None:
    out = continue_intros(hits(ASK, OTHER, MORE, ANSWER), [OTHER, ASK, ANSWER, MORE], 1)
    assert [h.chunk for h in out] == [ASK, ANSWER, OTHER, MORE]
    same = hits(OTHER, ASK, MORE)
    assert [h.chunk for h in continue_intros(same, [OTHER, ASK, ANSWER, MORE], 1)] == [OTHER, ASK, MORE]
    # Another section's next span is no continuation.
    apart = span(ANSWER.text, 11, section="Fees")
    assert [h.chunk for h in continue_intros(hits(ASK, OTHER), [ASK, apart], 1)] == [ASK, OTHER]


def test_spans_stating_the_asked_kind_read_ahead_of_the_rest_after_the_first() -> None:
    first = span("Renewal keeps the member's number and history.", 1)
    vague = span("Renewal is handled by the membership office.", 2)
    days = span("A renewal request is processed within 14 days of payment.", 3)
    out = type_first(hits(first, vague, days), "How long does renewal take?", "expected")
    assert [h.chunk for h in out] == [first, days, vague]
    assert all(a.score > b.score for a, b in zip(out, out[1:], strict=False))
    assert [h.chunk for h in type_first(hits(first, vague, days), "Who handles renewal?", "expected")] == [
        first,
        vague,
        days,
    ]
