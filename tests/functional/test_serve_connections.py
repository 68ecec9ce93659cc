"""`evidence serve` holds connections properly (issue 26.6, 26.11): raw sockets on loopback.

Backlog, per-phase deadlines, the connection cap (503 + Retry-After), one write per response,
strict Content-Length, and http.server's own refusals in the JSON envelope. The two timed tests
assert bounds the old server missed by a wide margin (SYN retries of 1-7 s; ~40 ms of delayed
ACK per keep-alive request), loose enough to hold beside a CPU burner.
"""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from evidence.server import ApiServer, ConnectionLimits, make_server
from evidence.service import EvidenceService


@contextmanager
def serving(**kwargs: Any) -> Iterator[ApiServer]:
    srv = make_server("127.0.0.1", 0, **kwargs)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def server(service: EvidenceService) -> Iterator[ApiServer]:
    with serving() as srv:
        yield srv


def connect(srv: ApiServer, timeout: float = 10.0) -> socket.socket:
    host, port = srv.server_address[:2]
    return socket.create_connection((str(host), int(port)), timeout=timeout)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP response off `sock` (Content-Length framed), or EOF's (0, {}, b"")."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            return (0, {}, b"") if not data else (-1, {}, data)
        data += part
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        part = sock.recv(65536)
        if not part:
            break
        rest += part
    return status, headers, rest[:length]


def exchange(srv: ApiServer, raw: bytes) -> tuple[int, dict[str, str], Any]:
    with connect(srv) as sock:
        sock.sendall(raw)
        status, headers, body = read_response(sock)
    return status, headers, json.loads(body) if body else None


# --- strict framing and the envelope ------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths",
    [["1_3"], ["+2"], ["2 2"], ["0x2"], ["2", "3"], ["-1"], ["2, 2"]],
    ids=["underscore", "sign", "inner-space", "hex", "conflicting", "negative", "list"],
)
def test_content_length_is_strict(server: ApiServer, lengths: list[str]) -> None:
    head = "".join(f"Content-Length: {v}\r\n" for v in lengths)
    status, headers, body = exchange(server, f"POST /v1/plan HTTP/1.1\r\nHost: x\r\n{head}\r\n{{}}".encode())
    assert status == 400 and headers["content-type"] == "application/json"
    assert body["error"]["code"] == "bad_request" and body["error"]["field"] == "Content-Length"


def test_repeated_equal_content_length_and_transfer_encoding(server: ApiServer) -> None:
    payload = b'{"query": "mfa"}'
    twice = f"Content-Length: {len(payload)}\r\n" * 2
    status, _, body = exchange(server, f"POST /v1/plan HTTP/1.1\r\nHost: x\r\n{twice}\r\n".encode() + payload)
    assert status == 200 and body["query"] == "mfa"
    status, _, body = exchange(
        server, b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    assert status == 400 and body["error"]["field"] == "Transfer-Encoding"


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "uri_too_long"),
        (b"GET /v1/health HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "headers_too_large"),
        (b"GET /v1/health HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431, "headers_too_large"),
        (b"NONSENSE\r\n\r\n", 400, "bad_request"),
        (b"GET /v1/health HTTP/9.9\r\n\r\n", 505, "http_version_not_supported"),
        (b"BREW /v1/health HTTP/1.1\r\n\r\n", 501, "not_implemented"),
    ],
    ids=["414", "431-long", "431-many", "400", "505", "501"],
)
def test_protocol_errors_are_in_the_envelope(server: ApiServer, raw: bytes, status: int, code: str) -> None:
    got, headers, body = exchange(server, raw)
    assert got == status and headers["content-type"] == "application/json"
    assert body["error"]["code"] == code and body["error"]["message"]


# --- deadlines ----------------------------------------------------------------------------------


def test_a_half_sent_request_gets_a_408_and_is_closed(service: EvidenceService) -> None:
    with serving(limits=ConnectionLimits(header_timeout_s=0.5, body_timeout_s=0.5)) as srv:
        for partial in (
            b"GET /v1/health HTTP/1.1\r\nHost: x\r\n",
            b"POST /v1/plan HTTP/1.1\r\nContent-Length: 50\r\n\r\n{",
        ):
            with connect(srv, timeout=20) as sock:
                sock.sendall(partial)
                # Trickling a byte now and then does not extend the deadline (it bounds the phase).
                for _ in range(3):
                    time.sleep(0.2)
                    try:
                        sock.sendall(
                            b"X-Slow: 1\r\n" if partial.endswith(b"\r\n") and b"POST" not in partial else b" "
                        )
                    except OSError:
                        break
                status, _headers, body = read_response(sock)
                assert status == 408, (partial, status, body)
                assert json.loads(body)["error"]["code"] == "request_timeout"
                assert sock.recv(1) == b""  # closed


