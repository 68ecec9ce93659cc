"""The retriever's EMF metrics carry the reranker fallback the stack alarms on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidence import observability
from evidence.model import Plan, RetrieveResponse, Telemetry
from evidence.testing import lambda_context


def _response(degraded: list[str]) -> RetrieveResponse:
    return RetrieveResponse(
        hits=[],
        followups=[],
        evidence_xml="",
        valid_indexes=[],
        plan=Plan(query="q", normalized_query="q", profile="default"),
        telemetry=Telemetry(stages=[], path_used="hybrid", total_ms=1.0, degraded=degraded),
        can_answer=False,
        needs_clarification=False,
        confidence=0.0,
    )


@pytest.mark.parametrize(("degraded", "expected"), [(["rerank:timeout"], 1), (["other:x"], 0), ([], 0)])
def test_rerank_fallback_is_a_zero_or_one_metric(
    degraded: list[str], expected: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")

    def retrieve(event: Any, context: Any) -> dict[str, Any]:
        observability.record_retrieve(_response(degraded))
        return {}

    observability.lambda_handler("retriever", retrieve)({}, lambda_context("evidence-retriever"))
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    values = [doc[observability.RERANK_FALLBACKS] for doc in emf if observability.RERANK_FALLBACKS in doc]
    assert values == [[expected]]  # EMF writes a metric as a list of values
