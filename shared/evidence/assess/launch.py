"""Batch assessments started through the API, as the authenticated caller (docs/api.md#batch-assessments).

`POST /v1/indexes/{index}/assessments` builds an `AssessmentInput` whose `principal` is the
caller from API Gateway's request context (never the body) and hands it to a `Launcher`:

* `StepFunctionsLauncher` (`EVIDENCE_BATCH_STATE_MACHINE_ARN` set; the retriever Lambda):
  `StartExecution` named after the assessment id. Nothing else is stored: the status, the
  principal (for the owner check) and the summary are read back with `DescribeExecution`.
* `evidence.local_sfn.LocalStateMachineLauncher` (`EVIDENCE_BATCH_LOCAL_ASL` set, the ARN unset;
  `evidence serve` adds it through `add_launcher`, being a developer tool outside the Lambda layer):
  the state machine's synthesized ASL executed by aws-local-stepfunctions, each task the real
  handler in this process, results in S3; a whole batch per turn (the Map is the definition's);
  status as below.
* `ThreadLauncher` (unset; `evidence serve`, the local default): the same chain in-process
  (`run_criterion`) in one worker thread per process, one criterion per turn with callers taking
  turns (a caller may queue `ThreadLauncher.MAX_QUEUED` batches; past that a 429); the status is a JSON
  file per assessment under `<store>/assessments/`, replaced atomically, so it survives a restart.
  A batch that was running when its process stopped is reported `failed` (reason
  `interrupted`): it is not resumed, a caller starts it again.

Only the principal who started an assessment may read it; anyone else gets the 404 of an unknown id.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from evidence.assess.models import AssessmentInput, Criterion, CriterionResult
from evidence.errors import EvidenceError, NotFoundError, ServiceUnavailableError, UpstreamError
from evidence.fair import FairQueue
from evidence.names import reject_blank, reject_control_characters

#: uuid4 hex: also a valid Step Functions execution name (≤ 80 of [A-Za-z0-9_-]).
ASSESSMENT_ID_PATTERN = r"^[0-9a-f]{32}$"
ASSESSMENT_ID_RE = re.compile(ASSESSMENT_ID_PATTERN)
#: The batch size limit of the state machine's input, reused for the API.
MAX_CRITERIA = int(AssessmentInput.model_fields["criteria"].metadata[0].max_length)

Status = Literal["running", "succeeded", "failed"]


class AssessmentNotFoundError(NotFoundError):
    """Unknown id, or not the caller's: the same answer, so an id's existence leaks nothing."""

    code = "assessment_not_found"

    def __init__(self) -> None:
        super().__init__("no such assessment for this caller", field="assessment_id")


class AssessmentExistsError(EvidenceError):
    """Step Functions already holds an execution of that name with another input."""

    status = 409
    code = "assessment_exists"


class BatchLaunchError(UpstreamError):
    """Step Functions refused or failed the call for a reason that is not the caller's."""

    code = "batch_unavailable"


def new_assessment_id() -> str:
    return uuid.uuid4().hex


# --- the HTTP payloads --------------------------------------------------------------------------


class RequestCriterion(Criterion):
    """A criterion of the HTTP body: strict (unknown fields refused), and a question as a query."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    _filled = field_validator("question")(reject_blank)
    _plain = field_validator("question")(reject_control_characters)


class AssessmentRequest(BaseModel):
    """POST /v1/indexes/{index}/assessments. No `principal`, no `output_s3_uri`: the batch runs
    as the caller and writes where the state machine's default says."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = Field(default="default", max_length=64)
    criteria: list[RequestCriterion] = Field(min_length=1, max_length=MAX_CRITERIA)

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        from evidence.profiles import unknown_profile

        if why := unknown_profile(v):
            raise ValueError(why)
        return v

    @field_validator("criteria")
    @classmethod
    def _unique(cls, v: list[RequestCriterion]) -> list[RequestCriterion]:
        # Results are keyed by criterion id (one S3 object each): a repeat would overwrite one.
        seen: set[str] = set()
        for c in v:
            if c.id in seen:
                raise ValueError(f"duplicate criterion id {c.id!r}")
            seen.add(c.id)
        return v

    def batch(self, index: str, principal: str | None) -> AssessmentInput:
        criteria = [Criterion(id=c.id, question=c.question) for c in self.criteria]
        return AssessmentInput(index=index, profile=self.profile, criteria=criteria, principal=principal)


