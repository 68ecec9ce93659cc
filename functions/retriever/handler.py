"""Retriever: the HTTP API behind API Gateway (REST proxy), plus the batch chain's retrieve step.

An API Gateway event goes through the resolver (`evidence.api.app`); any other event is a
Step Functions task payload (`evidence.assess.CriterionTask`) whose evidence is written to
the result store and returned as a pointer.
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Imported at the first invocation: the module import stays near-free (cold start).
    from evidence.api import runtime

    # Before the first event is handled: the coach's model and index, outside any request budget.
    runtime.warm()
    if "httpMethod" in event:
        from evidence.api.app import resolve

        return resolve(event, context)
    from evidence.api.tasks import retrieve

    return retrieve(event)


handler = lambda_handler("retriever", _handle, correlation_id_path="requestContext.requestId")
