"""Batches on the deployed state machine: `StartExecution` named after the assessment id; the status,
the principal (for the owner check) and the summary read back with `DescribeExecution`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from evidence.assess.contract import (
    AssessmentExistsError,
    AssessmentNotFoundError,
    AssessmentStatus,
    BatchLaunchError,
)
from evidence.assess.models import AssessmentInput, CriterionResult
from evidence.errors import ServiceUnavailableError

#: What Step Functions answers when it is busy, not wrong: retried with backoff.
_TRANSIENT = frozenset(
    {"ThrottlingException", "TooManyRequestsException", "ServiceUnavailable", "InternalServerError"}
)
_GONE = frozenset({"ExecutionDoesNotExist", "InvalidArn"})


def execution_arn(state_machine_arn: str, name: str) -> str:
    """arn:…:stateMachine:NAME → arn:…:execution:NAME:EXECUTION (the documented ARN format)."""
    head, _, machine = state_machine_arn.rpartition(":stateMachine:")
    return f"{head}:execution:{machine}:{name}"


def _summarise(
    assessment_id: str, index: str, total: int, results: list[CriterionResult]
) -> AssessmentStatus:
    return AssessmentStatus(
        assessment_id=assessment_id,
        index=index,
        status="succeeded",
        criteria=total,
        done=len(results),
        failed=sum(r.status != "ok" for r in results),
        results=results,
    )


class StepFunctionsLauncher:
    def __init__(
        self,
        state_machine_arn: str,
        *,
        region: str | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.arn = state_machine_arn
        self._region = region
        self._client = client
        self._lock = threading.Lock()
        self._sleep = sleep

    @property
    def client(self) -> Any:
        """boto3 Step Functions client, imported and built at the first call (never at import)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import boto3

                    self._client = (
                        boto3.client("stepfunctions", region_name=self._region)
                        if self._region
                        else boto3.client("stepfunctions")
                    )
        return self._client

    def _call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        from evidence.retry import Backoff, RetriesExhausted, Retry, call_with_retries, current_deadline

        def classify(exc: Exception) -> Retry | None:
            if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in _TRANSIENT:
                return Retry()
            return None

        try:
            answer: dict[str, Any] = call_with_retries(
                lambda _: getattr(self.client, op)(**kwargs),
                backoff=Backoff(retries=3, base_s=0.2, max_s=2.0),
                classify=classify,
                deadline=current_deadline(),
                sleep=self._sleep,
            )
        except RetriesExhausted as exc:
            raise ServiceUnavailableError(
                f"Step Functions {op} is throttled; try again", retry_after_s=exc.retry_after_s
            ) from exc
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _GONE:
                raise AssessmentNotFoundError() from exc
            if code == "ExecutionAlreadyExists":
                raise AssessmentExistsError(
                    "an assessment with this id already exists", field="assessment_id"
                ) from exc
            raise BatchLaunchError(f"Step Functions {op} failed: {code or exc}") from exc
        except BotoCoreError as exc:
            raise BatchLaunchError(f"Step Functions {op} failed: {type(exc).__name__}") from exc
        return answer

    def start(self, assessment_id: str, batch: AssessmentInput) -> None:
        # No output_s3_uri and no null principal in the input: the state machine's defaults
        # (s3://<results>/batches/<execution name>, "") apply; JsonMerge would let a null win.
        self._call(
            "start_execution",
            stateMachineArn=self.arn,
            name=assessment_id,
            input=batch.model_dump_json(exclude_none=True),
        )

    def status(self, assessment_id: str, principal: str | None) -> AssessmentStatus:
        described = self._call("describe_execution", executionArn=execution_arn(self.arn, assessment_id))
        try:
            batch = AssessmentInput.model_validate_json(described.get("input") or "{}")
        except ValidationError as exc:
            # Started by someone else through StartExecution with another shape: not an API batch.
            raise AssessmentNotFoundError() from exc
        if batch.principal != principal:
            raise AssessmentNotFoundError()
        total = len(batch.criteria)
        state = str(described.get("status", ""))
        if state in {"RUNNING", "PENDING_REDRIVE"}:
            return AssessmentStatus(
                assessment_id=assessment_id, index=batch.index, status="running", criteria=total
            )
        if state != "SUCCEEDED":
            reason = f"execution {state.lower() or 'unknown'}"
            if described.get("error"):
                reason += f": {described['error']}"
            return AssessmentStatus(
                assessment_id=assessment_id, index=batch.index, status="failed", criteria=total, reason=reason
            )
        output = json.loads(described.get("output") or "{}")
        raw = output.get("results") if isinstance(output, dict) else None
        if not isinstance(raw, list):
            # Distributed Map writes its results to S3 (ResultWriter), not into the output: counts
            # of those are not read here; the results are under the batch's output location.
            return AssessmentStatus(
                assessment_id=assessment_id, index=batch.index, status="succeeded", criteria=total, done=total
            )
        results = [CriterionResult.model_validate(r) for r in raw]
        return _summarise(assessment_id, batch.index, total, results)