class AssessmentStarted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assessment_id: str
    status: Status
    index: str
    criteria: int
    status_url: str


class AssessmentStatus(BaseModel):
    """GET /v1/assessments/{id}. `done`/`failed` count criteria (null where the launcher cannot
    tell: a Step Functions batch still running); `results` once finished; `reason` when the
    batch itself failed."""

    model_config = ConfigDict(extra="forbid")

    assessment_id: str
    index: str
    status: Status
    criteria: int
    done: int | None = None
    failed: int | None = None
    results: list[CriterionResult] | None = None
    reason: str | None = None


def status_url(assessment_id: str) -> str:
    return f"/v1/assessments/{assessment_id}"


class Launcher(Protocol):
    def start(self, assessment_id: str, batch: AssessmentInput) -> None: ...

    def status(self, assessment_id: str, principal: str | None) -> AssessmentStatus:
        """The assessment if `principal` started it, else AssessmentNotFoundError."""
        ...


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


# --- Step Functions -----------------------------------------------------------------------------

#: What Step Functions answers when it is busy, not wrong: retried with backoff.
_TRANSIENT = frozenset(
    {"ThrottlingException", "TooManyRequestsException", "ServiceUnavailable", "InternalServerError"}
)
_GONE = frozenset({"ExecutionDoesNotExist", "InvalidArn"})


def execution_arn(state_machine_arn: str, name: str) -> str:
    """arn:…:stateMachine:NAME → arn:…:execution:NAME:EXECUTION (the documented ARN format)."""
    head, _, machine = state_machine_arn.rpartition(":stateMachine:")
    return f"{head}:execution:{machine}:{name}"


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


# --- in-process ---------------------------------------------------------------------------------

INTERRUPTED = "interrupted: the server stopped before the batch finished; start it again"

#: This process's incarnation: a running record written by another one was interrupted
#: (or belongs to a live sibling process on the same store).
_INCARNATION = uuid.uuid4().hex


class _Record(BaseModel):
    """The status file of one in-process assessment."""

    model_config = ConfigDict(extra="ignore")

    assessment_id: str
    index: str
    profile: str
    principal: str | None
    status: Status
    criteria: int
    done: int = 0
    failed: int = 0
    results: list[CriterionResult] = Field(default_factory=list)
    reason: str | None = None
    pid: int
    incarnation: str
    #: When the status file was last rewritten while running (not stored).
    _flushed: float = PrivateAttr(default_factory=time.monotonic)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class _Job:
    """One in-process batch: where it is, and what its next turn runs."""

    launcher: ThreadLauncher
    record: _Record
    batch: AssessmentInput
    service: Any
    next: int = 0
    last_flush: float = field(default_factory=time.monotonic)
    cancelled: bool = False

    def _whole(self) -> bool:
        try:
            self.launcher._execute(self.record, self.batch, self.service)
        except Exception as exc:  # a fault of ours, or the execution failed: said why
            self.launcher.finish(self.record, "failed", f"{type(exc).__name__}: {exc}")
        else:
            self.launcher.finish(self.record, "succeeded", None)
        return True

    def step(self) -> bool:
        """Run the next criterion; True once the batch is finished (succeeded or failed)."""
        from evidence.assess.steps import run_criterion
        from evidence.assess.store import MemoryStore

        if self.cancelled:
            return True
        if not self.launcher.STEPWISE:
            return self._whole()
        try:
            criterion = self.batch.criteria[self.next]
            # A fresh store per criterion: the evidence is not kept (only pointers are reported).
            result = run_criterion(
                self.service,
                criterion,
                index=self.batch.index,
                profile=self.batch.profile,
                output_uri=f"mem://assessments/{self.record.assessment_id}",
                store=MemoryStore(),
                principal=self.batch.principal,
            ).model_copy(update={"result_uri": None})
        except Exception as exc:  # a fault of ours (disk, service closed): the batch fails, said why
            self.launcher.finish(self.record, "failed", f"{type(exc).__name__}: {exc}")
            return True
        launcher = self.launcher
        if self.cancelled:
            return True  # stopped while this criterion ran: the record says interrupted
        with launcher._lock:
            self.record.results.append(result)
            self.record.done += 1
            self.record.failed += result.status != "ok"
        self.next += 1
        if self.next >= len(self.batch.criteria):
            launcher.finish(self.record, "succeeded", None)
            return True
        if time.monotonic() - self.last_flush >= launcher.FLUSH_S:
            with contextlib.suppress(OSError):
                launcher._snapshot(self.record)
            self.last_flush = time.monotonic()
        return False


