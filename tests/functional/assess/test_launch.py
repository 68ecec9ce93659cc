"""Batch assessments started through the API, as the caller (evidence/assess/launch.py).

Through the retriever Lambda handler and `evidence serve` on loopback (test_access.py's `call`
fixture): the in-process launcher on a real embedded store in tmp, the access policy's tenants,
and the Step Functions launcher against moto running a stand-in of the batch state machine
(its Defaults/ApplyDefaults/Map/Summary states, with Pass states where the Lambdas would be).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from evidence.access import AccessPolicy, Authorizer
from evidence.api import runtime
from evidence.assess.launch import get_launcher
from evidence.assess.stepfunctions import execution_arn
from evidence.assess.threads import ThreadLauncher
from evidence.config import Settings
from evidence.service import EvidenceService
from evidence.testing import LambdaContext
from functions.retriever.handler import handler
from tests.functional.conftest import REGION
from tests.functional.test_access import (  # noqa: F401 (fixtures)
    ACME,
    ANON,
    AUDITOR,
    DOC,
    GLOBEX,
    POLICY,
    Call,
    call,
    guarded,
    lambda_event,
    tenants,
    transport,
)

CRITERIA = [
    {"id": "c1", "question": "Is data encrypted at rest?"},
    {"id": "c/2", "question": "Which cipher protects stored data?"},
    {"id": "c3", "question": "Is AES-256 used?"},
]
UNKNOWN_ID = "0" * 32


def wait(send: Call, who: str | None, assessment_id: str, timeout_s: float = 60) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while True:
        status, answer = send(who, "GET", f"/v1/assessments/{assessment_id}", None)
        assert status == 200, answer
        if answer["status"] != "running" or time.monotonic() > end:
            return dict(answer)
        assert answer["done"] is None or answer["done"] <= answer["criteria"]
        time.sleep(0.05)


# --- in-process launcher, open mode (no policy) -------------------------------------------------


@pytest.fixture(params=["lambda", "serve"])
def open_call(
    request: pytest.FixtureRequest, service: EvidenceService, context: LambdaContext
) -> Iterator[Call]:
    runtime.configure(service=service, settings=service.settings)
    with transport(request.param, context) as send:
        yield send


def test_start_poll_finish_in_process(open_call: Call, service: EvidenceService) -> None:
    assert open_call(None, "POST", "/v1/indexes/acme-docs/documents", DOC)[0] == 200
    status, started = open_call(None, "POST", "/v1/indexes/acme-docs/assessments", {"criteria": CRITERIA})
    assert status == 202, started
    aid = started["assessment_id"]
    assert started == {
        "assessment_id": aid,
        "status": "running",
        "index": "acme-docs",
        "criteria": 3,
        "status_url": f"/v1/assessments/{aid}",
    }
    done = wait(open_call, None, aid)
    assert done["status"] == "succeeded", done
    assert (done["criteria"], done["done"], done["failed"]) == (3, 3, 0)
    assert [r["id"] for r in done["results"]] == ["c1", "c/2", "c3"]
    assert all(r["status"] == "ok" and r["hits"] >= 1 for r in done["results"])
    # Persisted under the store: a new launcher (a restarted server) reads the same answer.
    path = service.settings.store_dir / "assessments" / f"{aid}.json"
    assert json.loads(path.read_text())["status"] == "succeeded"
    runtime.configure(service=service, settings=service.settings)
    assert open_call(None, "GET", f"/v1/assessments/{aid}", None) == (200, done)


def test_location_header_and_bad_input(service: EvidenceService, context: LambdaContext) -> None:
    service.index_document("acme-docs", _doc())
    event = lambda_event(None, "POST", "/v1/indexes/acme-docs/assessments", {"criteria": CRITERIA[:1]})
    response = handler(event, context)
    assert response["statusCode"] == 202
    aid = json.loads(response["body"])["assessment_id"]
    assert response["multiValueHeaders"]["Location"] == [f"/v1/assessments/{aid}"]

    def post(payload: Any) -> tuple[int, Any]:
        r = handler(lambda_event(None, "POST", "/v1/indexes/acme-docs/assessments", payload), context)
        return int(r["statusCode"]), json.loads(r["body"])["error"]

    for payload, field in (
        ({"criteria": CRITERIA, "principal": "someone-else"}, "principal"),
        ({"criteria": CRITERIA, "output_s3_uri": "s3://elsewhere/x"}, "output_s3_uri"),
        ({"criteria": []}, "criteria"),
        ({}, "criteria"),
        ({"criteria": [{"id": "a", "question": "q", "extra": 1}]}, "criteria.0.extra"),
        ({"criteria": [{"id": "a", "question": "   "}]}, "criteria.0.question"),
        ({"criteria": [{"id": "a", "question": "q"}, {"id": "a", "question": "r"}]}, "criteria"),
        ({"criteria": CRITERIA, "profile": "nope"}, "profile"),
        ({"criteria": [{"id": str(i), "question": "q"} for i in range(10_001)]}, "criteria"),
    ):
        status, error = post(payload)
        assert (status, error["field"]) == (422, field), (
            payload if len(str(payload)) < 300 else field,
            error,
        )
    for bad in ("nope", "0" * 31, "G" * 32, UNKNOWN_ID + "0"):
        r = handler(lambda_event(None, "GET", f"/v1/assessments/{bad}", None), context)
        assert r["statusCode"] == 422 and json.loads(r["body"])["error"]["field"] == "assessment_id"
    r = handler(lambda_event(None, "GET", f"/v1/assessments/{UNKNOWN_ID}", None), context)
    assert r["statusCode"] == 404 and json.loads(r["body"])["error"]["code"] == "assessment_not_found"


def test_a_batch_interrupted_by_a_restart_reads_as_failed(
    service: EvidenceService, context: LambdaContext
) -> None:
    """A status file left `running` by a process that is gone: failed, with the reason."""
    runtime.configure(service=service, settings=service.settings)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    root = service.settings.store_dir / "assessments"
    root.mkdir(parents=True)
    aid = "ab" * 16
    record = {
        "assessment_id": aid,
        "index": "acme-docs",
        "profile": "default",
        "principal": None,
        "status": "running",
        "criteria": 5,
        "done": 2,
        "failed": 0,
        "results": [{"id": "a", "status": "ok", "hits": 1}, {"id": "b", "status": "ok", "hits": 1}],
        "pid": int(gone.stdout),
        "incarnation": "f" * 32,
    }
    (root / f"{aid}.json").write_text(json.dumps(record))
    answer = json.loads(handler(lambda_event(None, "GET", f"/v1/assessments/{aid}", None), context)["body"])
    assert answer["status"] == "failed" and answer["reason"].startswith("interrupted")
    assert (answer["done"], answer["criteria"], len(answer["results"])) == (2, 5, 2)
    # A sibling process that is still alive (this one's parent, say) is still running it.
    (root / f"{aid}.json").write_text(json.dumps({**record, "pid": os.getppid()}))
    answer = json.loads(handler(lambda_event(None, "GET", f"/v1/assessments/{aid}", None), context)["body"])
    assert (answer["status"], answer["results"], answer["reason"]) == ("running", None, None)


def test_the_launcher_is_chosen_by_the_setting(settings: Settings) -> None:
    runtime.configure(settings=settings)
    assert isinstance(get_launcher(), ThreadLauncher)
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:evidence-batch"
    runtime.configure(settings=settings.model_copy(update={"batch_state_machine_arn": arn}))
    launcher = get_launcher()
    assert not isinstance(launcher, ThreadLauncher)
    assert launcher._client is None  # type: ignore[attr-defined]  # built at the first call, not before
    assert execution_arn(arn, "x1") == "arn:aws:states:us-east-1:123456789012:execution:evidence-batch:x1"
    runtime.reset()


# --- access policy: tenants ---------------------------------------------------------------------


def test_batches_run_as_their_caller(tenants: Call) -> None:  # noqa: F811 (the imported fixture)
    body = {"criteria": CRITERIA[:2]}
    status, started = tenants(ACME, "POST", "/v1/indexes/acme-docs/assessments", body)
    assert status == 202, started
    aid = started["assessment_id"]
    done = wait(tenants, ACME, aid)
    assert (done["status"], done["done"], done["failed"]) == ("succeeded", 2, 0)
    # Another tenant: refused on the index (403, as every route), and the batch is invisible to it.
    refused = tenants(GLOBEX, "POST", "/v1/indexes/acme-docs/assessments", body)
    assert refused[0] == 403 and refused[1]["error"]["field"] == "index"
    assert refused == tenants(GLOBEX, "POST", "/v1/indexes/acme-nothing/assessments", body)
    assert tenants(ANON, "POST", "/v1/indexes/acme-docs/assessments", body)[0] == 403
    unknown = tenants(GLOBEX, "GET", f"/v1/assessments/{UNKNOWN_ID}", None)
    assert unknown[0] == 404
    for other in (GLOBEX, AUDITOR, ANON):  # AUDITOR may read the index, but did not start the batch
        assert tenants(other, "GET", f"/v1/assessments/{aid}", None) == unknown
    # The body cannot choose whom the batch runs as.
    status, answer = tenants(ACME, "POST", "/v1/indexes/acme-docs/assessments", {**body, "principal": GLOBEX})
    assert (status, answer["error"]["field"]) == (422, "principal")


# --- Step Functions launcher (moto) -------------------------------------------------------------

RESULTS_BUCKET = "evidence-results"
#: The batch state machine's own data flow (infra/evidence_infra/batch.py) with Pass states in place
#: of the Lambda tasks: defaults merged under the input, one result per criterion, the summary.
STAND_IN = {
    "StartAt": "Defaults",
    "States": {
        "Defaults": {
            "Type": "Pass",
            "Parameters": {
                "defaults": {
                    "profile": "default",
                    "principal": "",
                    "output_s3_uri.$": f"States.Format('s3://{{}}/batches/{{}}', '{RESULTS_BUCKET}', "
                    "$$.Execution.Name)",
                },
                "input.$": "$",
            },
            "Next": "ApplyDefaults",
        },
        "ApplyDefaults": {
            "Type": "Pass",
            "Parameters": {"merged.$": "States.JsonMerge($.defaults, $.input, false)"},
            "OutputPath": "$.merged",
            "Next": "Criteria",
        },
        "Criteria": {
            "Type": "Map",
            "ItemsPath": "$.criteria",
            "ResultPath": "$.results",
            "ItemSelector": {"output_uri.$": "$.output_s3_uri", "criterion.$": "$$.Map.Item.Value"},
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "Format",
                "States": {
                    "Format": {
                        "Type": "Pass",
                        "Parameters": {
                            "id.$": "$.criterion.id",
                            "status": "ok",
                            "result_uri.$": "States.Format('{}/{}.json', $.output_uri, $.criterion.id)",
                            "hits": 3,
                        },
                        "End": True,
                    }
                },
            },
            "Next": "Summary",
        },
        "Summary": {
            "Type": "Pass",
            "Parameters": {
                "batch_id.$": "$$.Execution.Name",
                "index.$": "$.index",
                "profile.$": "$.profile",
                "output_uri.$": "$.output_s3_uri",
                "results.$": "$.results",
            },
            "End": True,
        },
    },
}


@pytest.mark.parametrize("execute", [False, True], ids=["running", "finished"])
def test_step_functions_launcher(
    execute: bool,
    guarded: EvidenceService,  # noqa: F811 (the imported fixture)
    context: LambdaContext,
    aws_env: None,
) -> None:
    import boto3
    from moto import mock_aws

    guarded.index_document("acme-docs", _doc())
    with mock_aws(config={"stepfunctions": {"execute_state_machine": execute}}):
        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(
            name="evidence-batch",
            definition=json.dumps(STAND_IN),
            roleArn="arn:aws:iam::123456789012:role/evidence-batch",
        )["stateMachineArn"]
        settings = guarded.settings.model_copy(update={"batch_state_machine_arn": arn})
        runtime.configure(
            service=guarded, settings=settings, authorizer=Authorizer(AccessPolicy.model_validate(POLICY))
        )

        def call(who: str | None, method: str, path: str, payload: Any) -> tuple[int, Any]:
            r = handler(lambda_event(who, method, path, payload), context)
            return int(r["statusCode"]), json.loads(r["body"])

        status, started = call(ACME, "POST", "/v1/indexes/acme-docs/assessments", {"criteria": CRITERIA})
        assert status == 202, started
        aid = started["assessment_id"]
        (execution,) = sfn.list_executions(stateMachineArn=arn)["executions"]
        assert execution["name"] == aid
        sent = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
        # The caller from the request context; no output location: the state machine's default applies.
        assert sent == {"index": "acme-docs", "profile": "default", "criteria": CRITERIA, "principal": ACME}
        assert not (guarded.settings.store_dir / "assessments").exists()  # nothing stored locally

        answer = wait(call, ACME, aid) if execute else call(ACME, "GET", f"/v1/assessments/{aid}", None)[1]
        if not execute:  # moto leaves it RUNNING: no progress to tell
            assert answer == {
                "assessment_id": aid,
                "index": "acme-docs",
                "status": "running",
                "criteria": 3,
                "done": None,
                "failed": None,
                "results": None,
                "reason": None,
            }
        else:
            assert (answer["status"], answer["done"], answer["failed"]) == ("succeeded", 3, 0)
            assert [r["result_uri"] for r in answer["results"]] == [
                f"s3://{RESULTS_BUCKET}/batches/{aid}/{c['id']}.json" for c in CRITERIA
            ]
        for other in (GLOBEX, AUDITOR, ANON):
            assert call(other, "GET", f"/v1/assessments/{aid}", None) == call(
                ACME, "GET", f"/v1/assessments/{UNKNOWN_ID}", None
            )
        assert call(ACME, "GET", f"/v1/assessments/{UNKNOWN_ID}", None)[0] == 404
        assert call(GLOBEX, "POST", "/v1/indexes/acme-docs/assessments", {"criteria": CRITERIA})[0] == 403
        assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 1


def test_step_functions_throttling_and_failures_are_typed() -> None:
    """Throttling is retried, then a 503 with Retry-After; other refusals are a 502 (botocore Stubber)."""
    import boto3
    from botocore.stub import Stubber

    from evidence.assess.contract import BatchLaunchError
    from evidence.assess.stepfunctions import StepFunctionsLauncher
    from evidence.errors import ServiceUnavailableError

    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:evidence-batch"
    client = boto3.client(
        "stepfunctions", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    waits: list[float] = []
    launcher = StepFunctionsLauncher(arn, client=client, sleep=waits.append)
    from evidence.assess import AssessmentInput, Criterion

    batch = AssessmentInput(index="acme-docs", criteria=[Criterion(id="c", question="q")], principal=ACME)
    with Stubber(client) as stub:
        stub.add_client_error("start_execution", "ThrottlingException", http_status_code=400)
        stub.add_response("start_execution", {"executionArn": execution_arn(arn, "a" * 32), "startDate": 0})
        launcher.start("a" * 32, batch)
        assert len(waits) == 1
        for _ in range(4):
            stub.add_client_error("start_execution", "ThrottlingException", http_status_code=400)
        with pytest.raises(ServiceUnavailableError):
            launcher.start("b" * 32, batch)
        stub.add_client_error("start_execution", "StateMachineDoesNotExist", http_status_code=400)
        with pytest.raises(BatchLaunchError):
            launcher.start("c" * 32, batch)


def _doc() -> Any:
    from evidence.model import IndexDocumentRequest

    return IndexDocumentRequest.model_validate(DOC)
