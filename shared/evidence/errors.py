"""Typed errors. Each carries the HTTP status and error code it maps to.

They are translated in two places only: `evidence.api.errors` maps them to the HTTP
error envelope (the API Lambda and `evidence serve` share it) and the CLI maps them to exit
codes; Step Functions tasks let them propagate so a state machine can catch them by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Self


class EvidenceError(Exception):
    """Base of every error the service raises on purpose."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class BadRequestError(EvidenceError):
    status = 400
    code = "bad_request"


class RequestValidationError(EvidenceError):
    """A field is present but out of range or of the wrong shape."""

    status = 422
    code = "validation_error"


class NotFoundError(EvidenceError):
    status = 404
    code = "not_found"


class IndexNotFoundError(NotFoundError):
    code = "index_not_found"

    def __init__(self, index: str, message: str | None = None) -> None:
        super().__init__(
            message or f"index {index!r} does not exist; index a document into it first", field="index"
        )
        self.index = index


class DocumentNotFoundError(NotFoundError):
    code = "document_not_found"


class MethodNotAllowedError(EvidenceError):
    """A known path asked with a method it does not serve; `allow` goes out as the Allow header."""

    status = 405
    code = "method_not_allowed"

    def __init__(self, method: str, path: str, allow: Sequence[str]) -> None:
        super().__init__(f"{method} is not allowed on {path}; allowed: {', '.join(allow)}", field="method")
        self.allow = tuple(allow)


class PayloadTooLargeError(EvidenceError):
    status = 413
    code = "payload_too_large"


class DocumentParseError(EvidenceError):
    """A document could not be parsed; names the file and the reason."""

    status = 422
    code = "unparseable_document"

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}", field="content")
        self.source = source
        self.reason = reason


class EmbedderMismatchError(EvidenceError):
    """A query or a migration uses another embedder than the one the index was built with."""

    status = 409
    code = "embedder_mismatch"


class IndexSettingsMismatchError(EvidenceError):
    """A copy (`evidence migrate`) or a write into an index of either store (`evidence index`, a
    document post, the indexer Lambda) would mix documents written under other indexing settings
    (header rule, span vectors, embedding window, long-text rule, embedder, cache scope:
    `search.written`) than the index holds or the running process uses; `field` names the
    setting. Nothing was written."""

    status = 409
    code = "index_settings_mismatch"


class ConfigurationError(EvidenceError):
    status = 500
    code = "configuration_error"


class BackendError(EvidenceError):
    """The search backend failed for a reason that is not the caller's fault."""

    status = 502
    code = "backend_error"


class ServiceUnavailableError(BackendError):
    """The backend is overloaded or slow (429, 503, timeouts) and retrying did not help in time.

    The API answers 503 with `Retry-After: retry_after_s`; callers may simply try again later.
    """

    status = 503
    code = "service_unavailable"

    def __init__(self, message: str, *, retry_after_s: int = 1, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after_s = max(1, int(retry_after_s))


class DeadlineExceededError(ServiceUnavailableError):
    """The request's deadline (EVIDENCE_REQUEST_DEADLINE_S) passed before its work was done:
    nothing was written. Vectors already computed are cached, so sending it again goes further."""

    code = "deadline_exceeded"


class TooManyRequestsError(EvidenceError):
    """One caller has queued as much as it may (batches, background uploads): 429 + Retry-After."""

    status = 429
    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after_s: int = 5, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after_s = max(1, int(retry_after_s))


class StorageFullError(BackendError):
    """The embedded store's disk is full (or a file-size limit was hit): nothing was written.

    The write that failed is rolled back (SQLite) or left in the journal that the next write
    replays (the inverted index), so the store stays consistent and a re-run after freeing
    space converges.
    """

    status = 507
    code = "storage_full"


class UpstreamError(EvidenceError):
    """A remote model (reranker, LLM, embedder) failed; callers usually degrade instead."""

    status = 502
    code = "upstream_error"


class ChoiceEnum(StrEnum):
    """A mode enum whose parse error names the field and lists the valid values (docs/contracts.md#errors)."""

    __field__ = "value"

    @classmethod
    def parse(cls, value: str) -> Self:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise RequestValidationError(
                f"unknown {cls.__field__} {value!r}; valid: {valid}", field=cls.__field__
            ) from None
