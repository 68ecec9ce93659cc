"""`RetrieveRequest.conversation`: when a query refers back, the last user turn's content words
join it (evidence/plan/conversation.py, docs/api.md#conversation)."""

from __future__ import annotations

import pytest

from evidence.model import ConversationTurn, RetrieveRequest
from evidence.names import MAX_QUERY_CHARS
from evidence.plan.conversation import effective_query, refers_back, with_conversation


def _turns(*pairs: tuple[str, str]) -> list[ConversationTurn]:
    return [ConversationTurn(role=role, content=content) for role, content in pairs]


ASKED = _turns(("user", "What is zorbatol prescribed for?"), ("assistant", "Migraine prevention in adults."))


@pytest.mark.parametrize(
    "query",
    [
        "what about its dose?",
        "And the side effects?",
        "How about children?",
        "is it safe in pregnancy?",
        "what did that step mean?",
        "also interactions",
    ],
)
def test_follow_ups_refer_back(query: str) -> None:
    assert refers_back(query)


@pytest.mark.parametrize(
    "query", ["What is the dose of zorbatol?", "side effects of quellamine", "which drugs treat migraine"]
)
def test_questions_naming_their_subject_do_not(query: str) -> None:
    assert not refers_back(query)
    assert effective_query(query, ASKED) == query


def test_the_last_user_turns_content_words_join_a_follow_up() -> None:
    assert effective_query("what about its dose?", ASKED) == "what about its dose? zorbatol prescribed"


def test_assistant_turns_never_join_and_the_current_message_is_not_its_own_context() -> None:
    only_answers = _turns(("assistant", "Zorbatol prevents migraine."), ("system", "be brief"))
    assert effective_query("what about its dose?", only_answers) == "what about its dose?"
    echoed = [*ASKED, ConversationTurn(role="user", content="what about its dose?")]
    assert effective_query("what about its dose?", echoed) == "what about its dose? zorbatol prescribed"


def test_a_chain_of_follow_ups_reaches_the_turn_that_named_the_subject() -> None:
    chain = _turns(
        ("user", "Tell me about quellamine."),
        ("user", "What is zorbatol prescribed for?"),
        ("user", "and its side effects?"),
    )
    assert (
        effective_query("what about its dose?", chain)
        == "what about its dose? zorbatol prescribed side effects"
    )


def test_no_conversation_or_nothing_to_add_leaves_the_request_as_it_is() -> None:
    request = RetrieveRequest(query="what about its dose?")
    assert with_conversation(request) is request
    same = RetrieveRequest(query="what about its dose?", conversation=_turns(("user", "the dose")))
    assert with_conversation(same) is same


def test_the_request_keeps_every_other_field() -> None:
    request = RetrieveRequest(query="what about its dose?", conversation=ASKED, top_k=3, profile="vrm")
    out = with_conversation(request)
    assert out.query == "what about its dose? zorbatol prescribed"
    assert (out.top_k, out.profile, out.conversation) == (3, "vrm", request.conversation)


def test_the_extended_query_stays_within_the_query_cap() -> None:
    words = " ".join(f"w{i:05d}" for i in range(700))[: MAX_QUERY_CHARS - 10]
    out = effective_query("and its dose?", _turns(("user", words)))
    assert len(out) <= MAX_QUERY_CHARS and out.startswith("and its dose? w00000")