class ThreadLauncher:
    #: Status files are rewritten at most this often while a batch runs (a 10,000-criterion
    #: batch would otherwise rewrite a growing file 10,000 times); always at the end.
    FLUSH_S = 1.0
    #: Batches one caller may have queued or running in this process; past it a 429.
    MAX_QUEUED = 8
    #: Every in-process batch of this process, one criterion per turn, callers taking turns: a
    #: 3,000-criterion batch delays another caller's one-criterion batch by one criterion, not
    #: by 3,000 (one batch at a time ran them in arrival order). One worker: the batch's
    #: retrieves use the cores, and requests keep theirs.
    _queue: FairQueue[_Job] = FairQueue(limit=MAX_QUEUED, what="batches")
    _worker: list[threading.Thread] = []
    _current: list[_Job] = []  # the job the worker is running a turn of

    #: The batches this process is running, shared by every launcher built here (the launcher is
    #: rebuilt when the settings change; a batch it started must not then look interrupted).
    _live: dict[str, _Record] = {}
    _lock = threading.Lock()

    def __init__(self, root: Path, service: Callable[[], Any]) -> None:
        self.root = Path(root)
        self._service = service

    def _path(self, assessment_id: str) -> Path:
        return self.root / f"{assessment_id}.json"

    def _write(self, record: _Record) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self._path(record.assessment_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(record.model_dump_json(), encoding="utf-8")
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one

    @staticmethod
    def caller_key(batch: AssessmentInput) -> tuple[str | None, str]:
        """Whose turn a batch takes: its principal's, and per index where no policy names callers."""
        return (batch.principal, batch.index if batch.principal is None else "")

    def start(self, assessment_id: str, batch: AssessmentInput) -> None:
        record = _Record(
            assessment_id=assessment_id,
            index=batch.index,
            profile=batch.profile,
            principal=batch.principal,
            status="running",
            criteria=len(batch.criteria),
            pid=os.getpid(),
            incarnation=_INCARNATION,
        )
        job = _Job(self, record, batch, self._service())
        self._queue.put(self.caller_key(batch), job)  # 429 here, before anything is written
        with self._lock:
            self._live[assessment_id] = record
        try:
            self._write(record)  # before the 202: a GET after a restart finds the batch
        except OSError:
            job.cancelled = True
            with self._lock:
                self._live.pop(assessment_id, None)
            raise
        self._ensure_worker()

    @classmethod
    def _ensure_worker(cls) -> None:
        with cls._lock:
            if cls._worker and cls._worker[0].is_alive():
                return
            worker = threading.Thread(target=cls._work, name="assess-worker", daemon=True)
            cls._worker[:] = [worker]
        worker.start()

    @classmethod
    def _work(cls) -> None:
        while True:
            got = cls._queue.get()
            if got is None:
                continue
            caller, job = got
            cls._current[:] = [job]
            finished = job.step() or job.cancelled
            cls._current.clear()
            if finished:
                cls._queue.done(caller)
            else:
                cls._queue.put(caller, job, front=True)  # its next turn, after every other caller's

    @classmethod
    def stop_all(cls) -> int:
        """Stop this process's batches (its server is stopping): each is reported `failed`
        (`interrupted`) at once, as after a restart, instead of running on against a closed
        service. Returns how many were stopped."""
        drained = cls._queue.drain()
        for caller, job in drained:
            job.cancelled = True
            job.launcher.finish(job.record, "failed", INTERRUPTED)
            cls._queue.done(caller)
        running = list(cls._current)  # its worker counts it done after this turn
        for job in running:
            job.cancelled = True
            job.launcher.finish(job.record, "failed", INTERRUPTED)
        return len(drained) + len(running)

    def finish(self, record: _Record, status: Status, reason: str | None) -> None:
        # The file first, then the live record: whoever sees the batch finished finds the file so.
        with self._lock:
            if record.status != "running":
                return  # finished already (stopped while its last turn ran)
            final = record.model_copy(deep=True, update={"status": status, "reason": reason})
        # The store may be gone (server shut down, temp folder removed): nothing left to tell.
        with contextlib.suppress(OSError):
            self._write(final)
        with self._lock:
            record.status, record.reason = status, reason
            self._live.pop(record.assessment_id, None)

    #: One criterion per turn (callers take turns). A launcher whose chain is not ours to split
    #: (a state machine's Map) runs a whole batch per turn through `_execute` instead.
    STEPWISE = True

    def _execute(self, record: _Record, batch: AssessmentInput, service: Any) -> None:
        """The whole batch in one turn; only launchers with STEPWISE = False implement it."""
        raise NotImplementedError

    def _add(self, record: _Record, result: CriterionResult) -> None:
        """A criterion's result, as it comes (status reads show progress)."""
        with self._lock:
            record.results.append(result)
            record.done += 1
            record.failed += result.status != "ok"

    def _snapshot(self, record: _Record) -> None:
        with self._lock:
            copy = record.model_copy(deep=True)
        self._write(copy)

    def _read(self, assessment_id: str) -> _Record:
        with self._lock:
            live = self._live.get(assessment_id)
            if live is not None:
                return live.model_copy(deep=True)
        try:
            record = _Record.model_validate_json(self._path(assessment_id).read_bytes())
        except (OSError, ValidationError) as exc:
            raise AssessmentNotFoundError() from exc
        if record.status == "running" and (
            record.incarnation == _INCARNATION or record.pid == os.getpid() or not _alive(record.pid)
        ):
            # Written as running by a process that is gone (or by an earlier life of this pid).
            record.status = "failed"
            record.reason = INTERRUPTED
        return record

    def status(self, assessment_id: str, principal: str | None) -> AssessmentStatus:
        record = self._read(assessment_id)
        if record.principal != principal:
            raise AssessmentNotFoundError()
        finished = record.status != "running"
        return AssessmentStatus(
            assessment_id=record.assessment_id,
            index=record.index,
            status=record.status,
            criteria=record.criteria,
            done=record.done,
            failed=record.failed,
            results=record.results if finished else None,
            reason=record.reason,
        )


# --- the process's launcher ---------------------------------------------------------------------

_cached: list[tuple[Any, Launcher]] = []
_cache_lock = threading.Lock()
#: (settings, service getter) -> a launcher, or None when its settings are unset. Developer tools
#: outside the Lambda layer add theirs (`evidence serve`: evidence/local_sfn.py); the layer has none.
LauncherFactory = Callable[[Any, Callable[[], Any]], "Launcher | None"]
_developer_launchers: list[LauncherFactory] = []


def add_launcher(factory: LauncherFactory) -> None:
    """Consulted, in order, when no state machine ARN is set (before the in-process default)."""
    with _cache_lock:
        if factory not in _developer_launchers:
            _developer_launchers.append(factory)
            _cached.clear()


def get_launcher() -> Launcher:
    """Where API-started batches run: the state machine when its ARN is set, else this process.

    Built on first use from the runtime's settings, and again when they are replaced
    (`runtime.configure`): kept here rather than in `runtime`, which the chain's steps import.
    """
    from evidence.api import runtime

    settings = runtime.settings()
    with _cache_lock:
        if _cached and _cached[0][0] is settings:
            return _cached[0][1]
        launcher: Launcher | None = None
        if settings.batch_state_machine_arn:
            launcher = StepFunctionsLauncher(settings.batch_state_machine_arn, region=settings.aws_region)
        else:
            for factory in _developer_launchers:
                launcher = factory(settings, runtime.get_service)
                if launcher is not None:
                    break
        if launcher is None:
            launcher = ThreadLauncher(settings.store_dir / "assessments", runtime.get_service)
        _cached[:] = [(settings, launcher)]
        return launcher
