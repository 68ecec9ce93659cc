"""The JSON tasks of the planner, formatter and retriever Lambdas (the HTTP API aside).

Each function takes the Lambda event: a batch-chain task payload (Step Functions, see
`evidence.assess`) runs its step and answers with pointers; any other event is the
function's request model, validated (`RequestValidationError` naming the field, which a
state machine can Catch by name) and handed to one service call.

A batch step that fails raises a `BatchStepError` named after the error's code: Lambda reports
an unhandled exception to Step Functions by its class name, and the state machine's
`CriterionFailed` state records that name as the criterion's `error.code`. So a criterion
refused by the access policy reads `forbidden` there, as in `evidence assess` (`assess.failure`),
not `AccessDeniedError`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from evidence.api import runtime
from evidence.api.errors import validation_error
from evidence.assess import S3Store, failure, format_step, plan_step, retrieve_step
from evidence.model import FormatRequest, PlanRequest

if TYPE_CHECKING:
    from evidence.service import EvidenceService

M = TypeVar("M", bound=BaseModel)


class BatchStepError(Exception):
    """A batch step's failure, as the state machine sees it (the class is named after the code)."""

    code = "internal_error"


@functools.cache
def _named(code: str) -> type[BatchStepError]:
    return type(code, (BatchStepError,), {"code": code, "__module__": __name__})


def batch_step(run: Callable[[], BaseModel], **dump: Any) -> dict[str, Any]:
    """Run one step of the batch chain; a failure is re-raised under its code's name (the cause kept)."""
    try:
        result = run()
    except Exception as exc:
        error = failure("", exc).error or {}
        code = str(error.get("code", "internal_error"))
        raise _named(code)(str(error.get("message", exc))) from exc
    return result.model_dump(mode="json", **dump)


def is_task(event: Any, step: str, marker: str) -> bool:
    """A batch-chain payload: it names its step, or carries the field only that step's input has."""
    return isinstance(event, dict) and (event.get("task") == step or marker in event)


def service_call(
    event: Any, model: type[M], call: Callable[[EvidenceService, M], BaseModel]
) -> dict[str, Any]:
    """`event` validated as `model`, one call on the container's service, the response as JSON."""
    try:
        request = model.model_validate(event)
    except ValidationError as exc:
        raise validation_error(exc) from exc
    return call(runtime.get_service(), request).model_dump(mode="json")


def plan(event: Any) -> dict[str, Any]:
    """`{query, criterion_question?, profile?, filters?}` → the plan; a plan task → the task plus its plan."""
    if is_task(event, "plan", "criterion"):
        return batch_step(lambda: plan_step(runtime.get_service(), event))
    return service_call(event, PlanRequest, lambda service, request: service.plan(request))


def format_evidence(event: Any) -> dict[str, Any]:
    """`{hits, followups}` → `{evidence_xml, valid_indexes}`; a format task (with `retrieve_uri`)
    → the stored retrieval formatted, its result written next to it, and a pointer back."""
    if is_task(event, "format", "retrieve_uri"):
        return batch_step(lambda: format_step(runtime.get_service(), event, S3Store()), exclude_none=True)
    return service_call(event, FormatRequest, lambda service, request: service.format(request))


def retrieve(event: Any) -> dict[str, Any]:
    """A retrieve task → its evidence written to the result store, a pointer back."""
    return batch_step(lambda: retrieve_step(runtime.get_service(), event, S3Store()))
