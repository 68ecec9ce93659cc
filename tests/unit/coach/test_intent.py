"""Intent rules, topic words, references; the optional Bedrock classifier through botocore's Stubber."""

from __future__ import annotations

import json

import pytest
from botocore.stub import ANY, Stubber

from evidence.coach.contract import Intent
from evidence.coach.intent import (
    BedrockIntentClassifier,
    asks_question,
    classify,
    classify_rules,
)
from evidence.coach.llm import ConverseClient
from evidence.plan.conversation import content_words, has_reference
from tests.unit.coach.coachkit import bedrock_client, converse_answer


@pytest.mark.parametrize(
    ("query", "intent", "explicit"),
    [
        ("explain chain rule", Intent.TUTORING, True),
        ("How do I solve a quadratic equation?", Intent.TUTORING, True),
        ("give me problems on integrals", Intent.PRACTICE, True),
        ("quiz me on derivatives", Intent.PRACTICE, True),
        ("help me with related rates problems like a ladder", Intent.TUTORING, True),
        ("my factoring keeps failing", Intent.TROUBLESHOOTING, True),
        ("I keep getting the wrong answer with the quotient rule", Intent.TROUBLESHOOTING, True),
        ("What is the difference between arithmetic and geometric sequences?", Intent.COMPARISON, True),
        ("What is a logarithm?", Intent.DEFINITION, True),
        ("define continuity", Intent.DEFINITION, True),
        ("do derivatives use limits?", Intent.DEFINITION, False),
        ("derivatives", Intent.TUTORING, False),
    ],
)
def test_rules(query: str, intent: Intent, explicit: bool) -> None:
    got = classify_rules(query)
    assert (got.intent, got.explicit) == (intent, explicit)


def test_topic_words_drop_cues_and_fillers() -> None:
    assert content_words("Can you explain the chain rule to me, please?") == ["chain", "rule"]
    assert content_words("give me some practice problems on integrals") == ["integrals"]
    assert content_words("I'm confused") == []
    assert content_words("x^2 - 5x + 6 = 0") == ["x^2", "5x", "6", "0"]


def test_references_and_questions() -> None:
    assert has_reference("can you explain that last step again?")
    assert has_reference("graph it")
    assert not has_reference("explain the chain rule")
    assert asks_question("when should I use integration by parts")
    assert not asks_question("derivatives?")


def test_the_requests_intent_wins() -> None:
    got = classify("give me problems on integrals", Intent.TUTORING)
    assert (got.intent, got.source, got.explicit) == (Intent.TUTORING, "request", True)


def test_bedrock_classifier_reads_a_json_answer() -> None:
    client = bedrock_client()
    converse = ConverseClient(region="us-east-1", model_id="anthropic.test", client=client, timeout_s=2.0)
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            converse_answer('Sure: {"intent": "practice", "explicit": true}'),
            {
                "modelId": "anthropic.test",
                "system": ANY,
                "messages": [{"role": "user", "content": [{"text": "drill me on limits"}]}],
                "inferenceConfig": {"maxTokens": 60, "temperature": 0.0},
            },
        )
        got = classify(
            "drill me on limits", None, classifier=BedrockIntentClassifier(converse), timeout_s=2.0
        )
        stub.assert_no_pending_responses()
    assert (got.intent, got.source, got.explicit) == (Intent.PRACTICE, "bedrock", True)


@pytest.mark.parametrize(
    ("answer", "error", "marker"),
    [
        ("I think it is tutoring", None, "intent:bedrock_bad_response"),
        (json.dumps({"intent": "chatting"}), None, "intent:bedrock_bad_response"),
        (None, "ThrottlingException", "intent:bedrock_throttled"),
        (None, "ValidationException", "intent:bedrock_error"),
    ],
)
def test_bedrock_classifier_failures_fall_back_to_the_rules(
    answer: str | None, error: str | None, marker: str
) -> None:
    client = bedrock_client()
    converse = ConverseClient(region="us-east-1", model_id="anthropic.test", client=client, timeout_s=2.0)
    degraded: list[str] = []
    with Stubber(client) as stub:
        if answer is not None:
            stub.add_response("converse", converse_answer(answer))
        else:
            assert error is not None
            stub.add_client_error("converse", service_error_code=error, http_status_code=400)
        got = classify(
            "give me problems on integrals",
            None,
            classifier=BedrockIntentClassifier(converse),
            # The stubbed answer is local, but on a loaded CI runner the worker thread can take
            # longer than the production default (0.2 s) to start; the budget is not under test.
            timeout_s=2.0,
            degraded=degraded,
        )
    assert (got.intent, got.source) == (Intent.PRACTICE, "rules")
    assert degraded == [marker]
