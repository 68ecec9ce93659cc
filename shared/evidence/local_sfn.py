"""The batch state machine executed locally: the ASL the CDK stack synthesizes, run by
aws-local-stepfunctions (Node: `infra/asl/run.mjs`), every Lambda task answered by the real
handler of that function in this process.

The ASL comes from `infra/batch_asl.py` (`make batch-asl` writes `build/asl/batch.json`): the
state machine's `DefinitionString` exactly as in the template, plus which Lambda each
`Fn::GetAtt` names and which bucket the results `Ref` names. `AslBundle.resolve` turns those
tokens into ARNs and the bucket name; nothing else in the definition is touched.

The Node runner validates the definition with asl-validator, then executes it. For each Task
state it writes the state's effective input (after `InputPath`/`Parameters`, as the interpreter
produced it) to its stdout; `execute` reads it, calls `functions/<name>/handler.py` with that
event, and writes the handler's answer back, or its exception as Lambda reports one
(`errorType` = the exception's class name) for the state's `Retry`/`Catch` to match. The
bridge is a pair of pipes, not a port: nothing else on the machine can call the handlers
through it. Invocations run one at a time, in the calling thread (one Lambda container): the
interpreter still keeps up to `MaxConcurrency` iterations in flight.

Not emulated (docs/infra.md#the-batch-state-machine-executed-locally): IAM (the state machine's role,
the functions' roles), service quotas and throttling (unless injected through `faults`),
exact timing (retry pauses can be shortened; Lambda timeouts are not enforced), the functions'
own environment (the handlers run with this process's settings and store).

A developer tool (infra/bundle.py's DEV_MODULES): it calls `evidence.invoke` and `evidence.testing`,
which the Lambda layer leaves out. `evidence serve` adds `local_launcher` to the launchers
(`evidence.assess.launch.add_launcher`) so that `EVIDENCE_BATCH_LOCAL_ASL` takes effect.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evidence.assess.models import AssessmentInput, CriterionResult
from evidence.assess.threads import ThreadLauncher
from evidence.errors import ConfigurationError, EvidenceError

#: Placeholders for what only a deployment knows; they appear in ARNs and never reach AWS.
REGION = "us-east-1"
ACCOUNT = "123456789012"
#: Step Functions' limit on the input or output of a state, a task, or an execution.
PAYLOAD_LIMIT_BYTES = 256 * 1024

#: (state name, function name, event) -> an error name to answer instead of running the handler
#: (Lambda throttled the call: the function never ran), or None to run it.
Fault = Callable[[str, str, dict[str, Any]], str | None]
Invoke = Callable[[str, Any], Any]


class LocalStateMachineError(EvidenceError):
    """The local interpreter could not run the definition (refused by asl-validator, or the
    Node process failed): a fault of the setup, not of the batch's input."""

    code = "local_state_machine_error"


@dataclass(frozen=True)
class AslBundle:
    """The batch state machine as synthesized: its definition with the template's tokens."""

    definition: Any  # the template's DefinitionString: a string or an Fn::Join of strings and tokens
    functions: dict[str, str]  # logical id of an AWS::Lambda::Function -> functions/<name>
    results_bucket: str  # logical id of the results bucket
    name: str = "evidence-batch"  # the state machine's name ($$.StateMachine.Name)

    @classmethod
    def load(cls, path: Path) -> AslBundle:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(
                definition=raw["definition"],
                functions=dict(raw["functions"]),
                results_bucket=str(raw["results_bucket"]),
                name=str(raw.get("name", "evidence-batch")),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(
                f"cannot read the batch state machine's ASL from {path}: {exc}; "
                "write it with `make batch-asl` (build/asl/batch.json)"
            ) from exc

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "definition": self.definition,
            "functions": self.functions,
            "results_bucket": self.results_bucket,
        }

    def resolve(self, *, results_bucket: str, region: str = REGION, account: str = ACCOUNT) -> Machine:
        """The definition with each function's ARN and the results bucket's name in place of its token."""
        arns = {
            logical: f"arn:aws:lambda:{region}:{account}:function:{logical}" for logical in self.functions
        }
        refs = {
            self.results_bucket: results_bucket,
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }

        def token(value: Any) -> str:
            if isinstance(value, str):
                return value
            if isinstance(value, Mapping) and set(value) == {"Ref"} and value["Ref"] in refs:
                return refs[value["Ref"]]
            if isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}:
                logical, attribute = value["Fn::GetAtt"]
                if logical in arns and attribute == "Arn":
                    return arns[logical]
            if isinstance(value, Mapping) and set(value) == {"Fn::Join"}:
                separator, parts = value["Fn::Join"]
                return str(separator).join(token(p) for p in parts)
            raise ConfigurationError(
                f"the state machine's definition holds a token this bridge cannot resolve: {value}"
            )

        definition = json.loads(token(self.definition))
        return Machine(
            definition=definition, functions={arns[k]: v for k, v in self.functions.items()}, name=self.name
        )


