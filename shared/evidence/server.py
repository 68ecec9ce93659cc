"""`evidence serve`: the HTTP API on loopback, through the retriever's own resolver.

Each HTTP request becomes an API Gateway REST proxy event (the shape the retriever
Lambda receives), goes through `evidence.api.app.resolve`, and the proxy response is
written back. What works here works behind API Gateway, error bodies included.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import os
import queue
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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


#: A page served outside the API (`GET /`, the workbench): (status, headers, body), or None
#: when the path is not one of its pages (the resolver then answers, a 404 in the envelope).
Page = tuple[int, dict[str, str], bytes]
Pages = Callable[[str, str], Page | None]

#: The status codes `http.server` answers by itself, as our error codes.
_PROTOCOL_CODES = {
    400: "bad_request",
    408: "request_timeout",
    414: "uri_too_long",
    431: "headers_too_large",
    501: "not_implemented",
    505: "http_version_not_supported",
}
#: Strict Content-Length: digits only (no sign, no `_`, no spaces inside, no list).
_DIGITS = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How `ApiServer` holds connections (docs/api.md#evidence-serve).

    `backlog`: the kernel's queue of connections not yet accepted (5 by default in
    socketserver: a burst of 50 lost SYNs, and clients retried after 1, 3, 7 s).
    `max_connections`: connections served at once; past it a new one gets a 503 with
    Retry-After (an idle keep-alive connection is closed first to make room).
    `idle_timeout_s`: a keep-alive connection with no request starting; closed silently.
    `header_timeout_s`: from a request's first byte to its last header; then a 408.
    `body_timeout_s`: to read the whole body; then a 408.
    """

    backlog: int = 128
    max_connections: int = 64
    idle_timeout_s: float = 15.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0


class _Phase:
    IDLE = "idle"
    HEADERS = "headers"
    BODY = "body"
    BUSY = "busy"


