"""The one place where failures become HTTP responses.

Every error — a typed `EvidenceError` from the service, a request that fails
validation, an unmatched route, a body that is too large — leaves as
`{"error": {"code", "message", "field"?}}`. Only a genuine fault of ours is a 500.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from evidence.errors import (
    EvidenceError,
    MethodNotAllowedError,
    RequestValidationError,
    ServiceUnavailableError,
    TooManyRequestsError,
)
from evidence.observability import get_logger, record_error

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

JSON = "application/json"
Handler = TypeVar("Handler", bound=Callable[..., Any])


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str
    field: str | None = None


class ErrorEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


def error_body(status: int, code: str, message: str, field: str | None = None) -> tuple[int, str]:
    detail: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        detail["field"] = field
    return status, json.dumps({"error": detail}, ensure_ascii=False)


def validation_error(exc: ValidationError, *, prefix: str = "") -> RequestValidationError:
    """A pydantic error about the caller's input, as our typed error naming the first bad field."""
    problems = exc.errors(include_url=False, include_input=False)
    parts = []
    for p in problems[:10]:
        loc = ".".join(str(x) for x in (prefix, *p["loc"]) if x != "")
        parts.append(f"{loc or 'body'}: {p['msg']}")
    first = problems[0]["loc"] if problems else ()
    field = ".".join(str(x) for x in (prefix, *first) if x != "") or None
    return RequestValidationError("; ".join(parts) or "invalid request", field=field)


def status_and_body(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, EvidenceError):
        status, code = exc.status, exc.code
        body = error_body(status, code, exc.message, exc.field)
    else:
        # Anything untyped is our bug, not the caller's: log it, reveal nothing.
        get_logger().exception("unhandled error")
        status, code = 500, "internal_error"
        body = error_body(status, code, "internal error; see the logs for the request id")
    record_error(code, status)
    return body


def to_response(exc: BaseException) -> Response[str]:
    from aws_lambda_powertools.event_handler import Response

    status, body = status_and_body(exc)
    headers: dict[str, str] = {}
    if isinstance(exc, ServiceUnavailableError | TooManyRequestsError):
        headers["Retry-After"] = str(exc.retry_after_s)
    if isinstance(exc, MethodNotAllowedError):
        headers["Allow"] = ", ".join(exc.allow)
    return Response(status_code=status, content_type=JSON, body=body, headers=headers or None)


class RouteTable:
    """The (method, path) pairs the app serves, so an unmatched request on a known path is a 405
    with an Allow header rather than a 404. `add` registers the route with the resolver too."""

    def __init__(self, app: APIGatewayRestResolver) -> None:
        self._app = app
        self._routes: list[tuple[str, re.Pattern[str]]] = []

    def add(self, method: str, path: str) -> Callable[[Handler], Handler]:
        # `<name>` is one path segment, as in Powertools' rules; a trailing slash is tolerated.
        parts = re.split(r"(<\w+>)", path)
        pattern = "".join("[^/]+" if re.fullmatch(r"<\w+>", p) else re.escape(p) for p in parts)
        self._routes.append((method, re.compile(f"{pattern}/*")))
        register_route: Callable[[Handler], Handler] = self._app.route(path, method)
        return register_route

    def allowed(self, path: str) -> list[str]:
        return sorted({method for method, rule in self._routes if rule.fullmatch(path)})


def register(app: APIGatewayRestResolver, routes: RouteTable | None = None) -> None:
    """Replace Powertools' default 404/422/500 bodies with the envelope; 405 for a known path
    asked with another method."""
    from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFound

    @app.not_found
    def _route_not_found(_: RouteNotFound) -> Response[str]:
        event = app.current_event
        from evidence.errors import NotFoundError

        allow = routes.allowed(event.path) if routes else []
        if allow:
            return to_response(MethodNotAllowedError(event.http_method, event.path, allow))
        return to_response(NotFoundError(f"no route for {event.http_method} {event.path}", field="path"))

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def _any(exc: Exception) -> Response[str]:
        return to_response(exc)
