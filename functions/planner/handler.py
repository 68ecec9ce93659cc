"""Planner: plain JSON in and out (a Step Functions task; also served as POST /v1/plan).

`{query, criterion_question?, profile?, filters?}` → the plan. A batch-chain task payload
(`{index, profile, criterion, output_uri}`) comes back with its `plan` added.
Bad input raises `RequestValidationError`, which a state machine can Catch by name.
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from pydantic import ValidationError

    from evidence.api import runtime

    service = runtime.get_service()
    if isinstance(event, dict) and (event.get("task") == "plan" or "criterion" in event):
        from evidence.assess import plan_step

        return plan_step(service, event).model_dump(mode="json")
    from evidence.api.errors import validation_error
    from evidence.model import PlanRequest

    try:
        request = PlanRequest.model_validate(event)
    except ValidationError as exc:
        raise validation_error(exc) from exc
    return service.plan(request).model_dump(mode="json")


_handler = lambda_handler("planner", _handle)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    result: dict[str, Any] = _handler(event, context)
    return result
