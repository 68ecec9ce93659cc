"""Background uploads: `POST /v1/indexes/{index}/documents` past EVIDENCE_ASYNC_UPLOAD_BYTES.

A large document costs seconds to minutes of embedding (750 KB of distinct text: ~90 s on
2 cores). `evidence serve` answers it with 202 and a status URL (`GET /v1/uploads/{id}`), and one
worker thread indexes it under EVIDENCE_ASYNC_UPLOAD_DEADLINE_S, callers taking turns
(`evidence.fair`); a caller may have `UploadJobs.MAX_QUEUED` uploads waiting, past that a 429.
Reads never wait for it: the store serves them from committed snapshots, and the document
appears whole when its write commits.

The status is a JSON file per upload under `<store>/uploads/`, replaced atomically. Only the
principal who uploaded may read it; anyone else gets the 404 of an unknown id. The document's
bytes are held in memory until its turn: an upload queued or running when the server stops is
reported `failed` (reason `interrupted`), and the caller sends it again.

Without `evidence serve` (the retriever Lambda) no job runner is configured: uploads are indexed
within the request and its deadline, which covers embedding.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evidence.api.errors import ErrorDetail, ErrorEnvelope
from evidence.errors import EvidenceError, NotFoundError
from evidence.fair import FairQueue
from evidence.model import IndexDocumentRequest, IndexDocumentResponse

if TYPE_CHECKING:
    from evidence.service import EvidenceService

UPLOAD_ID_PATTERN = r"^[0-9a-f]{32}$"
UPLOAD_ID_RE = re.compile(UPLOAD_ID_PATTERN)
UploadState = Literal["queued", "running", "succeeded", "failed"]
_INCARNATION = uuid.uuid4().hex


class UploadNotFoundError(NotFoundError):
    code = "upload_not_found"

    def __init__(self) -> None:
        super().__init__("no such upload for this caller", field="upload_id")


class UploadAccepted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    upload_id: str
    status: UploadState
    index: str
    document_id: str
    bytes: int
    status_url: str


class UploadStatus(BaseModel):
    """GET /v1/uploads/{id}: `result` once indexed; `error` (the envelope's detail) if it failed."""

    model_config = ConfigDict(extra="forbid")

    upload_id: str
    index: str
    document_id: str
    status: UploadState
    bytes: int
    result: IndexDocumentResponse | None = None
    error: ErrorDetail | None = None


class _Record(UploadStatus):
    model_config = ConfigDict(extra="ignore")

    principal: str | None
    pid: int
    incarnation: str


def upload_status_url(upload_id: str) -> str:
    return f"/v1/uploads/{upload_id}"


def document_bytes(request: IndexDocumentRequest) -> int:
    """The document's size without decoding it (base64 is 4 bytes per 3)."""
    if request.text is not None:
        return len(request.text.encode("utf-8"))
    raw = request.content_base64 or ""
    return len(raw) * 3 // 4 - raw[-2:].count("=")


class UploadJobs:
    #: Uploads one caller may have waiting or running; past it a 429.
    MAX_QUEUED = 4

    def __init__(self, root: Path, service: Callable[[], EvidenceService], *, deadline_s: float) -> None:
        self.root = Path(root)
        self._service = service
        self.deadline_s = deadline_s
        self._queue: FairQueue[tuple[_Record, IndexDocumentRequest]] = FairQueue(
            limit=self.MAX_QUEUED, what="uploads"
        )
        self._lock = threading.Lock()
        self._live: dict[str, _Record] = {}
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._work, name="uploads", daemon=True)
        self._worker.start()

    def _write(self, record: _Record) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{record.upload_id}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(record.model_dump_json(), encoding="utf-8")
        os.replace(tmp, path)

    def submit(
        self, index: str, request: IndexDocumentRequest, principal: str | None, document_id: str
    ) -> UploadAccepted:
        record = _Record(
            upload_id=uuid.uuid4().hex,
            index=index,
            document_id=document_id,
            status="queued",
            bytes=document_bytes(request),
            principal=principal,
            pid=os.getpid(),
            incarnation=_INCARNATION,
        )
        # The caller's own document id from here on: the job indexes exactly what was announced.
        request = request.model_copy(update={"document_id": document_id})
        self._write(record)  # before the 202: a GET after a restart finds it (as interrupted)
        with self._lock:
            self._live[record.upload_id] = record
        try:
            self._queue.put((principal, index if principal is None else ""), (record, request))
        except EvidenceError:
            with self._lock:
                self._live.pop(record.upload_id, None)
            with contextlib.suppress(OSError):
                (self.root / f"{record.upload_id}.json").unlink()
            raise
        return UploadAccepted(
            upload_id=record.upload_id,
            status="queued",
            index=index,
            document_id=document_id,
            bytes=record.bytes,
            status_url=upload_status_url(record.upload_id),
        )

    def _work(self) -> None:
        from evidence.api.errors import status_and_body
        from evidence.retry import deadline_scope

        while not self._stop.is_set():
            got = self._queue.get(timeout=0.5)
            if got is None:
                continue
            caller, (record, request) = got
            with self._lock:
                record.status = "running"
            with contextlib.suppress(OSError):
                self._write(record)
            result: IndexDocumentResponse | None = None
            error: ErrorDetail | None = None
            try:
                with deadline_scope(self.deadline_s):
                    result = self._service().index_document(record.index, request)
            except Exception as exc:  # reported in the status, as the API would have answered it
                _, body = status_and_body(exc)
                error = ErrorEnvelope.model_validate_json(body).error
            with self._lock:
                record.status = "succeeded" if error is None else "failed"
                record.result, record.error = result, error
                final = record.model_copy(deep=True)
            with contextlib.suppress(OSError):
                self._write(final)
            with self._lock:
                self._live.pop(record.upload_id, None)
            self._queue.done(caller)

    def status(self, upload_id: str, principal: str | None) -> UploadStatus:
        with self._lock:
            live = self._live.get(upload_id)
            record = live.model_copy(deep=True) if live is not None else None
        if record is None:
            try:
                record = _Record.model_validate_json((self.root / f"{upload_id}.json").read_bytes())
            except (OSError, ValidationError) as exc:
                raise UploadNotFoundError() from exc
            # Another process's (a worker of `serve --workers`: forked, it may share the
            # incarnation) or an earlier server's: interrupted if that process is gone.
            mine = record.incarnation == _INCARNATION and record.pid == os.getpid()
            if record.status in {"queued", "running"} and not mine:
                alive = True
                try:
                    os.kill(record.pid, 0)
                except ProcessLookupError:
                    alive = False
                except PermissionError:
                    pass
                if not alive or record.pid == os.getpid():
                    record.status = "failed"
                    record.error = ErrorDetail(
                        code="interrupted",
                        message="the server stopped before this upload was indexed; send it again",
                    )
        if record.principal != principal:
            raise UploadNotFoundError()
        return UploadStatus.model_validate(record.model_dump(include=set(UploadStatus.model_fields)))

    def close(self) -> None:
        self._stop.set()


_jobs: list[UploadJobs] = []
_jobs_lock = threading.Lock()


def configure_uploads(jobs: UploadJobs | None) -> None:
    """`evidence serve` runs background uploads in its process; None switches them off."""
    with _jobs_lock:
        old = _jobs[:]
        _jobs[:] = [jobs] if jobs is not None else []
    for job in old:
        job.close()


def get_uploads() -> UploadJobs | None:
    with _jobs_lock:
        return _jobs[0] if _jobs else None