@dataclass(frozen=True)
class Machine:
    """A resolved definition and the function each Task resource names."""

    definition: dict[str, Any]
    functions: dict[str, str]  # Lambda ARN -> functions/<name>
    name: str = "evidence-batch"

    def tasks(self) -> dict[str, str]:
        """Every Task state (at any depth) -> its Resource."""
        found: dict[str, str] = {}

        def walk(states: Mapping[str, Any]) -> None:
            for name, state in states.items():
                if state.get("Type") == "Task":
                    found[name] = state.get("Resource", "")
                processor = state.get("ItemProcessor") or state.get("Iterator")
                if processor:
                    walk(processor.get("States", {}))
                for branch in state.get("Branches", []):
                    walk(branch.get("States", {}))

        walk(self.definition.get("States", {}))
        return found


@dataclass(frozen=True)
class Invocation:
    """One Lambda invocation as the bridge served it."""

    state: str
    function: str
    event: Any  # exactly what the interpreter produced
    error: str | None  # the error name reported to the interpreter, if any
    injected: bool  # the error came from `faults`: the handler did not run


@dataclass
class Execution:
    status: str  # SUCCEEDED | FAILED
    output: Any = None
    error: str | None = None
    cause: str | None = None
    #: The largest input or output of any state, task or the execution itself (bytes of JSON).
    largest_bytes: int = 0
    largest_at: str = ""
    retried: list[dict[str, Any]] = field(default_factory=list)
    caught: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    seconds: float = 0.0


def runner_dir() -> Path:
    from evidence.invoke import repo_root

    return repo_root() / "infra" / "asl"


def check_runner() -> tuple[str, Path]:
    """(node, run.mjs), or a ConfigurationError that says what to install."""
    node = shutil.which("node")
    if node is None:
        raise ConfigurationError("the local state machine needs Node.js 20+ (`node` is not on PATH)")
    folder = runner_dir()
    if not (folder / "node_modules" / "aws-local-stepfunctions").is_dir():
        raise ConfigurationError(
            f"the local state machine's npm packages are not installed: run `make batch-asl-deps` "
            f"(npm ci --prefix {folder})"
        )
    return node, folder / "run.mjs"


def invoke_handler(function: str, event: Any) -> Any:
    """The real handler of functions/<function>/handler.py, as the Lambda runtime calls it."""
    from evidence.invoke import load_handler
    from evidence.testing import lambda_context

    return load_handler(function)(event, lambda_context(f"evidence-{function}"))


def context_object(name: str, definition_name: str = "evidence-batch") -> dict[str, Any]:
    """The Context Object fields the definition may read ($$.Execution.Name, …)."""
    machine_arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{definition_name}"
    return {
        "Execution": {
            "Id": f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{definition_name}:{name}",
            "Name": name,
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/{definition_name}",
        },
        "StateMachine": {"Id": machine_arn, "Name": definition_name},
    }


