"""Custom resource `Custom::EvidenceSearchSetup`: prepares the search engine after it is created.

On Create/Update, through the adapter (`evidence.search.opensearch.OpenSearchBackend`):
1. (domain only) fine-grained access control: an `evidence_writer` and an `evidence_reader` role and
   their mappings to the functions' IAM roles (this function's role is the domain's master user),
   and the security plugin's audit log switched on (the domain publishes it to CloudWatch Logs);
2. the composable index template (the adapter's mappings, for indexes created by any writer);
3. (server-side hybrid only) the search pipeline the hybrid queries run through;
4. (domain only, `AutoCreateIndex`) the cluster setting `action.auto_create_index`, so that no
   write creates an evidence index implicitly (docs/opensearch.md#no-implicit-index-creation).
Delete does nothing: indexes, templates and pipelines outlive a stack update or removal (RETAIN).

The service token is this function itself (no provider framework), so it answers CloudFormation
on the pre-signed ResponseURL — always, even when setup fails, or the stack would wait an hour.
Runs in the shared layer; the handler is `search_setup.on_event`.
"""

from __future__ import annotations

import json
import logging
import string
import time
import urllib.request
from typing import Any

logger = logging.getLogger("evidence.search_setup")
logger.setLevel(logging.INFO)

TEMPLATE_NAME = "evidence"
#: Index names match ^[a-z0-9][a-z0-9_-]{0,63}$ (evidence.names): one pattern per first character
#: covers every evidence index and never a dot-prefixed system index.
INDEX_PATTERNS = [f"{c}*" for c in string.ascii_lowercase + string.digits]
WRITER_ROLE = "evidence_writer"
READER_ROLE = "evidence_reader"
#: The adapter (re)puts its pipeline once per process and reads the cluster version: both roles need it.
_CLUSTER_COMMON = [
    "cluster_monitor",
    "cluster:admin/search/pipeline/get",
    "cluster:admin/search/pipeline/put",
]
#: The security plugin's audit log (published to CloudWatch Logs by the domain, but off until this
#: is set): REST requests, no request bodies (they hold customer documents), no transport noise.
AUDIT_CONFIG: dict[str, Any] = {
    "enabled": True,
    "audit": {
        "enable_rest": True,
        "enable_transport": False,
        "disabled_rest_categories": ["GRANTED_PRIVILEGES", "AUTHENTICATED"],
        "disabled_transport_categories": ["GRANTED_PRIVILEGES", "AUTHENTICATED"],
        "ignore_users": [],
        "ignore_requests": [],
        "log_request_body": False,
        "resolve_indices": True,
        "resolve_bulk_requests": False,
        "exclude_sensitive_headers": True,
    },
    "compliance": {
        "enabled": True,
        "internal_config": True,
        "external_config": False,
        "read_metadata_only": True,
        "write_metadata_only": True,
        "write_log_diffs": False,
        "read_watched_fields": {},
        "read_ignore_users": [],
        "write_watched_indices": [],
        "write_ignore_users": [],
    },
}
RETRY_UNTIL_REMAINING_MS = 45_000
RETRY_SLEEP_S = 10.0