class _Watch:
    """The connections being served, each with its phase and that phase's deadline.

    Per-read socket timeouts alone let a client that trickles one byte every few seconds hold
    a connection (and its thread) for ever; the reaper bounds a phase's total time instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, tuple[str, float]] = {}
        self._stop = threading.Event()

    def __len__(self) -> int:
        with self._lock:
            return len(self._conns)

    def enter(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns[conn] = (_Phase.BUSY, float("inf"))

    def phase(self, conn: socket.socket, phase: str, seconds: float | None = None) -> None:
        deadline = time.monotonic() + seconds if seconds is not None else float("inf")
        with self._lock:
            if conn in self._conns:
                self._conns[conn] = (phase, deadline)

    def leave(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.pop(conn, None)

    def in_phase(self, phase: str) -> int:
        """How many connections are in `phase` (`_Phase`)."""
        with self._lock:
            return sum(1 for p, _ in self._conns.values() if p == phase)

    def idle(self) -> int:
        """How many keep-alive connections wait for their next request."""
        return self.in_phase(_Phase.IDLE)

    def close_one_idle(self) -> bool:
        """Close a keep-alive connection waiting for its next request; False if there is none."""
        with self._lock:
            idle = next((c for c, (p, _) in self._conns.items() if p == _Phase.IDLE), None)
            if idle is None:
                return False
            self._conns[idle] = (_Phase.BUSY, float("inf"))  # closed once, not again
        _shutdown(idle)
        return True

    def reap(self, timed_out: Callable[[socket.socket, str], None]) -> None:
        while not self._stop.wait(0.25):
            now = time.monotonic()
            with self._lock:
                late = [(c, p) for c, (p, at) in self._conns.items() if at <= now]
                for c, _ in late:
                    self._conns[c] = (_Phase.BUSY, float("inf"))
            for conn, phase in late:
                timed_out(conn, phase)

    def stop(self) -> None:
        self._stop.set()


def _shutdown(conn: socket.socket) -> None:
    """Wake the thread blocked reading `conn`; it then closes the connection."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def error_response(status: int, code: str, message: str, extra: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 error response in the JSON envelope, closing the connection."""
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    _, body = error_body(status, code, message)
    payload = body.encode()
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    head.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        *,
        resolve: Resolve | None = None,
        max_body_bytes: int = 6 * 1024 * 1024,
        quiet: bool = True,
        authenticate: Callable[[str | None], str | None] | None = None,
        limits: ConnectionLimits | None = None,
        pages: Pages | None = None,
        listener: socket.socket | None = None,
    ) -> None:
        if resolve is None:
            from evidence.api.app import resolve as app_resolve

            resolve = app_resolve
        self.resolve = resolve
        self.authenticate = authenticate or _policy_token
        self.max_body_bytes = max_body_bytes
        self.quiet = quiet
        self.limits = limits or ConnectionLimits()
        #: GET/HEAD outside /v1/ go here first (the workbench page); None = the API only.
        self.pages = pages
        self.request_queue_size = self.limits.backlog
        # Requests are resolved concurrently: each leases its own resolver (evidence.api.app),
        # and the store serves reads from snapshots while a write commits (embedded_store.py).
        self.watch = _Watch()
        self.refused = 0
        self._refusals: queue.Queue[socket.socket | None] = queue.Queue(maxsize=256)
        #: One of `evidence serve --workers N` (it serves the supervisor's `listener`): answers
        #: carry `X-Evidence-Worker` (its pid).
        self.worker_pid = os.getpid() if listener is not None else None
        if listener is None:
            super().__init__(address, _Handler)
        else:
            # A worker of `serve --workers`: the supervisor's listening socket, shared by all.
            super().__init__(address, _Handler, bind_and_activate=False)
            self.socket.close()
            self.socket = listener
            self.server_address = listener.getsockname()
            self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        threading.Thread(
            target=self.watch.reap, args=(self._timed_out,), name="serve-reaper", daemon=True
        ).start()
        threading.Thread(target=self._refuse_loop, name="serve-refuser", daemon=True).start()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        if self.worker_pid is None:
            super().serve_forever(poll_interval)
            return
        # A worker of `serve --workers` blocks in accept(): the kernel hands each connection to
        # one waiting worker, the one waiting longest. Polling first (socketserver's way) wakes
        # every worker, and the one that won last tends to win again: one worker took every
        # connection for minutes. It stops by a signal (KeyboardInterrupt), not `shutdown()`.
        while True:
            try:
                request, client_address = self.get_request()
            except OSError:
                continue
            try:
                self.process_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
                self.shutdown_request(request)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}:
                # Out of descriptors: the listening socket stays readable, and retrying at once
                # spun a core. Wait for a connection to close instead.
                time.sleep(0.05)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        conn: socket.socket = request
        if len(self.watch) >= self.limits.max_connections and not self.watch.close_one_idle():
            self.refused += 1
            try:
                self._refusals.put_nowait(conn)
            except queue.Full:
                self.shutdown_request(conn)
            return
        self.watch.enter(conn)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.watch.leave(conn)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.watch.leave(request)

    def _refuse_loop(self) -> None:
        """503 to connections past the cap, from one thread: refusing costs no thread each."""
        body = error_response(
            503,
            "service_unavailable",
            f"the server is at its limit of {self.limits.max_connections} connections; retry shortly",
            {"Retry-After": "1"},
        )
        while True:
            conn = self._refusals.get()
            if conn is None:
                return
            try:
                conn.settimeout(1.0)
                conn.sendall(body)
                conn.shutdown(socket.SHUT_WR)
                # Read what the client sent until it closes (briefly): closing with unread data
                # would reset the connection, and the client would see a reset, not the 503.
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline and conn.recv(65536):
                    pass
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    conn.close()

    def _timed_out(self, conn: socket.socket, phase: str) -> None:
        if phase in {_Phase.HEADERS, _Phase.BODY}:
            limit = self.limits.header_timeout_s if phase == _Phase.HEADERS else self.limits.body_timeout_s
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                conn.sendall(
                    error_response(
                        408, "request_timeout", f"the request's {phase} did not arrive within {limit:g} s"
                    )
                )
        _shutdown(conn)

    def server_close(self) -> None:
        self.watch.stop()
        with contextlib.suppress(queue.Full):
            self._refusals.put_nowait(None)
        super().server_close()


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
    sys_version = ""  # no Python version in the Server header

    def setup(self) -> None:
        super().setup()
        limits = self.server.limits
        # A safety net under the reaper's per-phase deadlines: no single read or write waits longer.
        self.connection.settimeout(
            max(limits.idle_timeout_s, limits.header_timeout_s, limits.body_timeout_s) + 5
        )
        # Small responses leave at once instead of waiting for the client's delayed ACK.
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self) -> None:
        watch, conn, limits = self.server.watch, self.connection, self.server.limits
        watch.phase(conn, _Phase.IDLE, limits.idle_timeout_s)
        try:
            # Blocks until the next request's first byte (or EOF): idle until then.
            started = self.rfile.peek(1)  # type: ignore[attr-defined]
        except (TimeoutError, OSError):
            started = b""
        if not started:
            self.close_connection = True
            return
        watch.phase(conn, _Phase.HEADERS, limits.header_timeout_s)
        try:
            super().handle_one_request()
        except (TimeoutError, ConnectionError):
            self.close_connection = True
        finally:
            watch.phase(conn, _Phase.BUSY)

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

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line, 414, 431, 501) in our envelope."""
        status = int(code)
        text = "; ".join(p for p in (message, explain) if p) or HTTPStatus(status).phrase
        self._refuse(status, _PROTOCOL_CODES.get(status, "bad_request"), text, None)

    def _refuse(self, status: int, code: str, message: str, field: str | None = "body") -> None:
        _, body = error_body(status, code, message, field)
        self.close_connection = True
        self._write(status, {"Content-Type": "application/json", "Connection": "close"}, body.encode())

    def _content_length(self) -> int | None:
        """The body's length, or None when the framing is ambiguous (request smuggling's raw
        material): digits only, and several Content-Length headers must not disagree."""
        values = [v.strip() for v in self.headers.get_all("Content-Length") or []]
        if not values:
            return 0
        if len(set(values)) != 1 or not _DIGITS.fullmatch(values[0]):
            return None
        return int(values[0])

    def _dispatch(self) -> None:
        if self.headers.get("Transfer-Encoding") is not None:
            self._refuse(
                400,
                "bad_request",
                "Transfer-Encoding is not supported (chunked bodies included); send Content-Length",
                "Transfer-Encoding",
            )
            return
        length = self._content_length()
        if length is None:
            self._refuse(
                400,
                "bad_request",
                "invalid Content-Length: one header of decimal digits (conflicting values are refused)",
                "Content-Length",
            )
            return
        if length > self.server.max_body_bytes:
            # Refuse before reading: API Gateway would not forward it to the Lambda either.
            self._refuse(413, "payload_too_large", f"request body exceeds {self.server.max_body_bytes} bytes")
            return
        watch, conn = self.server.watch, self.connection
        if length:
            watch.phase(conn, _Phase.BODY, self.server.limits.body_timeout_s)
        body = self.rfile.read(length) if length else b""
        watch.phase(conn, _Phase.BUSY)
        if len(body) < length:
            self.close_connection = True  # the client went away (or timed out) mid-body
            return
        pages = self.server.pages
        if pages is not None and self.command in {"GET", "HEAD"} and not self.path.startswith("/v1/"):
            page = pages(self.command, urlsplit(self.path).path or "/")
            if page is not None:
                self._write(*page)
                return
        from evidence.testing import lambda_context

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
        """Status line, headers and body in one write: headers and body in two writes waited
        ~40 ms on a keep-alive connection for the client's delayed ACK (Nagle)."""
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            # A request line too broken to name its version: answer in HTTP/1.1, whose status
            # line and headers http.server leaves out for 0.9 (a bare body, no envelope).
            self.request_version = "HTTP/1.1"
        self.send_response(status)
        worker_pid = getattr(self.server, "worker_pid", None)
        if worker_pid is not None:
            self.send_header("X-Evidence-Worker", str(worker_pid))
        for name, value in headers.items():
            if name.lower() not in {"content-length", "transfer-encoding"}:
                self.send_header(name, value)
        if status not in _EMPTY_STATUS:
            self.send_header("Content-Length", str(len(payload)))
        buffered: list[bytes] = getattr(self, "_headers_buffer", [])
        buffered.append(b"\r\n")
        self._headers_buffer: list[bytes] = []
        send_body = self.command != "HEAD" and status not in _EMPTY_STATUS
        self.wfile.write(b"".join(buffered) + (payload if send_body else b""))


