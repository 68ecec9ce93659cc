"""`evidence serve`: the HTTP API on loopback, through the retriever's own resolver."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

from evidence.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, Command, settings_from_args

#: Seconds a stopping server waits for its warm-up (loading the model) to finish.
WARM_JOIN_S = 30.0

if TYPE_CHECKING:
    from evidence.cli.serve_sizing import WorkerPlan
    from evidence.embed.background import SharedEmbedding


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    p.add_argument(
        "--workers",
        type=_workers,
        default=None,
        metavar="N|auto",
        help="worker processes sharing the port and the store; auto = one per core, as many as "
        "fit in memory (default EVIDENCE_SERVE_WORKERS, auto)",
    )


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers or auto") from None


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    from evidence.cli.serve_sizing import plan_serve_workers

    plan = plan_serve_workers(settings, args.workers)
    workers = plan.workers
    if workers < 1:
        raise CliError("--workers must be at least 1", EXIT_USAGE)
    print(f"evidence serve: {plan.reason}", file=sys.stderr, flush=True)
    if workers == 1:
        return serve_one(args, chosen=plan)
    from evidence.cli.serve_workers import Supervisor, listen
    from evidence.embed.background import shared_embedding
    from evidence.server import ConnectionLimits

    try:
        listener = listen(args.host, args.port, backlog=ConnectionLimits().backlog)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc}", EXIT_FAILED) from exc
    host, port = listener.getsockname()[:2]
    url = f"http://{host!s}:{port}"

    def announce() -> None:
        print(
            json.dumps(
                {"listening": url, "store": str(settings.store_dir), "workers": workers, "why": plan.reason}
            ),
            flush=True,
        )
        print(
            f"evidence: serving {url} with {workers} worker processes (the workbench at {url}/, OpenAPI at "
            f"{url}/v1/openapi.json); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )

    # One document-embedding process for every worker (evidence/embed/background.py).
    embedding = shared_embedding(settings, workers)
    # Each worker's query model gets its share of the cores: with one onnxruntime pool of every
    # core per worker, a query's operators waited for a pool thread the other worker's threads
    # had preempted (EVIDENCE_EMBED_THREADS, when set, is kept).
    from evidence.config import available_cores

    query_threads = settings.embed_threads or max(1, available_cores() // workers)
    return Supervisor(
        workers,
        lambda sock: serve_one(args, listener=sock, embedding=embedding, query_threads=query_threads),
        listener,
        embedding,
        announce=announce,
    ).run()


def serve_one(
    args: argparse.Namespace,
    listener: socket.socket | None = None,
    embedding: SharedEmbedding | None = None,
    query_threads: int = 0,
    chosen: WorkerPlan | None = None,
) -> int:
    """One server process: the whole of `serve` (`chosen`: why one, for its `listening` line), or
    one worker of `serve --workers` on the supervisor's `listener` (then it prints no `listening`
    line: the supervisor did), embedding documents in the supervisor's shared `embedding` process
    and queries on `query_threads`."""
    from evidence.api import runtime
    from evidence.api.app import get_app
    from evidence.api.uploads import UploadJobs, configure_uploads
    from evidence.assess.threads import ThreadLauncher
    from evidence.server import ConnectionLimits, limit_blas_threads, limit_malloc_arenas, make_server
    from evidence.service import EvidenceService
    from evidence.workbench.page import serve_page

    limit_malloc_arenas()  # before the model's and the request threads exist
    limit_blas_threads()  # the request threads are the parallelism
    settings = settings_from_args(args, **({"embed_threads": query_threads} if query_threads else {}))
    runtime.configure(settings=settings)
    authorizer = runtime.get_authorizer()  # a broken access policy stops the server here, not each request
    if authorizer.open and args.host not in {"127.0.0.1", "::1", "localhost"}:
        print(
            f"evidence serve: warning: no access policy (EVIDENCE_ACCESS_POLICY) and listening on "
            f"{args.host}: every caller that reaches it may read and write every index",
            file=sys.stderr,
        )
    from evidence.embed.background import serving_embedder

    # Documents embed in a worker process at `write_nice`, so that writes do not take the cores
    # from reads (evidence/embed/background.py).
    embedder, background = serving_embedder(settings, embedding)
    service = EvidenceService(settings, embedder=embedder)
    runtime.configure(service=service, settings=settings, authorizer=authorizer)
    from evidence.assess.launch import add_launcher, get_launcher
    from evidence.local_sfn import local_launcher

    add_launcher(local_launcher)  # EVIDENCE_BATCH_LOCAL_ASL: batches on the state machine's own ASL
    try:
        get_launcher()  # a missing results bucket stops the server here, not the first batch
    except BaseException:
        service.close()
        raise
    # The document-embedding worker starts with the first upload (BackgroundDocuments), not
    # here: a server that only reads never pays its process and model (250-300 MB).
    get_app()
    configure_uploads(
        UploadJobs(
            settings.store_dir / "uploads", runtime.get_service, deadline_s=settings.async_upload_deadline_s
        )
    )
    try:
        server = make_server(
            args.host,
            args.port,
            max_body_bytes=settings.max_body_bytes,
            quiet=not args.verbose,
            pages=serve_page,
            listener=listener,
            limits=ConnectionLimits(
                max_connections=settings.serve_max_connections,
                idle_timeout_s=settings.serve_idle_timeout_s,
                header_timeout_s=settings.serve_header_timeout_s,
                body_timeout_s=settings.serve_body_timeout_s,
            ),
        )
    except OSError as exc:
        configure_uploads(None)
        service.close()
        if background is not None:
            background.close()
        runtime.reset()
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc}", EXIT_FAILED) from exc
    # Once the socket is bound, beside the listener: a request arriving meanwhile waits for it
    # outside its budget. Not before: a port that cannot be bound must not leave onnxruntime
    # building its session in a thread while the interpreter ends (that aborted the process).
    warming = threading.Thread(target=runtime.warm, name="warm", daemon=True)
    warming.start()
    if listener is None:
        started = {"listening": server.url, "store": str(settings.store_dir), "workers": 1}
        print(json.dumps(started | ({"why": chosen.reason} if chosen else {})), flush=True)
        print(
            f"evidence: serving {server.url} (the workbench at {server.url}/, OpenAPI at "
            f"{server.url}/v1/openapi.json); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds serve_forever in this (main) thread

    previous = (
        signal.signal(signal.SIGTERM, stop) if threading.current_thread() is threading.main_thread() else None
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        # A stop during the warm-up waits for it (the model loads in ~1 s): the interpreter ending
        # while onnxruntime builds its session in that thread aborted the process (SIGABRT).
        warming.join(timeout=WARM_JOIN_S)
        ThreadLauncher.stop_all()  # reported interrupted now, not left to run on a closed service
        configure_uploads(None)
        service.close()
        if background is not None:
            background.close()
        runtime.reset()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


COMMAND = Command(
    "serve",
    "serve the HTTP API locally (same resolver as the retriever Lambda)",
    add_arguments,
    run,
    description="The HTTP API (docs/api.md) on loopback; OpenAPI at /v1/openapi.json.",
)
