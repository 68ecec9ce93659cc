"""The HTTP API: one Powertools `APIGatewayRestResolver` serving the routes of docs/contracts.md#http.

Used by the retriever Lambda and by `evidence serve` alike. Routes are thin: check the
path, parse the body into its model, one service call, dump the response model.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from pydantic import BaseModel, ValidationError

from evidence.access import Access, principal_of
from evidence.api import runtime
from evidence.api.errors import JSON, RouteTable, register, validation_error
from evidence.api.uploads import UPLOAD_ID_RE, UploadNotFoundError, document_bytes, get_uploads
from evidence.coach.contract import CoachRequest
from evidence.errors import BadRequestError, PayloadTooLargeError, RequestValidationError
from evidence.model import (
    FormatRequest,
    IndexDocumentRequest,
    PlanRequest,
    RetrieveRequest,
)
from evidence.names import validate_index_name
from evidence.observability import record_indexed, record_retrieve

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

M = TypeVar("M", bound=BaseModel)

#: Idle resolvers. A Powertools resolver keeps the request it is resolving on itself
#: (`current_event`), so one resolver serves one request at a time: concurrent requests
#: (`evidence serve`'s threads) each lease one, and there are never more than requests in flight.
_idle: list[APIGatewayRestResolver] = []
_built: list[APIGatewayRestResolver] = []
_lock = threading.Lock()


def get_app() -> APIGatewayRestResolver:
    """A resolver, built on first use (Powertools reads env vars when constructed)."""
    with _lock:
        if _built:
            return _built[0]
    app = build_app()
    with _lock:
        if not _built:
            _built.append(app)
            _idle.append(app)
        return _built[0]


@contextmanager
def leased_app() -> Iterator[APIGatewayRestResolver]:
    """A resolver nobody else is using until the block ends."""
    with _lock:
        app = _idle.pop() if _idle else None
    if app is None:
        app = build_app()
        with _lock:
            _built.append(app)
    try:
        yield app
    finally:
        with _lock:
            _idle.append(app)


#: Kept back from the Lambda's remaining time to serialise the answer and log.
DEADLINE_MARGIN_S = 1.0


def request_budget_s(remaining_ms: int | None, cap_s: float) -> float:
    """The request's deadline: the setting, capped by what the Lambda has left."""
    if remaining_ms is None:
        return cap_s
    return max(min(cap_s, remaining_ms / 1000 - DEADLINE_MARGIN_S), 0.0)


def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """An API Gateway REST proxy event in, a proxy response out, within one deadline."""
    from evidence.retry import deadline_scope

    remaining = getattr(context, "get_remaining_time_in_millis", None)
    budget = request_budget_s(
        int(remaining()) if callable(remaining) else None, runtime.settings().request_deadline_s
    )
    with deadline_scope(budget), leased_app() as app:
        # Powertools keeps the request on its BaseRouter *class*, one per process: with requests
        # resolved concurrently, one thread's request was routed (and parsed) as another's. The
        # resolver's own attributes shadow the class's, so each leased resolver reads its own.
        app.current_event = app._to_proxy_event(event)  # type: ignore[assignment]  # REST: APIGatewayProxyEvent
        app.lambda_context = context
        return app.resolve(event, context)


def json_response(status: int, payload: BaseModel | dict[str, Any]) -> Response[str]:
    from aws_lambda_powertools.event_handler import Response

    body = payload.model_dump_json() if isinstance(payload, BaseModel) else json.dumps(payload)
    return Response(status_code=status, content_type=JSON, body=body)


def index_name(raw: str) -> str:
    name = unquote(raw)
    try:
        return validate_index_name(name)
    except ValueError as exc:
        raise RequestValidationError(str(exc), field="index") from exc


def caller(app: APIGatewayRestResolver) -> str | None:
    return principal_of(app.current_event.raw_event)


def authorized_index(app: APIGatewayRestResolver, raw: str, access: Access) -> str:
    """The route's index name, validated, once the caller is allowed `access` to it.

    Checked before the body is parsed or the store consulted: a refused caller learns
    nothing about the index, not even whether it exists.
    """
    name = index_name(raw)
    runtime.get_authorizer().check(caller(app), name, access)
    return name


def document_path_id(raw: str) -> str:
    doc_id = unquote(raw)
    if not doc_id or len(doc_id) > 1024:
        raise RequestValidationError("document_id must be 1-1024 characters", field="document_id")
    return doc_id


