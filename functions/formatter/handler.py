"""Formatter: plain JSON in and out (a Step Functions task; also served as POST /v1/format).

`{hits, followups}` → `{evidence_xml, valid_indexes}`. A batch-chain task payload carrying
`retrieve_uri` is formatted from the stored retrieval and its result written next to it;
the task answers with a pointer (`{id, status, result_uri, hits}`).
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from pydantic import ValidationError

    from evidence.api import runtime

    service = runtime.get_service()
    if isinstance(event, dict) and (event.get("task") == "format" or "retrieve_uri" in event):
        from evidence.assess import S3Store, format_step

        return format_step(service, event, S3Store()).model_dump(mode="json", exclude_none=True)
    from evidence.api.errors import validation_error
    from evidence.model import FormatRequest

    try:
        request = FormatRequest.model_validate(event)
    except ValidationError as exc:
        raise validation_error(exc) from exc
    return service.format(request).model_dump(mode="json")


_handler = lambda_handler("formatter", _handle)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    result: dict[str, Any] = _handler(event, context)
    return result
