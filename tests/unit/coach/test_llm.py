"""The Converse client's request, answer parsing, error mapping and hard time budget; HyDE blending."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from botocore.stub import Stubber

from evidence.coach.hyde import HydeGenerator, blend
from evidence.coach.llm import ConverseClient, LLMError
from tests.unit.coach.coachkit import bedrock_client, converse_answer


def test_hyde_passage_through_converse() -> None:
    client = bedrock_client()
    converse = ConverseClient(region="us-east-1", model_id="m", client=client, timeout_s=2.0)
    hyde = HydeGenerator(converse, max_tokens=80)
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            converse_answer("The chain rule differentiates composite functions."),
            {
                "modelId": "m",
                "system": [{"text": hyde_system()}],
                "messages": [
                    {"role": "user", "content": [{"text": "Subject: calculus\nQuestion: chain rule?"}]}
                ],
                "inferenceConfig": {"maxTokens": 80, "temperature": 0.0},
            },
        )
        text = hyde.passage("chain rule?", subject="calculus", timeout_s=1.0)
    assert text == "The chain rule differentiates composite functions."


def hyde_system() -> str:
    from evidence.coach import hyde

    return hyde._SYSTEM


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("ThrottlingException", "throttled"),
        ("InternalServerException", "unavailable"),
        ("AccessDeniedException", "error"),
    ],
)
def test_errors_map_to_reasons(code: str, reason: str) -> None:
    client = bedrock_client()
    converse = ConverseClient(region="us-east-1", model_id="m", client=client)
    with Stubber(client) as stub:
        stub.add_client_error("converse", service_error_code=code, http_status_code=400)
        with pytest.raises(LLMError) as info:
            converse.complete("s", "u")
    assert info.value.reason == reason


def test_empty_answer_is_a_bad_response() -> None:
    client = bedrock_client()
    converse = ConverseClient(region="us-east-1", model_id="m", client=client)
    with Stubber(client) as stub:
        stub.add_response("converse", converse_answer("   "))
        with pytest.raises(LLMError) as info:
            converse.complete("s", "u")
    assert info.value.reason == "bad_response"


class _SlowClient:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.done = threading.Event()
        self.release = threading.Event()  # lets a test end the slow call instead of waiting it out

    def converse(self, **_: Any) -> dict[str, Any]:
        self.release.wait(self.delay)
        self.done.set()
        return converse_answer("late")


def test_the_time_budget_is_hard() -> None:
    slow = _SlowClient(60.0)  # a caller that waited for it would take a minute
    converse = ConverseClient(region="us-east-1", model_id="m", client=slow, timeout_s=120.0)
    t0 = time.perf_counter()
    try:
        with pytest.raises(LLMError) as info:
            converse.complete("s", "u", timeout_s=0.05)
        assert info.value.reason == "timeout"
        assert time.perf_counter() - t0 < 20, "the caller does not wait for the slow call"
    finally:
        slow.release.set()
    with pytest.raises(LLMError):
        converse.complete("s", "u", timeout_s=0.0)


def test_blend_is_the_normalised_mean() -> None:
    q = np.array([1.0, 0.0], dtype=np.float32)
    h = np.array([0.0, 1.0], dtype=np.float32)
    b = blend(q, h)
    assert np.allclose(b, [2**-0.5, 2**-0.5]) and np.isclose(np.linalg.norm(b), 1.0)
    assert np.allclose(blend(q, -q), q), "opposite vectors: the query is kept"
