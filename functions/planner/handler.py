"""Planner: plain JSON in and out (a Step Functions task; also served as POST /v1/plan).

`{query, criterion_question?, profile?, filters?}` → the plan. A batch-chain task payload
(`{index, profile, criterion, output_uri}`) comes back with its `plan` added.
Bad input raises `RequestValidationError`, which a state machine can Catch by name.
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: Any, context: Any) -> dict[str, Any]:
    from evidence.api.tasks import plan  # at the first invocation: the module import stays near-free

    return plan(event)


handler = lambda_handler("planner", _handle)
