"""Batch assessments: plan → retrieve → format for every criterion of a batch.

The Step Functions state machine runs one Map iteration per criterion through three Lambda
tasks; `evidence assess` runs the same three steps in-process. Between steps only small
pointer payloads travel (`CriterionTask`): a step that produces evidence writes it to the
result store (S3, or memory locally) and passes its URI, because a state payload is capped
at 256 KB. A failed criterion becomes a `failed` entry; the batch goes on.

Task payloads (also in events/stepfunctions/; built by infra/evidence_infra/batch.py):

* plan step (planner function):   {task: "plan", index, profile, criterion: {id, question}, output_uri}
                                  → the same + plan
* retrieve step (retriever function, non-HTTP event): {task: "retrieve", …, plan}
                                  → … + retrieve_uri, hits
* format step (formatter function): {task: "format", …, plan, retrieve_uri, hits}
                                  → {id, status, result_uri, hits}
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evidence.errors import BadRequestError, EvidenceError, RequestValidationError
from evidence.model import (
    MAX_QUERY_CHARS,
    FormatRequest,
    Plan,
    PlanRequest,
    RetrieveRequest,
    RetrieveResponse,
)
from evidence.names import validate_index_name

if TYPE_CHECKING:
    from evidence.service import EvidenceService


class Criterion(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=256)
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)


class AssessmentInput(BaseModel):
    """The state machine's input (and `evidence assess`'s, built from flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: str
    profile: str = Field(default="default", max_length=64)
    criteria: list[Criterion] = Field(max_length=10_000)
    output_s3_uri: str | None = Field(default=None, pattern=r"^s3://[^/]+(/.*)?$")
    #: Whom the batch runs as: every step checks this principal's read access to `index`
    #: (evidence/access.py). Empty = no principal (allowed only without an access policy).
    principal: str | None = Field(default=None, max_length=2048)

    @field_validator("index")
    @classmethod
    def _index(cls, v: str) -> str:
        return validate_index_name(v)