def role_bodies(writers: list[str], readers: list[str]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Security-plugin role definitions and their backend-role mappings, by role name."""
    return {
        WRITER_ROLE: (
            {
                "cluster_permissions": [
                    "cluster_composite_ops",
                    *_CLUSTER_COMMON,
                    "indices:admin/template/get",
                    "indices:admin/index_template/get",
                ],
                "index_permissions": [
                    {
                        "index_patterns": INDEX_PATTERNS,
                        "allowed_actions": ["crud", "create_index", "manage", "indices:admin/mapping/put"],
                    }
                ],
            },
            {"backend_roles": writers},
        ),
        READER_ROLE: (
            {
                "cluster_permissions": ["cluster_composite_ops_ro", *_CLUSTER_COMMON],
                # `read` covers searches and counts; dense/hybrid also GET the index (its _meta:
                # embedder, dimension, k-NN engine) before the first query.
                "index_permissions": [
                    {
                        "index_patterns": INDEX_PATTERNS,
                        "allowed_actions": ["read", "indices:admin/get", "indices:admin/mappings/get"],
                    }
                ],
            },
            {"backend_roles": readers},
        ),
    }


def setup(props: dict[str, Any]) -> dict[str, str]:
    """Idempotent: every PUT replaces what it names."""
    from evidence.config import Settings
    from evidence.embed.minilm import MODEL_ID
    from evidence.search.opensearch import OpenSearchBackend

    service = str(props["Service"])
    # The template carries the BM25 parameters the functions are configured with.
    bm25: dict[str, Any] = {
        key: float(props[prop]) for key, prop in (("bm25_k1", "Bm25K1"), ("bm25_b", "Bm25B")) if prop in props
    }
    settings = Settings(
        backend="opensearch",
        opensearch_endpoint=str(props["Endpoint"]),
        opensearch_service=service,
        aws_region=str(props["Region"]),
        opensearch_hybrid_mode=str(props.get("HybridMode", "server")),
        **bm25,
    )
    backend = OpenSearchBackend(settings)
    out: dict[str, str] = {"Template": TEMPLATE_NAME}
    if service == "es":
        writers = [str(a) for a in props.get("WriterRoles", [])]
        readers = [str(a) for a in props.get("ReaderRoles", [])]
        for name, (role, mapping) in role_bodies(writers, readers).items():
            if not mapping["backend_roles"]:
                continue
            backend.client.transport.perform_request(
                "PUT", f"/_plugins/_security/api/roles/{name}", body=role
            )
            backend.client.transport.perform_request(
                "PUT", f"/_plugins/_security/api/rolesmapping/{name}", body=mapping
            )
        out["Roles"] = ",".join(role_bodies(writers, readers))
        backend.client.transport.perform_request(
            "PUT", "/_plugins/_security/api/audit/config", body=AUDIT_CONFIG
        )
        out["AuditLog"] = "enabled"
    backend.put_index_template(
        TEMPLATE_NAME,
        INDEX_PATTERNS,
        embedder_id=str(props.get("EmbedderId", MODEL_ID)),
        dimension=int(props.get("Dimension", 384)),
    )
    if settings.opensearch_hybrid_mode.value == "server":
        pipeline, fusion = backend.ensure_search_pipeline()
        out["Pipeline"] = pipeline
        out["Fusion"] = fusion
    if service == "es" and props.get("AutoCreateIndex"):
        # A property, not a constant of this handler: changing it updates the resource, so an
        # existing stack gets the setting on its next deploy.
        backend.refuse_implicit_index_creation(str(props["AutoCreateIndex"]))
        out["AutoCreateIndex"] = str(props["AutoCreateIndex"])
    return out


def _respond(
    event: dict[str, Any], context: Any, *, status: str, reason: str, physical_id: str, data: dict[str, str]
) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason or f"see CloudWatch Logs: {getattr(context, 'log_stream_name', '?')}",
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": data,
        }
    ).encode()
    # The pre-signed URL is signed for an empty content type.
    request = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        logger.info("responded %s: HTTP %s", status, response.status)


def on_event(event: dict[str, Any], context: Any) -> None:
    request_type = event.get("RequestType")
    props = dict(event.get("ResourceProperties") or {})
    physical_id = event.get("PhysicalResourceId") or f"evidence-search-setup:{props.get('Endpoint', '')}"
    status, reason, data = "SUCCESS", "", {}
    try:
        if request_type in {"Create", "Update"}:
            while True:
                try:
                    data = setup(props)
                    break
                except Exception as exc:  # a new domain can refuse connections for a few minutes
                    remaining = context.get_remaining_time_in_millis() if context is not None else 0
                    if remaining < RETRY_UNTIL_REMAINING_MS:
                        raise
                    logger.warning("setup failed (%s); retrying in %.0f s", exc, RETRY_SLEEP_S)
                    time.sleep(RETRY_SLEEP_S)
    except Exception as exc:
        logger.exception("search setup failed")
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"[:900]
    finally:
        _respond(event, context, status=status, reason=reason, physical_id=physical_id, data=data)
