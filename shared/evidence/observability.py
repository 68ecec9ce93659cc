"""Powertools Logger, Tracer and Metrics, built on first use.

Powertools reads its environment (POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE,
POWERTOOLS_TRACE_DISABLED, ...) when an object is constructed, and the Tracer pulls in
aws-xray-sdk: building them at import would read env vars and slow every cold import,
so the factories below are cached getters and `lambda_handler` applies the Powertools
decorators on the first invocation.

Metrics are only recorded inside an instrumented Lambda invocation: the local server and
direct resolver calls share the route code but never flush EMF, so recording there would
only grow Powertools' class-level metric set.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics, Tracer

    from evidence.model import IndexDocumentResponse, RetrieveResponse

NAMESPACE = "Evidence"
SERVICE = "evidence"
#: 1 when a retrieve fell back from the reranker to first-stage order, else 0: its average is the
#: fallback rate the stack alarms on (infra/evidence_infra/observability.py).
RERANK_FALLBACKS = "rerank_fallbacks"

LambdaFn = Callable[[Any, Any], Any]
R = TypeVar("R")

_metrics_active: contextvars.ContextVar[bool] = contextvars.ContextVar("evidence_metrics", default=False)


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stdout` is at emit time (as EMF's print does), so a caller that
    redirects stdout (`evidence invoke`, test capture) gets the logs too."""

    @property
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


@lru_cache(maxsize=1)
def get_logger() -> Logger:
    from aws_lambda_powertools import Logger

    # POWERTOOLS_SERVICE_NAME (set per function by the stack) wins; "evidence" elsewhere.
    logger = Logger(logger_handler=_StdoutHandler())
    if logger.service == "service_undefined":
        logger.append_keys(service=SERVICE)
    return logger


@lru_cache(maxsize=1)
def get_tracer() -> Tracer | None:
    """None where tracing is off (outside Lambda, POWERTOOLS_TRACE_DISABLED): Powertools' Tracer
    imports and patches aws-xray-sdk even when disabled, ~0.4 s of cold start for nothing."""
    from aws_lambda_powertools.tracing.tracer import Tracer

    if Tracer._is_tracer_disabled():
        return None
    # Only botocore (S3, Bedrock) is worth a subsegment; patching everything costs cold start.
    return Tracer(patch_modules=["botocore"])


@lru_cache(maxsize=1)
def get_metrics() -> Metrics:
    from aws_lambda_powertools import Metrics

    metrics = Metrics()  # POWERTOOLS_METRICS_NAMESPACE / POWERTOOLS_SERVICE_NAME when set
    if not metrics.namespace:
        metrics.namespace = NAMESPACE
    if not metrics.service:
        metrics.service = SERVICE
    return metrics


def lambda_handler(
    function: str, fn: Callable[[Any, Any], R], *, correlation_id_path: str | None = None
) -> Callable[[Any, Any], R]:
    """`fn(event, context)` as a Lambda handler: Powertools' logger, tracer and metrics around it,
    built once, at the first call, from the cached getters (the module import stays near-free).

    The one wrapper every `functions/*/handler.py` uses; typed by what `fn` returns.
    """
    built: list[LambdaFn] = []
    lock = threading.Lock()

    def build() -> LambdaFn:
        logger, tracer, metrics = get_logger(), get_tracer(), get_metrics()

        def with_function_dimension(event: Any, context: Any) -> Any:
            logger.append_keys(function=function)
            # Per invocation, not as default dimensions: handlers share one Metrics object.
            metrics.add_dimension(name="function", value=function)
            token = _metrics_active.set(True)
            try:
                # Always one application metric, so no flush is empty (Powertools warns on those).
                add_metric("invocations", 1)
                return fn(event, context)
            finally:
                _metrics_active.reset(token)

        chain: LambdaFn = logger.inject_lambda_context(
            with_function_dimension, correlation_id_path=correlation_id_path, clear_state=True
        )
        if tracer is not None:
            chain = tracer.capture_lambda_handler(chain, capture_response=False)
        return metrics.log_metrics(chain, capture_cold_start_metric=True)

    def handler(event: Any, context: Any) -> R:
        if not built:
            with lock:
                if not built:
                    built.append(build())
        # Powertools' decorators return what `fn` returned, untyped.
        return cast("R", built[0](event, context))

    handler.__name__ = f"{function}_handler"
    handler.__qualname__ = handler.__name__
    return handler


def metrics_enabled() -> bool:
    return _metrics_active.get()


def add_metric(name: str, value: float, unit: str = "Count") -> None:
    if not metrics_enabled():
        return
    from aws_lambda_powertools.metrics import MetricUnit

    get_metrics().add_metric(name=name, unit=MetricUnit(unit), value=value)


def record_retrieve(response: RetrieveResponse) -> None:
    """Per-stage latency, hit counts and degradations from the response's own telemetry."""
    if not metrics_enabled():
        return
    telemetry = response.telemetry
    for stage in telemetry.stages:
        add_metric(f"stage_{stage.name}_ms", stage.ms, "Milliseconds")
    add_metric("retrieve_ms", telemetry.total_ms, "Milliseconds")
    add_metric("hits", len(response.hits))
    add_metric("followups", len(response.followups))
    add_metric("degraded", 1 if telemetry.degraded else 0)
    add_metric(RERANK_FALLBACKS, 1 if any(r.startswith("rerank:") for r in telemetry.degraded) else 0)
    for reason in telemetry.degraded:
        get_logger().warning("retrieval degraded", extra={"degraded": reason})


def record_indexed(response: IndexDocumentResponse) -> None:
    if not metrics_enabled():
        return
    add_metric(f"documents_{response.status}", 1)
    add_metric("chunks_indexed", response.chunks)


def record_error(code: str, status: int) -> None:
    add_metric("client_errors" if status < 500 else "server_errors", 1)
    if metrics_enabled():
        get_logger().info("request failed", extra={"error_code": code, "status": status})
