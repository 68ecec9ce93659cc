"""Indexer: SQS messages carrying S3 ObjectCreated/ObjectRemoved notifications.

Answers with a partial batch response: only the failed messages go back to the queue
(and to its DLQ after the redrive policy's retries). Conventions: `evidence.api.indexer`.
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from evidence.api.indexer import process_batch  # at the first invocation: the import stays near-free

    return process_batch(event, context)


handler = lambda_handler("indexer", _handle)