def test_an_idle_keep_alive_connection_is_closed(service: EvidenceService) -> None:
    with serving(limits=ConnectionLimits(idle_timeout_s=0.3)) as srv, connect(srv, timeout=20) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(sock)[0] == 200
        assert sock.recv(1) == b""  # closed silently once idle, not held for ever


# --- the connection cap -------------------------------------------------------------------------


def test_past_the_cap_a_503_with_retry_after_and_threads_stay_bounded(service: EvidenceService) -> None:
    limits = ConnectionLimits(max_connections=4, header_timeout_s=30)
    with serving(limits=limits) as srv:
        threads_before = threading.active_count()
        slow = [connect(srv) for _ in range(4)]
        for sock in slow:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\n")  # headers never finish: held, not idle
        # Held = reading headers. Until its thread has read the first byte a connection counts as
        # idle, and the cap closes an idle one to make room: on a busy machine a 21st was served.
        end = time.monotonic() + 30
        while srv.watch.in_phase("headers") < 4:
            assert time.monotonic() < end, "the slow connections never reached their headers"
            time.sleep(0.01)
        refused = []
        for _ in range(20):
            with connect(srv) as sock:
                sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                refused.append(read_response(sock))
        assert {status for status, _, _ in refused} == {503}
        _status, headers, body = refused[0]
        assert headers["retry-after"] == "1" and json.loads(body)["error"]["code"] == "service_unavailable"
        # 24 clients, at most 4 connection threads (the old server made one thread per client).
        assert threading.active_count() - threads_before <= 4 + 1
        for sock in slow:
            sock.close()
        end = time.monotonic() + 10
        while len(srv.watch) and time.monotonic() < end:
            time.sleep(0.01)
        assert exchange(srv, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


def test_idle_keep_alive_connections_make_room(service: EvidenceService) -> None:
    with serving(limits=ConnectionLimits(max_connections=2, idle_timeout_s=60)) as srv:
        idle = [connect(srv) for _ in range(2)]
        for sock in idle:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock)[0] == 200
        # A response is read before its thread goes back to waiting: wait for that, not a time.
        end = time.monotonic() + 10
        while srv.watch.idle() < 2 and time.monotonic() < end:
            time.sleep(0.01)
        assert exchange(srv, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200
        for sock in idle:
            sock.close()


# --- speed at the acceptance's bounds -----------------------------------------------------------


def test_fifty_simultaneous_health_checks_are_all_accepted_at_once(server: ApiServer) -> None:
    """The old backlog of 5 dropped SYNs: those clients waited for TCP's 1 s (then 3 s, 7 s)
    retry before their connection was even accepted. Connecting is the kernel's work, so its
    bound holds on a loaded machine; the whole exchange gets a loose bound here, and
    bench/serve_connections.py measures it (50 within 1 s on an idle machine)."""
    n = 50
    barrier = threading.Barrier(n)
    connected: list[float] = []
    took: list[float] = []
    failures: list[str] = []

    def one() -> None:
        barrier.wait()
        started = time.perf_counter()
        try:
            with connect(server) as sock:
                connected.append(time.perf_counter() - started)
                sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                status = read_response(sock)[0]
            if status != 200:
                failures.append(str(status))
        except OSError as exc:
            failures.append(repr(exc))
        took.append(time.perf_counter() - started)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not failures and len(took) == n
    assert max(connected) < 1.0, sorted(connected)[-5:]
    assert max(took) < 5.0, sorted(took)[-5:]
    assert server.request_queue_size >= 128


def test_keep_alive_requests_do_not_wait_for_delayed_acks(server: ApiServer) -> None:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=10)
    times = []
    try:
        for i in range(40):
            started = time.perf_counter()
            conn.request(
                "POST",
                "/v1/plan",
                body=json.dumps({"query": f"q {i}"}),
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            assert response.status == 200
            response.read()
            times.append(time.perf_counter() - started)
    finally:
        conn.close()
    # ~40 ms each before (headers and body in two writes, Nagle against delayed ACK); ~1 ms now.
    assert statistics.median(times[5:]) < 0.02, statistics.median(times[5:])


# --- the pages hook -----------------------------------------------------------------------------


def test_pages_answer_get_outside_v1_and_the_api_is_untouched(service: EvidenceService) -> None:
    def pages(method: str, path: str) -> tuple[int, dict[str, str], bytes] | None:
        return (200, {"Content-Type": "text/html"}, b"<p>hi</p>") if path == "/" else None

    with serving(pages=pages) as srv:
        status, headers, body = exchange_raw(srv, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, headers["content-type"], body) == (200, "text/html", b"<p>hi</p>")
        status, _, _head_body = exchange_raw(srv, b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200
        assert exchange(srv, b"GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\n")[2]["error"]["code"] == "not_found"
        assert exchange(srv, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


def exchange_raw(srv: ApiServer, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    with connect(srv) as sock:
        sock.sendall(raw)
        if raw.startswith(b"HEAD"):
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            return int(data.split()[1]), {}, b""
        return read_response(sock)
