"""How `evidence serve` holds connections, measured on loopback (RELIABILITY.md, "Connections").

Starts a server in a subprocess on an empty store and measures, over raw sockets:

* `burst`: N clients (default 50) connect at once and each sends one GET /v1/health; the time
  until the last answer, per round (the issue's acceptance: all 50 within 1 s);
* `keepalive`: the median of 200 sequential POST /v1/plan on one keep-alive connection (the
  issue's acceptance: ≤ 5 ms; ~44 ms when headers and body left in two writes);
* `fresh`: the same request on a new connection each time, for comparison.

    python bench/serve_connections.py [--code ../other-checkout/shared] [--server waitress] [--json]

`--code` serves another checkout's `evidence` (before/after). `--server waitress` serves the
same resolver through waitress (`pip install waitress` first) for the comparison in
RELIABILITY.md; it is not a dependency of the project.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def start(code: Path, store: Path, server: str, workers: str = "1") -> tuple[subprocess.Popen[str], str, int]:
    # The worker count through the environment, not `--workers`: the code compared may predate it.
    env = {**os.environ, "PYTHONPATH": str(code), "EVIDENCE_SERVE_WORKERS": workers}
    if server == "waitress":
        cmd = [sys.executable, __file__, "--run-waitress", str(store)]
    else:
        cmd = [sys.executable, "-m", "evidence.cli", "serve", "--port", "0", "--store", str(store)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("serve_connections: the server did not start")
    url = str(json.loads(line)["listening"])
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return proc, host, int(port)


def burst(host: str, port: int, n: int) -> dict[str, Any]:
    barrier = threading.Barrier(n)
    took: list[float] = []
    errors: list[str] = []

    def one() -> None:
        barrier.wait()
        started = time.perf_counter()
        try:
            with socket.create_connection((host, port), timeout=30) as sock:
                sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
            if not data.startswith(b"HTTP/1.1 200"):
                errors.append(data[:40].decode("latin-1"))
        except OSError as exc:
            errors.append(repr(exc))
        took.append(time.perf_counter() - started)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"max_s": round(max(took), 3), "p50_s": round(statistics.median(took), 3), "errors": len(errors)}


def sequential(host: str, port: int, n: int, *, keep_alive: bool) -> float:
    times = []
    conn = http.client.HTTPConnection(host, port, timeout=30)
    body = json.dumps({"query": "Is customer data encrypted at rest?"})
    for _ in range(n):
        if not keep_alive:
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
        started = time.perf_counter()
        conn.request("POST", "/v1/plan", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        times.append(time.perf_counter() - started)
    conn.close()
    return round(statistics.median(times[10:]) * 1000, 2)


def run_waitress(store: str) -> None:
    """The same resolver behind waitress (a WSGI adapter of ~20 lines), for comparison only."""
    import waitress  # type: ignore[import-not-found]

    from evidence.api import runtime
    from evidence.api.app import get_app, resolve
    from evidence.config import Settings
    from evidence.server import http_to_event
    from evidence.service import EvidenceService
    from evidence.testing import lambda_context

    settings = Settings(store_dir=Path(store))
    runtime.configure(service=EvidenceService(settings), settings=settings)
    get_app()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = [
            (k[5:].replace("_", "-").title(), str(v)) for k, v in environ.items() if k.startswith("HTTP_")
        ]
        target = environ.get("PATH_INFO", "/") + (
            f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else ""
        )
        event = http_to_event(environ["REQUEST_METHOD"], target, headers, body)
        response = resolve(event, lambda_context("evidence-waitress"))
        payload = str(response.get("body") or "").encode()
        out = [(k, v) for k, v in (response.get("headers") or {}).items() if k.lower() != "content-length"]
        start_response(f"{response['statusCode']} X", [*out, ("Content-Length", str(len(payload)))])
        return [payload]

    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=8)
    print(json.dumps({"listening": f"http://127.0.0.1:{server.effective_port}"}), flush=True)
    server.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--code", default=str(ROOT / "shared"), help="the shared/ folder whose evidence to serve"
    )
    parser.add_argument("--server", choices=["evidence", "waitress"], default="evidence")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument(
        "--workers",
        default="1",
        help="EVIDENCE_SERVE_WORKERS (1: as RELIABILITY.md's figures; auto: serve's default)",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--run-waitress", metavar="STORE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_waitress:
        run_waitress(args.run_waitress)
        return 0
    with tempfile.TemporaryDirectory(prefix="evidence-conn-") as tmp:
        proc, host, port = start(Path(args.code), Path(tmp) / "store", args.server, args.workers)
        try:
            sequential(host, port, 20, keep_alive=True)  # warm-up
            bursts = []
            for _ in range(args.rounds):
                bursts.append(burst(host, port, args.clients))
                time.sleep(0.5)
            report = {
                "server": args.server,
                "code": args.code,
                "burst": {
                    "clients": args.clients,
                    "rounds": bursts,
                    "worst_max_s": max(b["max_s"] for b in bursts),
                    "errors": sum(b["errors"] for b in bursts),
                },
                "keepalive_median_ms": sequential(host, port, 200, keep_alive=True),
                "fresh_connection_median_ms": sequential(host, port, 200, keep_alive=False),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
