"""Retriever: the HTTP API behind API Gateway (REST proxy), plus the batch chain's retrieve step.

An API Gateway event goes through the resolver (`evidence.api.app`); any other event is a
Step Functions task payload (`evidence.assess.CriterionTask`) whose evidence is written to
the result store and returned as a pointer.
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "httpMethod" in event:
        from evidence.api.app import resolve

        return resolve(event, context)
    from evidence.api import runtime
    from evidence.assess import S3Store, retrieve_step

    return retrieve_step(runtime.get_service(), event, S3Store()).model_dump(mode="json")


_handler = lambda_handler("retriever", _handle, correlation_id_path="requestContext.requestId")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    result: dict[str, Any] = _handler(event, context)
    return result