def execute(
    machine: Machine,
    execution_input: Any,
    *,
    name: str,
    invoke: Invoke = invoke_handler,
    faults: Fault | None = None,
    retry_interval_ms: int | None = None,
    on_item: Callable[[int, Any], None] | None = None,
    timeout_s: float = 3600.0,
) -> Execution:
    """One execution of `machine` on `execution_input`, named `name` ($$.Execution.Name).

    `retry_interval_ms` replaces every retrier's pause (tests; None = the definition's own
    intervals, backoff and jitter). `on_item(index, output)` is called as each Map iteration ends.
    """
    unknown = {s: r for s, r in machine.tasks().items() if r not in machine.functions}
    if unknown:
        raise LocalStateMachineError(
            f"Task states whose resource is not one of the stack's functions: {unknown}; "
            "only direct Lambda invocations are emulated"
        )
    node, script = check_runner()
    started = time.monotonic()
    proc = subprocess.Popen(
        [node, str(script)],
        cwd=script.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        bufsize=1,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stderr_tail: deque[str] = deque(maxlen=40)
    drain = threading.Thread(target=lambda: stderr_tail.extend(proc.stderr or ()), daemon=True)
    drain.start()
    invocations: list[Invocation] = []
    done: dict[str, Any] | None = None
    watchdog = threading.Timer(timeout_s, proc.kill)
    watchdog.start()
    try:
        job = {
            "definition": machine.definition,
            "input": execution_input,
            "context": context_object(name, machine.name),
            "retryIntervalMs": retry_interval_ms,
        }
        proc.stdin.write(json.dumps(job) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            message = json.loads(line)
            kind = message.get("type")
            if kind == "invoke":
                reply, record = _serve(machine, message, invoke, faults)
                invocations.append(record)
                # A failed execution ends the runner while invocations it asked for are still
                # queued here: their answers have nowhere to go, and its last line is still to read.
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.write(json.dumps(reply) + "\n")
                    proc.stdin.flush()
            elif kind == "item" and on_item is not None:
                on_item(int(message["index"]), message.get("output"))
            elif kind == "invalid":
                raise LocalStateMachineError(
                    "asl-validator refused the state machine's definition: " + "; ".join(message["errors"])
                )
            elif kind == "done":
                done = message
                break
    except (BrokenPipeError, ValueError) as exc:
        raise LocalStateMachineError(f"the local interpreter stopped: {exc}; {''.join(stderr_tail)}") from exc
    finally:
        watchdog.cancel()
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join(timeout=5)
    if done is None:
        raise LocalStateMachineError(
            f"the local interpreter exited ({proc.returncode}) without finishing the execution: "
            + "".join(stderr_tail)[-2000:]
        )
    events = done.get("events", {})
    return Execution(
        status=str(done["status"]),
        output=done.get("output"),
        error=done.get("error"),
        cause=done.get("cause"),
        largest_bytes=int(done["largest"]["bytes"]),
        largest_at=str(done["largest"]["where"]),
        retried=list(events.get("retried", [])),
        caught=list(events.get("caught", [])),
        failed=list(events.get("failed", [])),
        invocations=invocations,
        seconds=time.monotonic() - started,
    )


def _serve(
    machine: Machine, message: dict[str, Any], invoke: Invoke, faults: Fault | None
) -> tuple[dict[str, Any], Invocation]:
    """Answer one Task invocation as Lambda would: the handler's JSON answer, or its error."""
    state, event = str(message["state"]), message["event"]
    function = machine.functions[message["resource"]]
    injected = faults(state, function, event) if faults is not None else None
    if injected is not None:
        error = {"errorType": injected, "errorMessage": f"{injected} (injected: the function did not run)"}
        return {"id": message["id"], "error": error}, Invocation(state, function, event, injected, True)
    reply: dict[str, Any]
    try:
        answer = invoke(function, event)
    except Exception as exc:  # the function failed: Lambda reports the exception by its class name
        reply = {"id": message["id"], "error": {"errorType": type(exc).__name__, "errorMessage": str(exc)}}
    else:
        try:
            reply = {"id": message["id"], "result": json.loads(json.dumps(answer))}
        except (TypeError, ValueError) as exc:  # the runtime's own name for an answer that is not JSON
            reply = {
                "id": message["id"],
                "error": {"errorType": "Runtime.MarshalError", "errorMessage": str(exc)},
            }
    name = str(reply["error"]["errorType"]) if "error" in reply else None
    return reply, Invocation(state, function, event, name, False)


class LocalStateMachineLauncher(ThreadLauncher):
    """The batch state machine's own ASL (`EVIDENCE_BATCH_LOCAL_ASL`, written by `make batch-asl`),
    executed by aws-local-stepfunctions with this process's handlers.

    Records, status and restarts as `ThreadLauncher`; what differs is the chain: the Map, the
    task payloads, Retry and Catch are the definition's, and results go to S3 under
    `s3://<EVIDENCE_RESULTS_BUCKET>/batches/<assessment id>/` (the state machine's default), so
    `result_uri` points at the evidence.
    """

    def __init__(
        self, root: Path, service: Callable[[], Any], asl: Path, results_bucket: str, region: str | None
    ) -> None:
        super().__init__(root, service)
        self.asl = Path(asl)
        self.results_bucket = results_bucket
        self.region = region

    STEPWISE = False

    def _execute(self, record: Any, batch: AssessmentInput, service: Any) -> None:
        machine = AslBundle.load(self.asl).resolve(
            results_bucket=self.results_bucket, region=self.region or REGION
        )

        def on_item(_index: int, output: Any) -> None:
            with contextlib.suppress(ValidationError):  # the final summary is read below regardless
                self._add(record, CriterionResult.model_validate(output))

        # As StepFunctionsLauncher starts it: no output location, no null principal.
        execution = execute(
            machine,
            json.loads(batch.model_dump_json(exclude_none=True)),
            name=record.assessment_id,
            on_item=on_item,
        )
        if execution.status != "SUCCEEDED":
            raise LocalStateMachineError(f"execution {execution.status.lower()}: {execution.error}")
        results = [CriterionResult.model_validate(r) for r in execution.output.get("results", [])]
        with self._lock:  # in the Map's order (iterations finish in any order)
            record.results = results
            record.done = len(results)
            record.failed = sum(r.status != "ok" for r in results)


def local_launcher(settings: Any, service: Callable[[], Any]) -> Any:
    """`EVIDENCE_BATCH_LOCAL_ASL` set: API-started batches on the state machine's own ASL."""
    if settings.batch_local_asl is None:
        return None
    if not settings.results_bucket:
        raise ConfigurationError(
            "EVIDENCE_BATCH_LOCAL_ASL needs EVIDENCE_RESULTS_BUCKET: batches write results to S3"
        )
    return LocalStateMachineLauncher(
        settings.store_dir / "assessments",
        service,
        settings.batch_local_asl,
        settings.results_bucket,
        settings.aws_region,
    )
