"""S3 upload notifications (delivered by SQS) → index or delete documents.

Conventions (docs/api.md, "Uploading to S3"):

* document id: ``s3://<bucket>/<key>`` with the key URL-decoded (S3 sends it
  ``quote_plus``-encoded, ``/`` included).
* index: the key prefix ``indexes/<index>/...``, else the default index. Deliberately *not*
  object metadata: an ``ObjectRemoved`` notification carries no metadata and the object is
  gone, so only the key can say which index to delete from.
* ``kind: graph`` (``x-amz-meta-kind: graph``, or the key prefix ``graphs/``): the object is a
  knowledge-graph file, validated whole and indexed (or replaced) as one graph (docs/coach.md).
* ``type``: the object's user metadata ``x-amz-meta-type``, else the key-prefix convention
  (the key after ``indexes/<index>/``): ``followups/`` → ``followup_document``. Every other
  ``x-amz-meta-*`` entry becomes document metadata (``-`` → ``_``, so
  ``x-amz-meta-round-number: 2`` is ``round_number: 2``).
* idempotency: the document is re-read from S3 and indexed with its etag/version in the
  metadata; the service skips content whose hash it already holds, so a redelivered
  notification adds nothing. A create for an object that is gone by now, or a remove
  for an object that exists again, is stale and skipped: the later notification wins.
"""

from __future__ import annotations

import base64
import json
import posixpath
from dataclasses import dataclass
from email.header import decode_header, make_header
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from evidence.api import runtime
from evidence.errors import (
    BadRequestError,
    EvidenceError,
    NotFoundError,
    PayloadTooLargeError,
    UpstreamError,
)
from evidence.model import IndexDocumentRequest
from evidence.names import validate_index_name
from evidence.observability import add_metric, get_logger, record_indexed

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

DEFAULT_INDEX = "documents"
INDEX_PREFIX = "indexes/"
#: Key prefix (after any ``indexes/<index>/``) → document ``type``.
PREFIX_TYPES: dict[str, str] = {"followups/": "followup_document"}
#: Key prefix → ``kind``: objects under ``graphs/`` are knowledge-graph files (docs/coach.md).
PREFIX_KINDS: dict[str, str] = {"graphs/": "graph"}
_INT_METADATA = {"round_number"}


class NotificationError(BadRequestError):
    """An SQS message that is not an S3 event notification we can act on."""

    code = "bad_notification"