class CriterionTask(BaseModel):
    """What one Map iteration passes from state to state: pointers, never evidence."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    index: str
    profile: str = "default"
    criterion: Criterion
    output_uri: str
    principal: str | None = Field(default=None, max_length=2048)
    plan: Plan | None = None
    retrieve_uri: str | None = None
    hits: int | None = None

    @field_validator("index")
    @classmethod
    def _index(cls, v: str) -> str:
        return validate_index_name(v)

    @field_validator("principal")
    @classmethod
    def _principal(cls, v: str | None) -> str | None:
        return v or None  # the state machine's default is "" (it cannot carry null through JsonMerge)


class CriterionResult(BaseModel):
    """One line of the batch summary (and of `evidence assess --out`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    status: str  # "ok" | "failed"
    result_uri: str | None = None
    hits: int | None = None
    error: dict[str, Any] | None = None


# --- where results go ---------------------------------------------------------------------------


class ResultStore(Protocol):
    def put_json(self, uri: str, payload: dict[str, Any]) -> None: ...

    def get_json(self, uri: str) -> dict[str, Any]: ...


class MemoryStore:
    """Local runs: results stay in the process and go to --out at the end."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_json(self, uri: str, payload: dict[str, Any]) -> None:
        self.objects[uri] = json.dumps(payload, ensure_ascii=False).encode("utf-8")

    def get_json(self, uri: str) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.objects[uri])
        except KeyError as exc:
            raise BadRequestError(f"no stored result at {uri}", field="retrieve_uri") from exc
        return data


class S3Store:
    def __init__(self, client: Any | None = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from evidence.api import runtime

            self._client = runtime.get_s3_client()
        return self._client

    @staticmethod
    def split(uri: str) -> tuple[str, str]:
        if not uri.startswith("s3://"):
            raise BadRequestError(f"not an s3:// URI: {uri!r}", field="output_s3_uri")
        bucket, _, key = uri[5:].partition("/")
        return bucket, key

    def put_json(self, uri: str, payload: dict[str, Any]) -> None:
        bucket, key = self.split(uri)
        self.client.put_object(
            Bucket=bucket,
            Key=key,
            Body=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            ContentType="application/json",
        )

    def get_json(self, uri: str) -> dict[str, Any]:
        bucket, key = self.split(uri)
        body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        data: dict[str, Any] = json.loads(body)
        return data


def store_for(uri: str) -> ResultStore:
    return S3Store() if uri.startswith("s3://") else MemoryStore()


def _child(base: str, criterion_id: str, suffix: str) -> str:
    return f"{base.rstrip('/')}/{quote(criterion_id, safe='')}{suffix}"


# --- the three steps ----------------------------------------------------------------------------


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
    uri = _child(task.output_uri, task.criterion.id, ".retrieve.json")
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
    uri = _child(task.output_uri, task.criterion.id, ".json")
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


Progress = Callable[[int, int, str], None]


def run_assessment(
    service: EvidenceService,
    batch: AssessmentInput,
    *,
    store: ResultStore | None = None,
    progress: Progress | None = None,
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


# --- `evidence assess` --------------------------------------------------------------------------


def read_criteria(path: Path) -> list[Criterion]:
    """JSONL of {id, question}; blank lines skipped; a line without id gets its line number."""
    criteria: list[Criterion] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if isinstance(raw, dict) and "id" not in raw:
                raw = {**raw, "id": str(n)}
            elif isinstance(raw, dict):
                raw = {**raw, "id": str(raw["id"])}
            criterion = Criterion.model_validate(raw)
        except (ValueError, ValidationError) as exc:
            raise RequestValidationError(
                f"{path}:{n}: not a criterion {{id, question}}: {exc}", field="criteria"
            ) from exc
        if criterion.id in seen:
            raise RequestValidationError(
                f"{path}:{n}: duplicate criterion id {criterion.id!r}", field="criteria"
            )
        seen.add(criterion.id)
        criteria.append(criterion)
    return criteria


def tty_progress(stream: Any = None) -> Progress | None:
    out = stream or sys.stderr
    if not out.isatty():
        return None

    def show(done: int, total: int, label: str) -> None:
        width = 30
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "." * (width - filled)
        out.write(f"\r[{bar}] {done}/{total} {label[:40]:<40}")
        if done >= total:
            out.write("\n")
        out.flush()

    return show


def add_assess_parser(
    subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "assess",
        parents=list(parents),
        help="run the batch assessment chain (plan → retrieve → format) over criteria",
        description="Batch assessment locally: the same steps and payloads as the state machine.",
    )
    parser.add_argument("--index", required=True, help="index name")
    parser.add_argument("--criteria", required=True, type=Path, help="JSONL of {id, question}")
    parser.add_argument(
        "--out", type=Path, default=None, help="JSONL of per-criterion results (default: stdout)"
    )
    parser.add_argument("--profile", default="default", help="ranking profile (default: default)")
    parser.add_argument(
        "--output-s3-uri",
        default=None,
        help="write each criterion's result to s3://bucket/prefix/ as the state machine does",
    )
    parser.add_argument(
        "--principal",
        default=None,
        help="run the batch as this principal: with an access policy set (EVIDENCE_ACCESS_POLICY) "
        "it needs read access to the index",
    )
    parser.set_defaults(func=run_assess)
    return parser


def service_for(args: argparse.Namespace) -> EvidenceService:
    from evidence.api import runtime
    from evidence.config import Settings
    from evidence.service import EvidenceService

    store = getattr(args, "store", None)
    settings = Settings(store_dir=store) if store is not None else runtime.settings()
    return EvidenceService(settings)


def run_assess(args: argparse.Namespace) -> int:
    try:
        batch = AssessmentInput(
            index=args.index,
            profile=args.profile,
            criteria=read_criteria(args.criteria),
            output_s3_uri=args.output_s3_uri,
            principal=args.principal,
        )
    except (EvidenceError, ValidationError, ValueError, OSError) as exc:
        print(f"evidence assess: {exc}", file=sys.stderr)
        return 2
    service = service_for(args)
    try:
        store = store_for(batch.output_s3_uri or "mem://")
        summary = run_assessment(service, batch, store=store, progress=tty_progress())
        lines = _result_lines(summary["results"], store)
    finally:
        service.close()
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    print(
        f"assessed {summary['total']} criteria: {summary['succeeded']} ok, {summary['failed']} failed"
        + (f" → {args.out}" if args.out else ""),
        file=sys.stderr,
    )
    return 0


def _result_lines(results: Iterable[dict[str, Any]], store: ResultStore) -> list[dict[str, Any]]:
    lines = []
    for r in results:
        if r["status"] == "ok" and r.get("result_uri"):
            lines.append({**store.get_json(r["result_uri"]), "result_uri": r["result_uri"]})
        else:
            lines.append(r)
    return lines
