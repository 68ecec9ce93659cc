"""`POST /v1/indexes/{index}/retrieve` with `conversation`: a follow-up that refers back ("what
about its dose?") retrieves the document the conversation was about, and only with it
(evidence/plan/conversation.py, docs/api.md#conversation)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidence.model import IndexDocumentRequest
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.retriever.handler import handler
from tests.functional.conftest import body

INDEX = "vendor-acme"  # the index the retrieve event names
DOCUMENTS = {
    "zorbatol": "# Zorbatol\n\nZorbatol is prescribed for migraine prevention in adults.\n\n"
    "## Dosage\n\nThe usual adult dose is 50 mg once daily with food.\n",
    # Says "dose" more often: without the conversation it is the better match for "its dose".
    "quellamine": "# Quellamine\n\nQuellamine is prescribed for seasonal allergies.\n\n"
    "## Dosage\n\nThe dose is 10 mg. The dose may be doubled. A missed dose is skipped.\n",
}
FOLLOW_UP = "what about its dose?"
CONVERSATION = [
    {"role": "user", "content": "What is zorbatol prescribed for?"},
    {"role": "assistant", "content": "Migraine prevention in adults."},
]


@pytest.fixture
def labels(service: EvidenceService) -> EvidenceService:
    for name, text in DOCUMENTS.items():
        service.index_document(
            INDEX, IndexDocumentRequest(document_id=name, filename=f"{name}.md", text=text)
        )
    return service


def _retrieve(context: LambdaContext, **fields: Any) -> dict[str, Any]:
    event = load_event("apigw/retrieve", body=json.dumps({"query": FOLLOW_UP, "top_k": 3, **fields}))
    response = handler(event, context)
    assert response["statusCode"] == 200, response["body"]
    result: dict[str, Any] = body(response)
    return result


def test_a_follow_up_retrieves_what_the_conversation_was_about(
    labels: EvidenceService, context: LambdaContext
) -> None:
    alone = _retrieve(context)
    assert alone["hits"][0]["document_id"] == "quellamine"
    assert alone["plan"]["query"] == FOLLOW_UP

    followed = _retrieve(context, conversation=CONVERSATION)
    assert followed["hits"][0]["document_id"] == "zorbatol"
    assert "50 mg" in followed["hits"][0]["text"]
    # The effective query is shown: the follow-up and the earlier question's content words.
    assert followed["plan"]["query"] == f"{FOLLOW_UP} zorbatol prescribed"


def test_a_question_naming_its_subject_is_not_changed_by_the_conversation(
    labels: EvidenceService, context: LambdaContext
) -> None:
    query = "What is the dose of quellamine?"
    with_turns = _retrieve(context, query=query, conversation=CONVERSATION)
    without = _retrieve(context, query=query)
    assert with_turns["plan"]["query"] == query
    assert [h["chunk_id"] for h in with_turns["hits"]] == [h["chunk_id"] for h in without["hits"]]
    assert with_turns["hits"][0]["document_id"] == "quellamine"
