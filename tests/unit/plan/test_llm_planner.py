"""The Bedrock Converse planner through botocore's Stubber: the tool plan, validation, fallbacks."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from evidence.plan.llm import PLAN_SCHEMA, TOOL_NAME, BedrockPlanner, validate_plan
from evidence.plan.verbatim import default_rules

QUESTION = "How long does Lipravex stay in the body?"
GOOD = {
    "entity": "Lipravex",
    "query_mode": "ATTRIBUTE",
    "attribute": "half_life",
    "candidate_sections": ["pharmacokinetics", "not_a_section"],
    "search_phrases": ["half-life", "elimination half-life", "t1/2"],
    "extraction_level": "sentence",
}


def planner(timeout_s: float = 2.0) -> tuple[BedrockPlanner, Any, Any]:
    client = boto3.client(
        "bedrock-runtime", region_name="eu-west-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    return (
        BedrockPlanner(
            model_id="anthropic.test-v1:0", region="eu-west-1", timeout_s=timeout_s, client=client
        ),
        Stubber(client),
        client,
    )


def tool_response(plan: Any) -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": TOOL_NAME, "input": plan}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 10, "outputTokens": 10, "totalTokens": 20},
        "metrics": {"latencyMs": 5},
    }


def test_request_sends_only_the_question_at_temperature_zero_with_the_schema() -> None:
    p, _, _ = planner()
    req = p.request(QUESTION)
    assert req["messages"] == [{"role": "user", "content": [{"text": QUESTION}]}]
    assert req["inferenceConfig"]["temperature"] == 0.0
    tool = req["toolConfig"]["tools"][0]["toolSpec"]
    assert tool["name"] == TOOL_NAME and tool["inputSchema"]["json"] is PLAN_SCHEMA
    assert req["toolConfig"]["toolChoice"] == {"tool": {"name": TOOL_NAME}}


def test_a_valid_tool_plan_is_used() -> None:
    p, stub, _ = planner()
    stub.add_response("converse", tool_response(GOOD), p.request(QUESTION))
    with stub:
        out = p.plan(QUESTION, known_entities=["lipravex"])
    stub.assert_no_pending_responses()
    assert out.planner == "llm" and out.degraded == []
    assert out.plan.attribute == "half_life"
    assert out.plan.candidate_sections == ("pharmacokinetics",)  # unknown section names dropped
    assert out.plan.entity == "lipravex"  # the index's spelling of the entity


def test_a_json_text_answer_is_accepted() -> None:
    p, stub, _ = planner()
    import json

    resp = tool_response(GOOD)
    resp["output"]["message"]["content"] = [{"text": json.dumps(GOOD)}]
    stub.add_response("converse", resp, p.request(QUESTION))
    with stub:
        assert p.plan(QUESTION).planner == "llm"


@pytest.mark.parametrize(
    ("content", "marker"),
    [
        (
            [{"toolUse": {"toolUseId": "t", "name": TOOL_NAME, "input": {**GOOD, "query_mode": "ANSWER"}}}],
            "planner_invalid_plan",
        ),
        (
            [{"toolUse": {"toolUseId": "t", "name": TOOL_NAME, "input": {**GOOD, "extra": 1}}}],
            "planner_invalid_plan",
        ),
        (
            [{"toolUse": {"toolUseId": "t", "name": TOOL_NAME, "input": {**GOOD, "search_phrases": []}}}],
            "planner_invalid_plan",
        ),
        ([{"text": "The half-life is 19 hours."}], "planner_invalid_plan"),
        ([], "planner_invalid_plan"),
    ],
)
def test_invalid_plans_fall_back_to_the_rules(content: list[Any], marker: str) -> None:
    p, stub, _ = planner()
    resp = tool_response(GOOD)
    resp["output"]["message"]["content"] = content
    stub.add_response("converse", resp, p.request(QUESTION))
    with stub:
        out = p.plan(QUESTION)
    assert out.planner == "fallback" and out.degraded == [marker]
    assert out.plan.attribute == "half_life"  # the rules' plan


def test_service_errors_fall_back_to_the_rules() -> None:
    p, stub, _ = planner()
    stub.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    with stub:
        out = p.plan(QUESTION)
    assert out.planner == "fallback" and out.degraded == ["planner_error"]
    assert "ThrottlingException" in out.detail


def _wait_until_consumed(stub: Any, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while True:
        try:
            stub.assert_no_pending_responses()
            return
        except AssertionError:
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


def test_the_time_budget_is_enforced() -> None:
    p, stub, client = planner(timeout_s=0.2)
    release = threading.Event()

    def slow(**_: Any) -> None:
        release.wait(60.0)  # a planner that waited for the model would take a minute

    client.meta.events.register_first("before-parameter-build.bedrock-runtime.Converse", slow)
    stub.add_response("converse", tool_response(GOOD), p.request(QUESTION))
    with stub:
        t0 = time.perf_counter()
        out = p.plan(QUESTION)
        elapsed = time.perf_counter() - t0
        release.set()
        _wait_until_consumed(stub)  # the abandoned call finishes inside the stubber
    assert out.planner == "fallback" and out.degraded == ["planner_timeout"]
    assert elapsed < 20


def test_validate_plan_names_the_problem() -> None:
    rules = default_rules()
    with pytest.raises(ValueError, match="missing"):
        validate_plan({"entity": None}, rules)
    with pytest.raises(ValueError, match="snake_case"):
        validate_plan({**GOOD, "attribute": "Half Life"}, rules)
    with pytest.raises(ValueError, match="JSON object"):
        validate_plan([1], rules)
    assert validate_plan({**GOOD, "entity": "  "}, rules).entity is None
