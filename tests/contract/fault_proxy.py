"""A fault-injecting HTTP proxy on loopback, in front of osmem-server.

The adapter talks to it through the real opensearch-py client and `helpers.streaming_bulk`;
the proxy forwards to osmem and, as scripted, misbehaves the way a loaded cluster does:

- `item_429`: a bulk request is forwarded without some of its actions, and the answer gets a
  429 (`es_rejected_execution_exception`) item in their place, in order (those actions were
  not applied, as on a real cluster whose write queue is full);
- `status`: the request is answered with that status and never forwarded (not applied);
- `cut`: the request is forwarded (applied), then the connection is cut halfway through the
  answer;
- `slow`: the request is forwarded (applied) and answered `delay_s` late;
- `terms_limit`: any `terms` clause longer than the limit is refused with 400, as
  `index.max_terms_count` does.

The cluster setting `action.auto_create_index` (osmem stores it but auto-creates regardless) is
modelled as OpenSearch applies it (`AutoCreateIndex`): once a `PUT _cluster/settings` through the
proxy sets it, a bulk action into a missing index the setting does not allow is answered
`404 index_not_found_exception` and not forwarded (so osmem does not create the index); `true`
(the default) or a matching `+pattern` lets osmem create it, as a cluster does.

`serverless=Serverless(...)` adds what an OpenSearch Serverless vector collection does
differently (AWS, "Supported operations and plugins in Amazon OpenSearch Serverless",
docs.aws.amazon.com/opensearch-service/latest/developerguide/serverless-genref.html): caller
ids in bulk index actions are ignored (stripped, so the collection assigns its own) or refused;
`_delete_by_query`, the `refresh` parameter, `GET /` and the nodes API are refused (none is in
the supported list); and writes (and deletes) become visible to searches and counts only
`visibility_s` after they were acknowledged.
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

Action = dict[str, Any]


@dataclass
class Fault:
    """Applies to matching requests number `first` .. `first + times - 1` (1-based; times=0: all)."""

    kind: str  # item_429 | status | cut | slow
    path: str = r"/_bulk$"
    method: str = "POST"
    first: int = 1
    times: int = 1
    #: item_429: which actions (meta, source) to refuse.
    items: Callable[[Action, Action | None], bool] = lambda _meta, _source: True
    status: int = 503
    delay_s: float = 0.0
    seen: int = 0

    def matches(self, method: str, path: str) -> bool:
        if method != self.method or not re.search(self.path, path):
            return False
        self.seen += 1
        return self.seen >= self.first and (self.times == 0 or self.seen < self.first + self.times)


@dataclass
class Serverless:
    visibility_s: float = 1.0
    ids: str = "strip"  # strip | refuse


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int | None = None
    fault: str | None = None


@dataclass
class _Pending:
    """A write not yet visible (Serverless): hidden from reads until `visible_at`."""

    index: str
    doc_id: str
    visible_at: float


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        *,
        serverless: Serverless | None = None,
        terms_limit: int | None = None,
        main_version: str | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.serverless = serverless
        self.terms_limit = terms_limit
        #: Rewrite GET / to claim this version with no distribution (override_main_response_version).
        self.main_version = main_version
        self.faults: list[Fault] = []
        self.log: list[Recorded] = []
        self.forwarded_bulk_actions = 0
        #: `action.auto_create_index` as last put through the proxy (None: the default, true).
        self.auto_create_index: str | None = None
        self._hidden: dict[tuple[str, str], float] = {}
        self._deletes: list[tuple[float, str, str]] = []
        self._lock = threading.RLock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._handle(self)

            def do_POST(self) -> None:
                proxy._handle(self)

            def do_PUT(self) -> None:
                proxy._handle(self)

            def do_DELETE(self) -> None:
                proxy._handle(self)

            def do_HEAD(self) -> None:
                proxy._handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02})
        self._thread.daemon = True
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- scripting and inspection -------------------------------------------------------------

    def add(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def settle(self) -> None:
        """Wait until every write is visible and every deferred delete applied (Serverless)."""
        if self.serverless is None:
            return
        while True:
            with self._lock:
                due = max([*self._hidden.values(), *(t for t, _i, _d in self._deletes)], default=0.0)
            wait = due - time.monotonic()
            if wait <= 0:
                self._apply_due_deletes()
                return
            time.sleep(wait + 0.01)

    def requests(self, path: str = "", method: str | None = None) -> list[Recorded]:
        return [r for r in self.log if re.search(path, r.path) and (method is None or r.method == method)]

    # --- plumbing -------------------------------------------------------------------------------

    def _upstream(
        self, method: str, path: str, body: bytes | None, ctype: str = "application/json"
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            headers = {"Content-Type": ctype} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _reply(self, handler: BaseHTTPRequestHandler, status: int, payload: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json; charset=UTF-8")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): that is the point of `slow`

    def _error(self, handler: BaseHTTPRequestHandler, status: int, kind: str, reason: str) -> None:
        body = {
            "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
            "status": status,
        }
        self._reply(handler, status, json.dumps(body).encode())

    def _cut(self, handler: BaseHTTPRequestHandler, status: int, payload: bytes) -> None:
        """Headers promise the whole answer; half of it arrives; the connection dies."""
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json; charset=UTF-8")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        handler.close_connection = True

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        path, query = split.path, dict(parse_qsl(split.query))
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if handler.headers.get("Content-Encoding", "").lower() == "gzip" and raw:
            raw = gzip.decompress(raw)
        method = handler.command
        is_bulk = path.endswith("/_bulk")
        body: Any = raw.decode("utf-8") if is_bulk else (json.loads(raw) if raw else None)
        record = Recorded(method, path, query, body)
        with self._lock:
            self.log.append(record)
            # Every fault counts every request it matches, whichever one acts on it.
            matching = [f for f in self.faults if f.matches(method, path)]
            fault = matching[0] if matching else None
        record.fault = fault.kind if fault else None
        self._apply_due_deletes()

        if method == "PUT" and path == "/_cluster/settings" and isinstance(body, dict):
            value = _auto_create_setting(body)
            if value is not None:
                with self._lock:
                    self.auto_create_index = value
        refusal = self._refusal(method, path, query, body)
        if refusal is not None:
            record.status = refusal[0]
            self._error(handler, *refusal)
            return
        if fault is not None and fault.kind == "status":
            record.status = fault.status
            self._error(handler, fault.status, "fault_injected", f"injected {fault.status}")
            return

        query.pop("request_timeout", None)
        upstream_path = path + (f"?{urlencode(query)}" if query else "")
        if is_bulk:
            status, payload = self._bulk(upstream_path, str(body), fault)
        elif (
            self.serverless is not None
            and method in {"GET", "POST"}
            and path.endswith(("/_search", "/_count"))
        ):
            status, payload = self._hidden_read(path, query, body)
        elif method == "GET" and path == "/" and self.main_version:
            status, payload = self._upstream(method, upstream_path, None)
            info = json.loads(payload)
            info["version"] = {"number": self.main_version, "build_flavor": "oss"}
            payload = json.dumps(info).encode()
        else:
            status, payload = self._upstream(method, upstream_path, raw if raw else None)
        record.status = status
        if fault is not None and fault.kind == "cut":
            self._cut(handler, status, payload)
            return
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay_s)
        self._reply(handler, status, payload)

    def _refusal(
        self, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, str, str] | None:
        if self.terms_limit is not None and body is not None and not path.endswith("/_bulk"):
            longest = max((len(v) for v in _terms_lists(body)), default=0)
            if longest > self.terms_limit:
                return (
                    400,
                    "illegal_argument_exception",
                    f"The number of terms [{longest}] used in the Terms Query request has exceeded the "
                    f"allowed maximum of [{self.terms_limit}]. This maximum can be set by changing the "
                    "[index.max_terms_count] index level setting.",
                )
        if self.serverless is None:
            return None
        unsupported = "is not supported by OpenSearch Serverless (serverless-genref)"
        if path.endswith("/_delete_by_query"):
            return 404, "unsupported_operation_exception", f"{method} {path} {unsupported}"
        if "refresh" in query:
            return 400, "illegal_argument_exception", f"the refresh parameter {unsupported}"
        if method == "GET" and (path == "/" or path.startswith("/_nodes")):
            return 404, "unsupported_operation_exception", f"{method} {path} {unsupported}"
        if re.search(r"/_doc/[^/]+$", path) and method in {"PUT", "POST"}:
            return (
                400,
                "illegal_argument_exception",
                "Document ID is not supported in create/index operation request",
            )
        return None

    # --- bulk -------------------------------------------------------------------------------------

    def _bulk(self, upstream_path: str, ndjson: str, fault: Fault | None) -> tuple[int, bytes]:
        actions = list(_parse_bulk(ndjson))
        now = time.monotonic()
        answers: list[dict[str, Any] | None] = [None] * len(actions)
        forward: list[int] = []
        for i, (meta, source) in enumerate(actions):
            op, spec = next(iter(meta.items()))
            refused = self._not_auto_created(str(spec.get("_index") or _path_index(upstream_path)))
            if refused is not None:
                answers[i] = {
                    op: {
                        "_index": spec.get("_index"),
                        "_id": spec.get("_id"),
                        "status": 404,
                        "error": {"type": "index_not_found_exception", "reason": refused},
                    }
                }
                continue
            if fault is not None and fault.kind == "item_429" and fault.items(meta, source):
                answers[i] = {
                    op: {
                        "_index": spec.get("_index"),
                        "_id": spec.get("_id"),
                        "status": 429,
                        "error": {
                            "type": "es_rejected_execution_exception",
                            "reason": "rejected execution of coordinating operation [write queue full]",
                        },
                    }
                }
                continue
            if self.serverless is not None and op in {"index", "create"} and "_id" in spec:
                if self.serverless.ids == "refuse":
                    answers[i] = {
                        op: {
                            "_index": spec.get("_index"),
                            "status": 400,
                            "error": {
                                "type": "illegal_argument_exception",
                                "reason": "Document ID is not supported in create/index operation request",
                            },
                        }
                    }
                    continue
                del spec["_id"]
            if self.serverless is not None and op == "delete":
                # Acknowledged now, applied (visible) later.
                with self._lock:
                    self._deletes.append(
                        (now + self.serverless.visibility_s, str(spec["_index"]), str(spec["_id"]))
                    )
                answers[i] = {
                    op: {"_index": spec["_index"], "_id": spec["_id"], "status": 200, "result": "deleted"}
                }
                continue
            forward.append(i)
        status = 200
        took = 0
        if forward:
            lines = []
            for i in forward:
                meta, source = actions[i]
                lines.append(json.dumps(meta))
                if source is not None:
                    lines.append(json.dumps(source))
            status, payload = self._upstream(
                "POST", upstream_path, ("\n".join(lines) + "\n").encode(), "application/x-ndjson"
            )
            if status != 200:
                return status, payload
            result = json.loads(payload)
            took = int(result.get("took", 0))
            with self._lock:
                self.forwarded_bulk_actions += len(forward)
            for i, item in zip(forward, result["items"], strict=True):
                answers[i] = item
                op, spec = next(iter(item.items()))
                if (
                    self.serverless is not None
                    and op in {"index", "create"}
                    and 200 <= spec.get("status", 500) < 300
                ):
                    with self._lock:
                        self._hidden[(str(spec["_index"]), str(spec["_id"]))] = (
                            now + self.serverless.visibility_s
                        )
        items = [a for a in answers if a is not None]
        errors = any(not 200 <= next(iter(a.values())).get("status", 500) < 300 for a in items)
        return status, json.dumps({"took": took, "errors": errors, "items": items}).encode()

    def _not_auto_created(self, index: str) -> str | None:
        """The refusal's reason when `index` is missing and `action.auto_create_index` does not
        allow creating it (OpenSearch's AutoCreateIndex: `false`, or patterns where the first
        match decides and no match refuses); None when the action may go to osmem."""
        with self._lock:
            setting = self.auto_create_index
        if setting is None or setting.strip().lower() == "true":
            return None
        status, _ = self._upstream("HEAD", f"/{index}", None)
        if status == 200:
            return None
        if setting.strip().lower() == "false":
            return f"no such index [{index}] and [action.auto_create_index] is [false]"
        for pattern in (p.strip() for p in setting.split(",") if p.strip()):
            allow = not pattern.startswith("-")
            if re.fullmatch(re.escape(pattern.lstrip("+-")).replace(r"\*", ".*"), index):
                if allow:
                    return None
                break
        return f"no such index [{index}] and [action.auto_create_index] ([{setting}]) doesn't match"

    # --- Serverless visibility ----------------------------------------------------------------------

    def _apply_due_deletes(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [(i, d) for t, i, d in self._deletes if t <= now]
            self._deletes = [x for x in self._deletes if x[0] > now]
            self._hidden = {k: t for k, t in self._hidden.items() if t > now}
        for index, doc_id in due:
            self._upstream("DELETE", f"/{index}/_doc/{doc_id}?refresh=true", None)

    def _invisible(self) -> set[tuple[str, str]]:
        now = time.monotonic()
        with self._lock:
            return {k for k, t in self._hidden.items() if t > now}

    def _hidden_read(self, path: str, query: dict[str, str], body: Any) -> tuple[int, bytes]:
        index = path.strip("/").split("/")[0]
        hidden = {d for i, d in self._invisible() if i == index}
        search: dict[str, Any] = dict(body or {})
        counting = path.endswith("/_count")
        offset = int(search.pop("from", 0))
        size = 10_000 if counting else int(search.get("size", 10))
        search["size"] = min(10_000, offset + size + len(hidden))
        if counting:
            search["_source"] = False
        params = {k: v for k, v in query.items() if k in {"search_pipeline"}}
        target = f"/{index}/_search" + (f"?{urlencode(params)}" if params else "")
        status, payload = self._upstream("POST", target, json.dumps(search).encode())
        if status != 200:
            return status, payload
        result = json.loads(payload)
        hits = [h for h in result.get("hits", {}).get("hits", []) if h.get("_id") not in hidden]
        if counting:
            return 200, json.dumps({"count": len(hits), "_shards": result.get("_shards", {})}).encode()
        result["hits"]["hits"] = hits[offset : offset + size]
        if isinstance(result["hits"].get("total"), dict):
            result["hits"]["total"]["value"] = len(hits)
        return 200, json.dumps(result).encode()


def _parse_bulk(ndjson: str) -> Iterator[tuple[Action, Action | None]]:
    lines = [json.loads(line) for line in ndjson.splitlines() if line.strip()]
    i = 0
    while i < len(lines):
        meta = lines[i]
        op = next(iter(meta))
        if op == "delete":
            yield meta, None
            i += 1
        else:
            yield meta, lines[i + 1]
            i += 2


def _auto_create_setting(body: dict[str, Any]) -> str | None:
    """`action.auto_create_index` in a cluster settings body, flat or nested."""
    persistent = body.get("persistent") or {}
    value = persistent.get("action.auto_create_index")
    if value is None:
        value = (persistent.get("action") or {}).get("auto_create_index")
    return None if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _path_index(path: str) -> str:
    """The index of `/<index>/_bulk` (bulk actions may leave `_index` to the path)."""
    head = path.split("?", maxsplit=1)[0].strip("/").split("/")[0]
    return "" if head.startswith("_") else head


def _terms_lists(node: Any) -> Iterator[list[Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "terms" and isinstance(value, dict):
                yield from (v for v in value.values() if isinstance(v, list))
            yield from _terms_lists(value)
    elif isinstance(node, list):
        for value in node:
            yield from _terms_lists(value)


@dataclass
class Census:
    """What osmem really holds (read directly, not through the proxy)."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def take(cls, url: str, index: str) -> Census:
        conn = http.client.HTTPConnection(*_hostport(url), timeout=30)
        try:
            body = json.dumps({"size": 10_000, "query": {"match_all": {}}})
            conn.request("POST", f"/{index}/_search", body=body, headers={"Content-Type": "application/json"})
            result = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        return cls([{**h["_source"], "_id": h["_id"]} for h in result["hits"]["hits"]])


def _hostport(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80
