"""Batches in this process (`evidence serve`, the local default): one worker thread, one criterion
per turn with callers taking turns; the status is a JSON file per assessment, replaced atomically,
so it survives a restart (a batch running when its process stopped reads `interrupted`)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from evidence.assess.contract import AssessmentNotFoundError, AssessmentStatus, Status
from evidence.assess.models import AssessmentInput, CriterionResult
from evidence.fair import FairQueue

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
