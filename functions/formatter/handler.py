"""Formatter: plain JSON in and out (a Step Functions task; also served as POST /v1/format).

`{hits, followups}` → `{evidence_xml, valid_indexes}`. A batch-chain task payload carrying
`retrieve_uri` is formatted from the stored retrieval and its result written next to it;
the task answers with a pointer (`{id, status, result_uri, hits}`).
"""

from __future__ import annotations

from typing import Any

from evidence.observability import lambda_handler


def _handle(event: Any, context: Any) -> dict[str, Any]:
    from evidence.api.tasks import format_evidence  # at the first invocation: the import stays near-free

    return format_evidence(event)


handler = lambda_handler("formatter", _handle)
