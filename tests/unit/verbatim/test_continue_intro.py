"""An introducing span's continuation in the kept evidence (`CascadeConfig.continue_intro`,
`cascade.continue_intros`, session 50 `vrank22`): a lead-in, a question the document states or a
label among the first spans is followed by its document-next span, added when it was not kept."""

from __future__ import annotations

from functools import partial
from itertools import pairwise

import pytest

from evidence.config import Settings
from evidence.plan.verbatim import plan_question
from evidence.records import Chunk
from evidence.verbatim.cascade import (
    HYBRID_FACTSPAN,
    CascadeConfig,
    SpanHit,
    VerbatimCascade,
    continue_intros,
)
from evidence.verbatim.spans import introduces
from tests.unit.verbatim.verbatimkit import placed_span, text_service

span = partial(placed_span, section="Renewal", doc="handbook")


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
    assert all(a.score > b.score for a, b in pairwise(out))


def test_a_kept_continuation_moves_up_and_a_plain_first_span_changes_nothing() -> None:
    out = continue_intros(hits(ASK, OTHER, MORE, ANSWER), [OTHER, ASK, ANSWER, MORE], 1)
    assert [h.chunk for h in out] == [ASK, ANSWER, OTHER, MORE]
    same = hits(OTHER, ASK, MORE)
    assert [h.chunk for h in continue_intros(same, [OTHER, ASK, ANSWER, MORE], 1)] == [OTHER, ASK, MORE]
    # Another section's next span is no continuation.
    apart = span(ANSWER.text, 11, section="Fees")
    assert [h.chunk for h in continue_intros(hits(ASK, OTHER), [ASK, apart], 1)] == [ASK, OTHER]


LEAD = span("Renewal requests are processed in the following order:", 30)
FIRST = span("Requests paid online come before requests paid at a desk.", 31)


def test_on_by_default_a_lead_in_first_is_followed_by_its_first_item_even_when_not_kept() -> None:
    # The shipped reading order moves a kept item only; the item here was not kept.
    first = CascadeConfig().continue_intro
    assert first == 1 and Settings().verbatim_continue_intro == 1
    out = continue_intros(hits(LEAD, OTHER, MORE), [OTHER, LEAD, FIRST, MORE], first)
    assert [h.chunk for h in out] == [LEAD, FIRST, OTHER, MORE]


def test_without_labels_only_lead_ins_and_questions_introduce() -> None:
    title = span("Renewal fees", 40)
    assert introduces(title) and not introduces(title, labels=False)
    assert introduces(ASK, labels=False) and introduces(LEAD, labels=False)


HANDBOOK = """# Membership handbook

## Renewal

Renewal requests are processed in the following order:

- Requests paid online come before requests paid at a desk.

- Requests from members of more than ten years come next.

Renewal requests are processed by the membership office of the club.

Renewal requests processed late keep the member's number.

Renewal requests are processed once a week, on Mondays.

## Fees

The renewal fee is set every year by the board.
"""


def test_the_cascade_keeps_a_lead_ins_first_item_that_its_ranking_left_out(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    service = text_service(tmp_path_factory, "handbook", {"handbook.md": HANDBOOK})
    q = "In what order are renewal requests processed?"

    def evidence(config: CascadeConfig) -> list[str]:
        res = VerbatimCascade(config).run(service.backend, "handbook", q, plan_question(q))
        return [h.chunk.text for h in res.hits]

    item = "- Requests paid online come before requests paid at a desk."
    # Three spans kept: the sentences repeating the question's words outrank the item.
    off = evidence(CascadeConfig(max_spans=3, continue_intro=0))
    assert off[0].endswith("in the following order:") and item not in off
    on = evidence(CascadeConfig(max_spans=3))
    assert on[:2] == [off[0], item] and len(on) == 3
