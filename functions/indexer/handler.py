"""Indexer: SQS messages carrying S3 ObjectCreated/ObjectRemoved notifications.

Answers with a partial batch response: only the failed messages go back to the queue
(and to its DLQ after the redrive policy's retries). Conventions: `evidence.api.indexer`.
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _process(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Imported at the first invocation: a handler module's import stays near-free (cold start).
    from evidence.api.indexer import process_batch

    return process_batch(event, context)


_handler = lambda_handler("indexer", _process)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    result: dict[str, Any] = _handler(event, context)
    return result