def body_bytes(app: APIGatewayRestResolver) -> bytes:
    event = app.current_event
    raw = event.body or ""
    limit = runtime.settings().max_body_bytes
    # A base64 body is 4/3 of its payload: reject on the wire size before decoding.
    if len(raw) > limit * (4 / 3 if event.is_base64_encoded else 1) + 4:
        raise PayloadTooLargeError(f"request body exceeds {limit} bytes", field="body")
    if event.is_base64_encoded:
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequestError("body is flagged base64 but is not valid base64", field="body") from exc
    else:
        data = raw.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise PayloadTooLargeError(f"request body exceeds {limit} bytes", field="body")
    return data


def _integral(value: Any) -> Any:
    """JSON Schema's integer includes 3.0; pydantic's strict int does not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def parse_body(app: APIGatewayRestResolver, model: type[M]) -> M:
    """Bytes → JSON → model, with exactly the JSON Schema the OpenAPI document publishes:
    strict types (`false` is not 0, `"3"` is not 3) except that integral numbers are integers."""
    import pydantic_core

    data = body_bytes(app)
    if not data.strip():
        raise BadRequestError("a JSON request body is required", field="body")
    try:
        # jiter, not json.loads: lone UTF-16 surrogates are refused here, not deep in a backend.
        parsed = pydantic_core.from_json(data)
    except ValueError as exc:
        raise BadRequestError(f"request body is not valid JSON: {exc}", field="body") from exc
    try:
        return model.model_validate(_integral(parsed), strict=True)
    except ValidationError as exc:
        raise validation_error(exc) from exc


def upload(app: APIGatewayRestResolver, index: str, request: IndexDocumentRequest) -> Response[str]:
    """Indexed now (200), or, for a document past EVIDENCE_ASYNC_UPLOAD_BYTES where a job runner is
    configured (`evidence serve`), in the background: 202 + status URL, so that minutes of
    embedding do not hold a request and its connection."""
    jobs = get_uploads()
    if jobs is None or document_bytes(request) <= runtime.settings().async_upload_bytes:
        response = runtime.get_service().index_document(index, request)
        record_indexed(response)
        return json_response(200, response)
    from evidence.service import content_document_id

    data = runtime.get_service().document_data(request)
    document_id = request.document_id or content_document_id(request.filename, data)
    accepted = jobs.submit(index, request, caller(app), document_id)
    started = json_response(202, accepted)
    started.headers["Location"] = accepted.status_url
    return started


def upload_state(upload_id: str, principal: str | None) -> BaseModel:
    if not UPLOAD_ID_RE.fullmatch(upload_id):
        raise RequestValidationError(
            "upload_id is the 32 lower-case hex digits the upload's 202 answered", field="upload_id"
        )
    jobs = get_uploads()
    if jobs is None:
        raise UploadNotFoundError()
    return jobs.status(upload_id, principal)


def build_app() -> APIGatewayRestResolver:
    """The resolver with every route of docs/api.md, registered group by group."""
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    app = APIGatewayRestResolver()
    route = RouteTable(app)
    register(app, route)
    for routes in (
        service_routes,
        document_routes,
        workbench_routes,
        retrieval_routes,
        assessment_routes,
        function_routes,
    ):
        routes(app, route)
    return app


def service_routes(app: APIGatewayRestResolver, route: RouteTable) -> None:
    """Liveness, this API's OpenAPI document, the indexes the caller may see."""
    from evidence.api.openapi import Health, openapi_document
    from evidence.version import package_version

    @route.add("GET", "/v1/health")
    def health() -> Response[str]:
        return json_response(200, Health(status="ok", version=package_version()))

    @route.add("GET", "/v1/openapi.json")
    def openapi() -> Response[str]:
        return json_response(200, openapi_document())

    @route.add("GET", "/v1/indexes")
    def list_indexes() -> Response[str]:
        principal = caller(app)
        authorizer = runtime.get_authorizer()
        response = runtime.get_service().index_summaries(lambda names: authorizer.visible(principal, names))
        return json_response(200, response)


def document_routes(app: APIGatewayRestResolver, route: RouteTable) -> None:
    """Index (or upload in the background) and delete documents; a background upload's status."""

    @route.add("POST", "/v1/indexes/<index>/documents")
    def index_document(index: str) -> Response[str]:
        name = authorized_index(app, index, Access.WRITE)
        request = parse_body(app, IndexDocumentRequest)
        return upload(app, name, request)

    @route.add("GET", "/v1/uploads/<upload_id>")
    def upload_status(upload_id: str) -> Response[str]:
        return json_response(200, upload_state(upload_id, caller(app)))

    @route.add("DELETE", "/v1/indexes/<index>/documents/<document_id>")
    def delete_document(index: str, document_id: str) -> Response[str]:
        name = authorized_index(app, index, Access.WRITE)
        return json_response(200, runtime.get_service().delete_document(name, document_path_id(document_id)))


