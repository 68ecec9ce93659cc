"""Transport and retries: the client (built on first use), deadlines, and `_call`, through which
every request goes: 429, 5xx and connection errors are retried with backoff while the deadline
allows; a read timeout on a query is not. Failures become typed errors (`_translate`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

from evidence.config import Settings
from evidence.errors import (
    BackendError,
    ConfigurationError,
    IndexNotFoundError,
    RequestValidationError,
    ServiceUnavailableError,
)
from evidence.retry import (
    Backoff,
    Deadline,
    RetriesExhausted,
    Retry,
    call_with_retries,
    current_deadline,
)
from evidence.search import opensearch_bodies as bodies
from evidence.search import opensearch_responses as responses
from evidence.search.base import IndexInfo
from evidence.search.opensearch.serverless import _sigv4_auth, service_for

logger = logging.getLogger(__name__)

T = TypeVar("T")

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: Bulk requests stay well under every managed cluster's http.max_content_length (10 MB on the
#: smallest Amazon OpenSearch Service instances) and Serverless's request limit.
DEFAULT_BULK_BYTES = 5 * 1024 * 1024
DEFAULT_BULK_DOCS = 500

Fusion = Literal["rrf", "normalization"]


def build_client(settings: Settings) -> Any:
    """An opensearch-py client for `settings` (imported lazily: cold starts do not pay for it)."""
    from opensearchpy import OpenSearch, RequestsHttpConnection

    endpoint = settings.opensearch_endpoint
    if not endpoint:
        raise ConfigurationError(
            "the OpenSearch backend needs an endpoint: set EVIDENCE_OPENSEARCH_ENDPOINT "
            "(e.g. https://search-xyz.eu-west-1.es.amazonaws.com)"
        )
    url = endpoint if "://" in endpoint else f"https://{endpoint}"
    parsed = urlparse(url)
    host = parsed.hostname or ""
    service = service_for(settings)
    kwargs: dict[str, Any] = {
        "hosts": [url],
        "timeout": settings.opensearch_timeout_s,
        # Retries are ours (`OpenSearchBackend._call`), with backoff; the transport's are immediate.
        "max_retries": 0,
        "retry_on_timeout": False,
        "http_compress": True,
    }
    if parsed.scheme == "https":
        kwargs["use_ssl"] = True
        kwargs["verify_certs"] = settings.opensearch_verify_certs
    if settings.opensearch_username:
        password = settings.opensearch_password.get_secret_value() if settings.opensearch_password else ""
        kwargs["http_auth"] = (settings.opensearch_username, password)
    elif service == "aoss" or host.endswith(".amazonaws.com"):
        kwargs["http_auth"] = _sigv4_auth(settings, host, service)
        kwargs["connection_class"] = RequestsHttpConnection
        kwargs["pool_maxsize"] = 20
    return OpenSearch(**kwargs)


class Transport:
    """The connection half of `OpenSearchBackend`: the client, its state, and every call's retries."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any | None = None,
        refresh: bool = True,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        bulk_bytes: int = DEFAULT_BULK_BYTES,
        bulk_docs: int = DEFAULT_BULK_DOCS,
        fusion: Fusion | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings or Settings(backend="opensearch")
        self._client = client
        self._client_lock = threading.Lock()
        self.service = service_for(self.settings)
        self.serverless = self.service == "aoss"
        # Serverless rejects `refresh` (it refreshes on its own schedule, ~1 s to 10 s).
        self._refresh: str | None = "wait_for" if refresh and not self.serverless else None
        self.max_retries = max_retries
        self.backoff = Backoff(retries=max_retries, base_s=backoff_s, max_s=max_backoff_s)
        self.bulk_bytes = bulk_bytes
        self.bulk_docs = bulk_docs
        self._fusion = fusion
        self._sleep = sleep
        self._infos: dict[str, IndexInfo] = {}
        #: Indexes whose recorded indexing settings agree with ours (`IndexAdmin._refuse_other_settings`).
        self._settings_checked: set[str] = set()
        self._pipelines_ready: set[str] = set()
        self._caps: bodies.Capabilities | None = None

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """Built once, on first use (never at import, never per call)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = build_client(self.settings)
        return self._client

    def _deadline(self) -> Deadline:
        """The request's deadline; outside one (CLI, indexer), `request_deadline_s` per call."""
        return current_deadline() or Deadline.after(self.settings.request_deadline_s)

    def _retry_after_s(self) -> int:
        """What to tell a caller to wait: the longest backoff we would have waited ourselves."""
        return max(1, math.ceil(self.backoff.delay(self.backoff.retries, rng=lambda: 1.0)))

    def _call(
        self,
        what: str,
        fn: Callable[[float], T],
        *,
        index: str | None = None,
        retry_timeouts: bool = True,
        deadline: Deadline | None = None,
    ) -> T:
        """`fn(timeout_s)` with retries. Queries pass `retry_timeouts=False`: a read that took
        the whole timeout would take it again, and the caller's budget is already spent."""
        from opensearchpy import exceptions as os_exc

        limit = deadline or self._deadline()

        def classify(exc: Exception) -> Retry | None:
            if isinstance(exc, os_exc.ConnectionTimeout):
                return Retry() if retry_timeouts else None
            if isinstance(exc, os_exc.ConnectionError):
                return Retry()
            if isinstance(exc, os_exc.TransportError) and exc.status_code in _RETRY_STATUS:
                return Retry()
            return None

        def log_retry(exc: Exception, attempt: int, delay: float) -> None:
            logger.warning("opensearch %s failed (%s); retry %d in %.2fs", what, exc, attempt, delay)

        try:
            return call_with_retries(
                lambda _attempt: fn(limit.clamp(self.settings.opensearch_timeout_s)),
                backoff=self.backoff,
                classify=classify,
                deadline=limit,
                sleep=self._sleep,
                on_retry=log_retry,
            )
        except RetriesExhausted as exc:
            raise self._unavailable(what, exc.cause, exc.retry_after_s, exc.deadline_reached) from exc.cause
        except os_exc.ConnectionTimeout as exc:
            raise self._unavailable(what, exc, self._retry_after_s(), False) from exc
        except (os_exc.ConnectionError, os_exc.TransportError) as exc:
            raise self._translate(what, exc, index) from exc

    def _unavailable(
        self, what: str, cause: BaseException, retry_after_s: int, deadline_reached: bool
    ) -> ServiceUnavailableError:
        from opensearchpy import exceptions as os_exc

        why = "the request's deadline would pass" if deadline_reached else "retries are used up"
        status = getattr(cause, "status_code", None)
        detail = f"HTTP {status}" if isinstance(status, int) else type(cause).__name__
        if isinstance(cause, os_exc.ConnectionTimeout):
            why = f"no answer within {self.settings.opensearch_timeout_s:g}s; a query is not retried"
        elif isinstance(cause, os_exc.ConnectionError):
            detail = f"cannot reach OpenSearch at {self.settings.opensearch_endpoint}"
        return ServiceUnavailableError(
            f"OpenSearch is unavailable for {what} ({detail}; {why}); retry in {retry_after_s}s",
            retry_after_s=retry_after_s,
        )

    def _translate(self, what: str, exc: Exception, index: str | None) -> Exception:
        from opensearchpy import exceptions as os_exc

        error = getattr(exc, "error", "")
        info = getattr(exc, "info", None)
        reason = _reason(info) or str(error) or str(exc)
        if (
            isinstance(exc, os_exc.NotFoundError)
            and index is not None
            and ("index_not_found" in str(error) or "no such index" in reason)
        ):
            self._forget(index)
            return IndexNotFoundError(index)
        if "too_many" in reason and "clauses" in reason:
            # One clause per analysed word: a question within MAX_QUERY_CHARS can still pass the
            # cluster's indices.query.bool.max_clause_count. The caller can fix it; a 502 says the
            # service is broken, which it is not.
            return RequestValidationError(
                "the question has more words than the OpenSearch cluster allows in one query "
                f"({reason}): shorten the question, or raise the cluster's "
                "indices.query.bool.max_clause_count",
                field="query",
            )
        if isinstance(exc, os_exc.AuthenticationException | os_exc.AuthorizationException):
            return BackendError(
                f"OpenSearch refused the {what} request ({exc.status_code}): {reason}. Check the "
                "credentials; for SigV4 check EVIDENCE_AWS_REGION, EVIDENCE_OPENSEARCH_SERVICE (es|aoss) "
                "and the domain's access policy (or the collection's data access policy)"
            )
        if isinstance(exc, os_exc.ConnectionError):
            return BackendError(
                f"cannot reach OpenSearch at {self.settings.opensearch_endpoint} for {what}: {reason}"
            )
        status = getattr(exc, "status_code", "?")
        return BackendError(f"OpenSearch {what} failed ({status} {error}): {reason}")

    def _forget(self, index: str) -> None:
        """Drop what this backend cached about `index` (its info, its settings check): the index
        is gone (another process deleted it), so a write must not trust a read made before. The
        next use reads the index again: absent, a 404; created again, its own record."""
        self._infos.pop(index, None)
        self._settings_checked.discard(index)

    def _index_name(self, index: str) -> str:
        return bodies.validate_opensearch_index_name(index)

    def _search(self, what: str, index: str, body: Mapping[str, Any], **params: Any) -> Mapping[str, Any]:
        name = self._index_name(index)
        result: Mapping[str, Any] = self._call(
            what,
            lambda t: self.client.search(index=name, body=body, request_timeout=t, **params),
            index=name,
            retry_timeouts=False,
        )
        return result

    def _msearch(self, what: str, index: str, lines: list[dict[str, Any]]) -> Mapping[str, Any]:
        """One `_msearch` on `index`. A search that failed inside it is raised as the client
        raises a failed `_search`, so it is retried and translated like any other call."""
        from opensearchpy import exceptions as os_exc

        name = self._index_name(index)

        def send(timeout: float) -> Mapping[str, Any]:
            response: Mapping[str, Any] = self.client.msearch(body=lines, index=name, request_timeout=timeout)
            failed = responses.msearch_failure(response)
            if failed is not None:
                status, kind, info = failed
                raise os_exc.HTTP_EXCEPTIONS.get(status, os_exc.TransportError)(status, kind, info)
            return response

        return self._call(what, send, index=name, retry_timeouts=False)

    # --- versions ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._client is not None:
            close = getattr(self._client, "close", None)
            if callable(close):
                close()
            self._client = None


def _reason(info: Any) -> str:
    if isinstance(info, Mapping):
        err = info.get("error")
        if isinstance(err, Mapping):
            root = err.get("root_cause") or []
            first = root[0] if root and isinstance(root[0], Mapping) else err
            return f"{first.get('type', err.get('type'))}: {first.get('reason', err.get('reason'))}"
        if err:
            return str(err)
    return ""
