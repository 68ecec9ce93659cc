"""The three steps of a criterion (plan → retrieve → format) and the whole chain in-process.

The Step Functions state machine runs one Map iteration per criterion through three Lambda
tasks; `evidence assess` runs the same three steps in-process (`run_assessment`). Between
steps only `CriterionTask` pointers travel: a step that produces evidence writes it to the
result store and passes its URI. A failed criterion becomes a `failed` entry; the batch goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evidence.assess.models import AssessmentInput, Criterion, CriterionResult, CriterionTask
from evidence.assess.store import ResultStore, child_uri, store_for
from evidence.errors import EvidenceError, RequestValidationError
from evidence.model import FormatRequest, PlanRequest, RetrieveRequest, RetrieveResponse

if TYPE_CHECKING:
    from evidence.service import EvidenceService

#: (criteria done, total, id of the criterion starting now; "" at the end)
ProgressFn = Callable[[int, int, str], None]


def _task(payload: dict[str, Any] | CriterionTask) -> CriterionTask:
    """The step's payload, once its principal may read its index: each step checks again,
    because each is a separate Lambda invocation that trusts nothing it was handed."""
    from evidence.access import Access
    from evidence.api import runtime

    if isinstance(payload, CriterionTask):
        task = payload
    else:
        try:
            task = CriterionTask.model_validate(payload)
        except ValidationError as exc:
            from evidence.api.errors import validation_error

            raise validation_error(exc) from exc
    runtime.get_authorizer().check(task.principal, task.index, Access.READ)
    return task


def plan_step(service: EvidenceService, payload: dict[str, Any] | CriterionTask) -> CriterionTask:
    task = _task(payload)
    q = task.criterion.question
    plan = service.plan(PlanRequest(query=q, criterion_question=q, profile=task.profile))
    return task.model_copy(update={"plan": plan})


def retrieve_step(
    service: EvidenceService, payload: dict[str, Any] | CriterionTask, store: ResultStore
) -> CriterionTask:
    task = _task(payload)
    q = task.criterion.question
    filters = task.plan.filters if task.plan is not None and task.plan.filters else None
    request = RetrieveRequest(query=q, criterion_question=q, profile=task.profile, filters=filters)
    response = service.retrieve(task.index, request)
    uri = child_uri(task.output_uri, task.criterion.id, ".retrieve.json")
    store.put_json(uri, response.model_dump(mode="json"))
    return task.model_copy(update={"retrieve_uri": uri, "hits": len(response.hits)})


def format_step(
    service: EvidenceService, payload: dict[str, Any] | CriterionTask, store: ResultStore
) -> CriterionResult:
    task = _task(payload)
    if task.retrieve_uri is None:
        raise RequestValidationError(
            "the format step needs the retrieve step's retrieve_uri", field="retrieve_uri"
        )
    retrieved = RetrieveResponse.model_validate(store.get_json(task.retrieve_uri))
    formatted = service.format(FormatRequest(hits=retrieved.hits, followups=retrieved.followups))
    result = {
        "id": task.criterion.id,
        "question": task.criterion.question,
        "index": task.index,
        "profile": task.profile,
        "status": "ok",
        "evidence_xml": formatted.evidence_xml,
        "valid_indexes": formatted.valid_indexes,
        "hits": [h.model_dump(mode="json") for h in retrieved.hits],
        "followups": [f.model_dump(mode="json") for f in retrieved.followups],
        "plan": (task.plan or retrieved.plan).model_dump(mode="json"),
        "telemetry": retrieved.telemetry.model_dump(mode="json"),
        "can_answer": retrieved.can_answer,
        "confidence": retrieved.confidence,
        "needs_clarification": retrieved.needs_clarification,
    }
    uri = child_uri(task.output_uri, task.criterion.id, ".json")
    store.put_json(uri, result)
    return CriterionResult(id=task.criterion.id, status="ok", result_uri=uri, hits=len(retrieved.hits))


def failure(criterion_id: str, exc: BaseException) -> CriterionResult:
    if isinstance(exc, ValidationError):
        from evidence.api.errors import validation_error

        exc = validation_error(exc)
    if isinstance(exc, EvidenceError):
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.field:
            error["field"] = exc.field
    else:
        error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
    return CriterionResult(id=criterion_id, status="failed", error=error)


def run_criterion(
    service: EvidenceService,
    criterion: Criterion,
    *,
    index: str,
    profile: str,
    output_uri: str,
    store: ResultStore,
    principal: str | None = None,
) -> CriterionResult:
    """One Map iteration in-process: the same payloads as the state machine's, failures caught."""
    try:
        task = CriterionTask(
            index=index, profile=profile, criterion=criterion, output_uri=output_uri, principal=principal
        )
        # Round-trip through JSON as the state machine would, so a payload that cannot travel fails here too.
        planned = plan_step(service, json.loads(task.model_dump_json()))
        retrieved = retrieve_step(service, json.loads(planned.model_dump_json()), store)
        return format_step(service, json.loads(retrieved.model_dump_json()), store)
    except Exception as exc:  # one criterion never fails the batch
        return failure(criterion.id, exc)


def run_assessment(
    service: EvidenceService,
    batch: AssessmentInput,
    *,
    store: ResultStore | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """The whole batch; returns the summary (pointers only, as the state machine's output)."""
    base = batch.output_s3_uri or f"mem://assessments/{int(time.time())}"
    store = store or store_for(base)
    results: list[CriterionResult] = []
    total = len(batch.criteria)
    for i, criterion in enumerate(batch.criteria):
        if progress:
            progress(i, total, criterion.id)
        results.append(
            run_criterion(
                service,
                criterion,
                index=batch.index,
                profile=batch.profile,
                output_uri=base,
                store=store,
                principal=batch.principal,
            )
        )
    if progress:
        progress(total, total, "")
    failed = sum(r.status != "ok" for r in results)
    return {
        "index": batch.index,
        "profile": batch.profile,
        "output_uri": base,
        "total": total,
        "succeeded": total - failed,
        "failed": failed,
        "results": [r.model_dump(exclude_none=True) for r in results],
    }