def retrieval_routes(app: APIGatewayRestResolver, route: RouteTable) -> None:
    """Evidence for a question, and the coach."""

    @route.add("POST", "/v1/indexes/<index>/retrieve")
    def retrieve(index: str) -> Response[str]:
        name = authorized_index(app, index, Access.READ)
        request = parse_body(app, RetrieveRequest)
        response = runtime.get_service().retrieve(name, request)
        record_retrieve(response)
        return json_response(200, response)

    @route.add("POST", "/v1/indexes/<index>/coach")
    def coach(index: str) -> Response[str]:
        name = authorized_index(app, index, Access.READ)
        return json_response(200, runtime.get_service().coach(name, parse_body(app, CoachRequest)))


def assessment_routes(app: APIGatewayRestResolver, route: RouteTable) -> None:
    """Batch assessments, started and read as the caller (docs/api.md#batch-assessments)."""

    @route.add("POST", "/v1/indexes/<index>/assessments")
    def start_assessment(index: str) -> Response[str]:
        from evidence.assess.contract import (
            AssessmentRequest,
            AssessmentStarted,
            new_assessment_id,
            status_url,
        )
        from evidence.assess.launch import get_launcher

        name = authorized_index(app, index, Access.READ)
        request = parse_body(app, AssessmentRequest)
        # A missing index is a 404 now, not a batch of failed criteria later (after the 403 check).
        runtime.get_service().backend.get_index(name)
        # The batch runs as the authenticated caller: the body has no say in it (extra="forbid").
        batch = request.batch(name, caller(app))
        assessment_id = new_assessment_id()
        get_launcher().start(assessment_id, batch)
        started = AssessmentStarted(
            assessment_id=assessment_id,
            status="running",
            index=name,
            criteria=len(batch.criteria),
            status_url=status_url(assessment_id),
        )
        response = json_response(202, started)
        response.headers["Location"] = started.status_url
        return response

    @route.add("GET", "/v1/assessments/<assessment_id>")
    def assessment_status(assessment_id: str) -> Response[str]:
        from evidence.assess.contract import ASSESSMENT_ID_RE
        from evidence.assess.launch import get_launcher

        if not ASSESSMENT_ID_RE.fullmatch(assessment_id):
            raise RequestValidationError(
                "assessment_id is the 32 lower-case hex digits POST .../assessments answered",
                field="assessment_id",
            )
        return json_response(200, get_launcher().status(assessment_id, caller(app)))


def function_routes(app: APIGatewayRestResolver, route: RouteTable) -> None:
    """The planner's and formatter's payloads over HTTP."""

    @route.add("POST", "/v1/plan")
    def plan() -> Response[str]:
        return json_response(200, runtime.get_service().plan(parse_body(app, PlanRequest)))

    @route.add("POST", "/v1/format")
    def format_() -> Response[str]:
        return json_response(200, runtime.get_service().format(parse_body(app, FormatRequest)))


def workbench_routes(app: APIGatewayRestResolver, route: RouteTable) -> None:
    """What the workbench (docs/workbench.md) reads beyond retrieval: documents, a document's
    text, evaluation sets and runs. Read access to the index, as for retrieval."""

    @route.add("GET", "/v1/indexes/<index>/documents")
    def list_documents(index: str) -> Response[str]:
        from evidence.workbench.documents import list_documents

        name = authorized_index(app, index, Access.READ)
        return json_response(200, list_documents(runtime.get_service(), name))

    @route.add("GET", "/v1/indexes/<index>/documents/<document_id>")
    def document_text(index: str, document_id: str) -> Response[str]:
        from evidence.workbench.documents import document_text

        name = authorized_index(app, index, Access.READ)
        return json_response(200, document_text(runtime.get_service(), name, document_path_id(document_id)))

    @route.add("GET", "/v1/indexes/<index>/eval-sets")
    def eval_sets(index: str) -> Response[str]:
        from evidence.workbench.evaluate import list_sets

        name = authorized_index(app, index, Access.READ)
        return json_response(200, list_sets(runtime.get_service(), name))

    @route.add("POST", "/v1/indexes/<index>/evaluate")
    def evaluate(index: str) -> Response[str]:
        from evidence.workbench.evaluate import EvaluateRequest, evaluate

        name = authorized_index(app, index, Access.READ)
        request = parse_body(app, EvaluateRequest)
        return json_response(200, evaluate(runtime.get_service(), name, request))
