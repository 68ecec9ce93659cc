"""`evidence serve`: the HTTP API on loopback, through the retriever's own resolver.

Each HTTP request becomes an API Gateway REST proxy event (the shape the retriever
Lambda receives), goes through `evidence.api.app.resolve`, and the proxy response is
written back. What works here works behind API Gateway, error bodies included.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from evidence.api.errors import error_body

Resolve = Callable[[dict[str, Any], Any], dict[str, Any]]

_EMPTY_STATUS = {204, 304}


def http_to_event(
    method: str,
    target: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    *,
    source_ip: str = "127.0.0.1",
    stage: str = "local",
    principal: str | None = None,
) -> dict[str, Any]:
    """An API Gateway REST (v1) proxy integration event.

    `path` keeps the percent-encoding of the request line, as API Gateway passes it, so that
    `%2F` inside a document id stays inside one path segment. `principal` (from a bearer
    token) goes where a Lambda authorizer puts it: `requestContext.authorizer.principalId`.
    """
    parts = urlsplit(target)
    path = parts.path or "/"
    multi_headers: dict[str, list[str]] = {}
    for name, value in headers:
        multi_headers.setdefault(name, []).append(value)
    single_headers = {k: v[-1] for k, v in multi_headers.items()}
    query = parse_qs(parts.query, keep_blank_values=True)
    try:
        text: str | None = body.decode("utf-8") if body else None
        is_b64 = False
    except UnicodeDecodeError:
        text, is_b64 = base64.b64encode(body).decode("ascii"), True
    now = time.time()
    request_id = str(uuid.uuid4())
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": single_headers or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": request_id,
            "extendedRequestId": request_id,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "protocol": "HTTP/1.1",
            "accountId": "000000000000",
            "apiId": "local",
            "identity": {"sourceIp": source_ip, "userAgent": single_headers.get("User-Agent")},
            **({"authorizer": {"principalId": principal}} if principal else {}),
        },
        "body": text,
        "isBase64Encoded": is_b64,
    }


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        resolve: Resolve | None = None,
        max_body_bytes: int = 6 * 1024 * 1024,
        quiet: bool = True,
        authenticate: Callable[[str | None], str | None] | None = None,
    ) -> None:
        if resolve is None:
            from evidence.api.app import resolve as app_resolve

            resolve = app_resolve
        self.resolve = resolve
        self.authenticate = authenticate or _policy_token
        self.max_body_bytes = max_body_bytes
        self.quiet = quiet
        # The resolver keeps per-request state (current_event) and the service is not
        # documented as thread-safe: requests are accepted concurrently, resolved one at a time.
        self.lock = threading.Lock()
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def _policy_token(token: str | None) -> str | None:
    """Bearer token → principal through the access policy's `tokens` (evidence/access.py)."""
    from evidence.api import runtime
    from evidence.errors import EvidenceError

    try:
        return runtime.get_authorizer().principal_for_token(token)
    except EvidenceError:
        return None  # a broken policy: the resolver answers with the configuration error


def bearer_token(headers: Any) -> str | None:
    value = str(headers.get("Authorization") or "")
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer
    protocol_version = "HTTP/1.1"
    server_version = "evidence"

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_OPTIONS(self) -> None:
        self._dispatch()

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)

    def _refuse(self, status: int, code: str, message: str) -> None:
        _, body = error_body(status, code, message, "body")
        self.close_connection = True
        self._write(status, {"Content-Type": "application/json", "Connection": "close"}, body.encode())

    def _dispatch(self) -> None:
        if (
            self.command in {"GET", "HEAD"}
            and not self.path.startswith("/v1/")
            and self.headers.get("Content-Length") in {None, "0"}
        ):
            from evidence.workbench.page import page_response  # the workbench (docs/workbench.md)

            page = page_response(urlsplit(self.path).path)
            if page is not None:
                self._write(*page)
                return
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._refuse(400, "bad_request", "chunked request bodies are not supported; send Content-Length")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._refuse(400, "bad_request", "invalid Content-Length")
            return
        if length > self.server.max_body_bytes:
            # Refuse before reading: API Gateway would not forward it to the Lambda either.
            self._refuse(413, "payload_too_large", f"request body exceeds {self.server.max_body_bytes} bytes")
            return
        body = self.rfile.read(length) if length else b""
        from evidence.testing import lambda_context

        with self.server.lock:
            event = http_to_event(
                self.command,
                self.path,
                # The token stays here: it is a credential, and resolving needs only its principal.
                [(k, v) for k, v in self.headers.items() if k.lower() != "authorization"],
                body,
                source_ip=self.client_address[0],
                principal=self.server.authenticate(bearer_token(self.headers)),
            )
            response = self.server.resolve(event, lambda_context("evidence-serve"))
        status = int(response.get("statusCode", 500))
        headers: dict[str, str] = {}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(values)
        headers.update(response.get("headers") or {})
        raw = response.get("body") or ""
        payload = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode("utf-8")
        self._write(status, headers, payload)

    def _write(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in {"content-length", "transfer-encoding"}:
                self.send_header(name, value)
        if status not in _EMPTY_STATUS:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD" and status not in _EMPTY_STATUS:
            self.wfile.write(payload)


#: glibc's mallopt parameter for the number of malloc arenas (malloc.h).
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas for this process; False where there is no glibc mallopt.

    glibc gives threads their own arenas (up to 8 per core) and hands their freed memory back
    to the system only from the top of each, so a threaded server that embeds new text keeps
    growing: 576 → 707 MB in 90 s of mixed load, against 374 → 415 MB with two arenas
    (RELIABILITY.md, "Load"). Requests are resolved one at a time, so more arenas buy nothing.
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))


def make_server(host: str = "127.0.0.1", port: int = 8080, **kwargs: Any) -> ApiServer:
    return ApiServer((host, port), **kwargs)