@dataclass(frozen=True, slots=True)
class S3Change:
    event_name: str
    bucket: str
    key: str
    size: int | None = None
    etag: str | None = None
    version_id: str | None = None

    @property
    def removed(self) -> bool:
        # Lifecycle expirations delete objects without an ObjectRemoved event.
        return self.event_name.startswith(("ObjectRemoved", "LifecycleExpiration"))

    @property
    def created(self) -> bool:
        return self.event_name.startswith("ObjectCreated")

    @property
    def document_id(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def default_index() -> str:
    return runtime.settings().default_index or DEFAULT_INDEX


def parse_notification(body: str) -> list[S3Change]:
    """The S3 changes in one SQS message body; [] for ``s3:TestEvent``."""
    try:
        message = json.loads(body)
    except (TypeError, ValueError) as exc:
        raise NotificationError("message body is not JSON") from exc
    if isinstance(message, dict) and message.get("Type") == "Notification" and "Message" in message:
        return parse_notification(str(message["Message"]))  # S3 → SNS → SQS
    if not isinstance(message, dict):
        raise NotificationError("message body is not a JSON object")
    if message.get("Event") == "s3:TestEvent":
        return []
    records = message.get("Records")
    if not isinstance(records, list):
        raise NotificationError("message has no 'Records' list", field="Records")
    changes = []
    for record in records:
        try:
            if record.get("eventSource") != "aws:s3":
                raise NotificationError(f"not an S3 record: {record.get('eventSource')!r}")
            obj = record["s3"]["object"]
            changes.append(
                S3Change(
                    event_name=str(record["eventName"]),
                    bucket=str(record["s3"]["bucket"]["name"]),
                    key=unquote_plus(str(obj["key"])),
                    size=int(obj["size"]) if obj.get("size") is not None else None,
                    etag=obj.get("eTag"),
                    version_id=obj.get("versionId") or None,
                )
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise NotificationError(f"malformed S3 record: {exc!r}") from exc
    return changes


def _decode_meta(value: str) -> str:
    # SDKs send non-ASCII user metadata RFC 2047-encoded (=?UTF-8?B?...?=).
    if value.startswith("=?"):
        try:
            return str(make_header(decode_header(value)))
        except (ValueError, LookupError):
            return value
    return value


def target(key: str, user_metadata: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """(index, metadata) for an object key and its user metadata."""
    index, rest = default_index(), key
    if key.startswith(INDEX_PREFIX):
        name, sep, remainder = key[len(INDEX_PREFIX) :].partition("/")
        if not sep:
            raise NotificationError(f"key {key!r} has no object name after indexes/<index>/", field="key")
        try:
            index = validate_index_name(name)
        except ValueError as exc:
            raise NotificationError(f"key {key!r}: {exc}", field="key") from exc
        rest = remainder
    metadata: dict[str, Any] = {}
    for raw_name, raw_value in (user_metadata or {}).items():
        name = raw_name.lower().replace("-", "_")
        value: Any = _decode_meta(raw_value)
        if name in _INT_METADATA and value.strip().isdigit():
            value = int(value)
        metadata[name] = value
    if "type" not in metadata:
        for prefix, doc_type in PREFIX_TYPES.items():
            if rest.startswith(prefix):
                metadata["type"] = doc_type
                break
    if "kind" not in metadata:
        for prefix, kind in PREFIX_KINDS.items():
            if rest.startswith(prefix):
                metadata["kind"] = kind
                break
    metadata.pop("index", None)
    return index, metadata


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _missing(exc: Exception) -> bool:
    return _error_code(exc) in {"NoSuchKey", "404", "NotFound", "NoSuchVersion"}


def apply_change(change: S3Change) -> str:
    """Index or delete one object; returns what happened (for logs and tests)."""
    logger = get_logger()
    s3 = runtime.get_s3_client()
    index, _ = target(change.key)
    # Before S3 is read or the store touched: a key outside its prefix's grant fails alone.
    runtime.get_authorizer().check_upload(change.key, index)
    if change.removed:
        try:
            s3.head_object(Bucket=change.bucket, Key=change.key)
        except Exception as exc:
            if not _missing(exc):
                raise UpstreamError(f"s3 head_object {change.document_id}: {exc}") from exc
        else:
            logger.info(
                "object exists again; stale remove skipped", extra={"document_id": change.document_id}
            )
            return "skipped"
        try:
            deleted = runtime.get_service().delete_document(index, change.document_id)
        except NotFoundError:
            return "absent"
        add_metric("documents_deleted", 1)
        logger.info(
            "document deleted",
            extra={"document_id": change.document_id, "index": index, "chunks": deleted.deleted_chunks},
        )
        return "deleted"

    if not change.created:
        return "ignored"  # restore, tagging, ACL, replication...: the content did not change
    if change.key.endswith("/") and not change.size:
        return "skipped"  # a console "folder"
    limit = runtime.settings().max_document_bytes
    if change.size is not None and change.size > limit:
        raise PayloadTooLargeError(f"{change.document_id} is {change.size} bytes; the limit is {limit}")
    try:
        obj = s3.get_object(Bucket=change.bucket, Key=change.key)
    except Exception as exc:
        if _missing(exc):
            logger.info("object gone; stale create skipped", extra={"document_id": change.document_id})
            return "skipped"
        raise UpstreamError(f"s3 get_object {change.document_id}: {exc}") from exc
    length = int(obj.get("ContentLength") or 0)
    if length > limit:
        obj["Body"].close()
        raise PayloadTooLargeError(f"{change.document_id} is {length} bytes; the limit is {limit}")
    data: bytes = obj["Body"].read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLargeError(f"{change.document_id} exceeds {limit} bytes")
    index, metadata = target(change.key, obj.get("Metadata") or {})
    etag = (obj.get("ETag") or change.etag or "").strip('"')
    if etag:
        metadata["s3_etag"] = etag
    version = obj.get("VersionId") or change.version_id
    if version and version != "null":
        metadata["s3_version_id"] = version
    content_type = obj.get("ContentType")
    request = IndexDocumentRequest(
        document_id=change.document_id,
        filename=posixpath.basename(change.key) or change.key,
        content_base64=base64.b64encode(data).decode("ascii"),
        content_type=content_type if content_type and content_type != "binary/octet-stream" else None,
        metadata=metadata,
    )
    response = runtime.get_service().index_document(index, request)
    record_indexed(response)
    logger.info(
        "document indexed",
        extra={
            "document_id": change.document_id,
            "index": index,
            "status": response.status,
            "chunks": response.chunks,
        },
    )
    return response.status


def handle_record(record: SQSRecord) -> list[str]:
    """One SQS message: every S3 change in it, or a typed failure of this message only."""
    get_logger().append_keys(message_id=record.message_id)
    try:
        return [apply_change(change) for change in parse_notification(record.body)]
    except EvidenceError as exc:
        add_metric("index_failures", 1)
        get_logger().warning(
            "record failed",
            extra={"message_id": record.message_id, "error_code": exc.code, "error": exc.message},
        )
        raise
    except Exception:
        add_metric("index_failures", 1)
        get_logger().exception("record failed unexpectedly", extra={"message_id": record.message_id})
        raise


def process_batch(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """SQS batch → partial batch response (`batchItemFailures`)."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    # A batch where every record failed still answers with the list instead of raising:
    # SQS retries exactly the same messages either way, and the response stays inspectable.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(
        process_partial_response(
            event=event, record_handler=handle_record, processor=processor, context=context
        )
    )
