"""The local interpreter's bridge (evidence/local_sfn.py, infra/asl/run.mjs) on small
definitions: how a handler's answer and its errors reach Retry/Catch, what is refused, and the
interpreter gap bridged by the specification. Needs Node.js and `make batch-asl-deps`, hence infra."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidence.config import Settings
from evidence.errors import ConfigurationError
from evidence.local_sfn import AslBundle, LocalStateMachineError, Machine, execute

pytestmark = [pytest.mark.infra]

ARN = "arn:aws:lambda:us-east-1:123456789012:function:Echo"


def one_task(**task: Any) -> Machine:
    state = {"Type": "Task", "Resource": ARN, "End": True, **task}
    return Machine(definition={"StartAt": "Echo", "States": {"Echo": state}}, functions={ARN: "echo"})


def test_the_handler_gets_the_parameters_and_result_path_dollar_replaces_the_input() -> None:
    seen: list[Any] = []

    def invoke(function: str, event: Any) -> Any:
        seen.append((function, event))
        return {"answer": event["n"] + 1}

    machine = one_task(Parameters={"n.$": "$.value", "name.$": "$$.Execution.Name"}, ResultPath="$")
    execution = execute(machine, {"value": 41, "other": "kept?"}, name="run-1", invoke=invoke)
    assert seen == [("echo", {"n": 41, "name": "run-1"})]
    # The spec: "$" replaces the whole input (aws-local-stepfunctions 3.0 alone would nest it under "$").
    assert (execution.status, execution.output) == ("SUCCEEDED", {"answer": 42})


def test_a_handler_error_is_named_by_its_class_for_retry_and_catch() -> None:
    class validation_error(Exception):  # named as batch steps name their errors
        pass

    calls: list[int] = []

    def invoke(function: str, event: Any) -> Any:
        calls.append(1)
        raise validation_error("bad question")

    machine = one_task(
        Retry=[{"ErrorEquals": ["validation_error"], "MaxAttempts": 1}],
        Catch=[{"ErrorEquals": ["validation_error"], "ResultPath": "$.error", "Next": "Failed"}],
    )
    machine.definition["States"]["Failed"] = {"Type": "Pass", "End": True}
    execution = execute(machine, {"x": 1}, name="run-2", invoke=invoke, retry_interval_ms=0)
    assert len(calls) == 2  # one retry
    assert execution.status == "SUCCEEDED"
    assert execution.output["error"]["Error"] == "validation_error"
    assert json.loads(execution.output["error"]["Cause"]) == {
        "errorType": "validation_error",
        "errorMessage": "bad question",
    }
    assert [r["errors"] for r in execution.retried] == [["validation_error"]]


def test_an_answer_that_is_not_json_fails_as_lambda_says() -> None:
    execution = execute(one_task(), {}, name="run-3", invoke=lambda f, e: {"when": object()})
    assert (execution.status, execution.error) == ("FAILED", "Runtime.MarshalError")


def test_what_cannot_run_is_refused() -> None:
    bad = Machine(definition={"StartAt": "A", "States": {"A": {"Type": "Pazz", "End": True}}}, functions={})
    with pytest.raises(LocalStateMachineError, match="asl-validator refused"):
        execute(bad, {}, name="run-4")
    service_integration = Machine(
        definition={
            "StartAt": "A",
            "States": {"A": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "End": True}},
        },
        functions={},
    )
    with pytest.raises(LocalStateMachineError, match="only direct Lambda invocations"):
        execute(service_integration, {}, name="run-5")
    unresolved = AslBundle(
        definition={"Fn::Join": ["", ['{"a": "', {"Ref": "Elsewhere"}, '"}']]},
        functions={},
        results_bucket="R",
    )
    with pytest.raises(ConfigurationError, match="cannot resolve"):
        unresolved.resolve(results_bucket="b")
    with pytest.raises(ConfigurationError, match="make batch-asl"):
        AslBundle.load(Path("/nonexistent/batch.json"))


def test_the_local_launcher_needs_a_results_bucket(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence.api import runtime
    from evidence.assess import launch
    from evidence.assess.launch import add_launcher, get_launcher
    from evidence.assess.threads import ThreadLauncher
    from evidence.local_sfn import LocalStateMachineLauncher, local_launcher

    asl = tmp_path / "batch.json"
    runtime.configure(settings=settings.model_copy(update={"batch_local_asl": asl}))
    monkeypatch.setattr(launch, "_developer_launchers", [])
    assert isinstance(get_launcher(), ThreadLauncher)  # the Lambda layer has no local interpreter
    add_launcher(local_launcher)  # what `evidence serve` does
    with pytest.raises(ConfigurationError, match="EVIDENCE_RESULTS_BUCKET"):
        get_launcher()
    runtime.configure(settings=settings.model_copy(update={"batch_local_asl": asl, "results_bucket": "b"}))
    assert isinstance(get_launcher(), LocalStateMachineLauncher)
    runtime.reset()