#: glibc's mallopt parameter for the number of malloc arenas (malloc.h).
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas for this process; False where there is no glibc mallopt.

    glibc gives threads their own arenas (up to 8 per core) and hands their freed memory back
    to the system only from the top of each, so a threaded server that embeds new text keeps
    growing: 576 → 707 MB in 90 s of mixed load, against 374 → 415 MB with two arenas
    (RELIABILITY.md, "Load"). Two arenas for two cores: most of a request's time is in native
    code (onnxruntime, numpy, SQLite, tantivy) that allocates outside malloc's arenas.
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))


#: The thread-count setters of the OpenBLAS builds numpy ships or links (64-bit-integer first).
_BLAS_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def limit_blas_threads(threads: int = 1) -> bool:
    """One BLAS thread per calling thread in this process; False where no OpenBLAS is found.

    The server's parallelism is its request threads. OpenBLAS's own pool, shared by every
    thread that calls it, made the dense leg's one matrix-vector product (5,183 by 384) take
    14 ms alone and 252 ms with 8 threads calling at once on a loaded 2-core machine, against
    0.5 and 4 ms with one BLAS thread (RELIABILITY.md, "Load")."""
    import ctypes

    import numpy  # noqa: F401  (loads its BLAS, so that it is in the process's maps)

    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    libraries = {
        line.split()[-1]
        for line in maps.splitlines()
        if "openblas" in line.lower() and line.split()[-1].startswith("/")
    }
    done = False
    for path in sorted(libraries):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _BLAS_SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter.argtypes = [ctypes.c_int]
                setter.restype = None
                setter(threads)
                done = True
                break
    return done


def make_server(host: str = "127.0.0.1", port: int = 8080, **kwargs: Any) -> ApiServer:
    return ApiServer((host, port), **kwargs)
