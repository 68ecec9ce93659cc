"""OpenSearch adapter behind the SearchBackend port (Amazon OpenSearch Service, Serverless, self-managed).

- Auth: basic auth when a username is configured, SigV4 (`AWSV4SignerAuth`, service `es` or
  `aoss`, credentials from boto3) for AWS endpoints, none for a local/loopback cluster. The
  service comes from EVIDENCE_OPENSEARCH_SERVICE, else from the endpoint (`*.aoss.amazonaws.com`).
- Every call has a deadline (`evidence.retry`: the request's, else `request_deadline_s`) and
  goes through `_call`: 429, 5xx and connection errors are retried with backoff while the
  deadline allows; a read timeout on a query is not (the budget is spent). Giving up on a
  transient failure is `ServiceUnavailableError` (503, Retry-After); everything else becomes a
  typed error (IndexNotFoundError, BackendError with the server's reason, EmbedderMismatchError).
- Writes (docs/opensearch.md, "Writes"): one bulk request per chunk of actions, each result
  attributed to its action by position within its own request (and checked by `_id`), only
  unacknowledged actions resent, a document's marker written only once all its chunks are
  acknowledged and its stale rows removed.
- opensearch-py and boto3 are imported inside functions; the client is built on first use.
- Request bodies come from `opensearch_bodies` (validated against the official API spec in
  tests, per supported version); this module only sequences calls.

Scores: `lexical` returns OpenSearch's BM25 `_score` unchanged; `dense` converts the
`cosinesimil` score back to cos in [-1, 1] (`opensearch_bodies.cosine_from_score`); `hybrid`
(server mode) returns the search pipeline's fused score, with per-leg scores attached when
`explain=True`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

import numpy as np

from evidence.config import HybridMode, Settings
from evidence.errors import (
    BackendError,
    ConfigurationError,
    EmbedderMismatchError,
    IndexNotFoundError,
    RequestValidationError,
    ServiceUnavailableError,
)
from evidence.records import ChunkKind, DocumentChunks, SearchHit
from evidence.retry import (
    Backoff,
    Deadline,
    RetriesExhausted,
    Retry,
    call_with_retries,
    current_deadline,
)
from evidence.search import opensearch_bodies as bodies
from evidence.search.base import DocumentInfo, Filters, HybridResult, IndexInfo, UpsertResult, Vector

logger = logging.getLogger(__name__)

T = TypeVar("T")

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: Bulk requests stay well under every managed cluster's http.max_content_length (10 MB on the
#: smallest Amazon OpenSearch Service instances) and Serverless's request limit.
DEFAULT_BULK_BYTES = 5 * 1024 * 1024
DEFAULT_BULK_DOCS = 500
_MAX_RESULT_WINDOW = bodies.MAX_RESULT_WINDOW
_LOOKUP_PAGE = 1_000

Fusion = Literal["rrf", "normalization"]


@dataclass(frozen=True, slots=True)
class _Item:
    """One bulk action and the document it belongs to (results are attributed to it)."""

    owner: str
    action: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Failure:
    reason: str
    #: 429/5xx/timeouts: the document is retried by the next upsert and the API says 503.
    transient: bool


class _BulkIncomplete(Exception):
    """Some actions were neither acknowledged nor refused for good: another round resends them."""

    def __init__(self, pending: int, last: str) -> None:
        super().__init__(f"{pending} bulk action(s) not acknowledged; last: {last}")


@dataclass(frozen=True, slots=True)
class _Marker:
    document_hash: str
    generation: str


def _version_tuple(number: str) -> tuple[int, ...]:
    return bodies.parse_version(number)


def service_for(settings: Settings) -> str:
    """`es` or `aoss`: explicit setting first, else the endpoint's host decides."""
    if settings.opensearch_service:
        return settings.opensearch_service
    endpoint = settings.opensearch_endpoint or ""
    host = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}").hostname or ""
    return "aoss" if host.endswith(".aoss.amazonaws.com") else "es"


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


def _sigv4_auth(settings: Settings, host: str, service: str) -> Any:
    import boto3
    from opensearchpy import AWSV4SignerAuth

    session = boto3.Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise ConfigurationError(
            "SigV4 signing needs AWS credentials (environment, profile or role); none were found"
        )
    region = settings.aws_region or session.region_name or _region_from_host(host)
    if not region:
        raise ConfigurationError("SigV4 signing needs a region: set EVIDENCE_AWS_REGION")
    return AWSV4SignerAuth(credentials, region, service)


def _region_from_host(host: str) -> str | None:
    # search-x.eu-west-1.es.amazonaws.com / x.us-east-1.aoss.amazonaws.com
    parts = host.split(".")
    for i, part in enumerate(parts):
        if part in {"es", "aoss"} and i > 0:
            return parts[i - 1]
    return None


class _BulkWriter:
    """One `OpenSearchBackend._bulk` call across its rounds: what is still pending, what failed
    for good, and the last refusal (for the message when the rounds run out)."""

    def __init__(
        self,
        backend: OpenSearchBackend,
        index: str,
        items: Sequence[_Item],
        *,
        idempotent: bool,
        deadline: Deadline | None,
    ) -> None:
        self.backend = backend
        self.index = index
        self.idempotent = idempotent
        self.deadline = deadline
        self.pending: list[_Item] = list(items)
        self.failures: dict[str, list[_Failure]] = {}
        self.last = ""
        self.timeout_s = backend.settings.opensearch_timeout_s
        self.params: dict[str, Any] = {"refresh": backend._refresh} if backend._refresh else {}

    def fail(self, item: _Item, reason: str, *, transient: bool) -> None:
        self.failures.setdefault(item.owner, []).append(_Failure(reason, transient))

    def send(self, request: list[_Item], timeout: float) -> list[tuple[bool, Mapping[str, Any]]]:
        from opensearchpy import helpers

        # One request per call (chunk_size = len): streaming_bulk's own 429 retries stay
        # off, because they move retried items to the end and break positional attribution.
        return list(
            helpers.streaming_bulk(
                self.backend.client,
                [dict(i.action) for i in request],
                chunk_size=len(request),
                max_chunk_bytes=2**62,
                raise_on_error=False,
                raise_on_exception=True,
                max_retries=0,
                request_timeout=timeout,
                **self.params,
            )
        )

    def round(self, _attempt: int) -> None:
        """Send what is pending; raise `_BulkIncomplete` when some of it must go again."""
        from opensearchpy import exceptions as os_exc

        resend: list[_Item] = []
        for request in self.backend._requests(self.pending):
            if self.deadline is not None and self.deadline.expired:
                resend.extend(request)
                continue
            timeout = self.deadline.clamp(self.timeout_s) if self.deadline else self.timeout_s
            try:
                results = self.send(request, timeout)
            except (os_exc.ConnectionError, os_exc.TransportError) as exc:
                resend.extend(self._request_failed(request, exc))
                continue
            resend.extend(self._item_results(request, results))
        self.pending = resend
        if self.pending:
            raise _BulkIncomplete(len(self.pending), self.last)

    def _request_failed(self, request: list[_Item], exc: Exception) -> list[_Item]:
        """A whole request failed: what to resend (429 always; a lost answer only when idempotent)."""
        from opensearchpy import exceptions as os_exc

        raw_status = getattr(exc, "status_code", None)
        status = raw_status if isinstance(raw_status, int) else None
        self.last = f"{type(exc).__name__} {status or ''}".strip()
        if status == 429:
            return request  # refused whole: nothing was applied
        if isinstance(exc, os_exc.ConnectionError) or status in _RETRY_STATUS:
            if self.idempotent:
                return request
            for item in request:
                self.fail(item, f"outcome unknown ({self.last}); not resent without ids", transient=True)
            return []
        reason = self.backend._translate("bulk", exc, self.index)
        for item in request:
            self.fail(item, str(reason), transient=False)
        return []

    def _item_results(
        self, request: list[_Item], results: list[tuple[bool, Mapping[str, Any]]]
    ) -> list[_Item]:
        """Per-item answers, attributed by position and checked by id: the per-item 429s to resend."""
        if len(results) != len(request):
            raise BackendError(
                f"bulk answered {len(results)} item(s) for {len(request)} action(s) into {self.index!r}"
            )
        resend: list[_Item] = []
        for item, (ok, result) in zip(request, results, strict=True):
            op_type, op = next(iter(result.items()))
            sent_id = item.action.get("_id")
            if sent_id is not None and op.get("_id") not in (None, sent_id):
                raise BackendError(
                    f"bulk item for {sent_id!r} came back as {op.get('_id')!r}: refusing to guess"
                )
            if ok or (op_type == "delete" and op.get("status") == 404):
                continue  # written, or (delete) already gone
            status = op.get("status")
            err = op.get("error") or {}
            detail = f"{err.get('type')}: {err.get('reason')}" if isinstance(err, Mapping) else str(err)
            if status == 429:
                self.last = detail
                resend.append(item)
            else:
                self.fail(item, f"{op.get('_id', '?')}: {detail}", transient=status in _RETRY_STATUS)
        return resend


class OpenSearchBackend:
    """SearchBackend on OpenSearch. Thread-safe for concurrent queries (the client is)."""

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
            return IndexNotFoundError(index)
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

    def _index_name(self, index: str) -> str:
        return bodies.validate_opensearch_index_name(index)

    def _info(self, index: str) -> IndexInfo:
        info = self._infos.get(index)
        if info is None:
            info = self._read_info(index, with_counts=False)
            self._infos[index] = info
        return info

    def _read_info(self, index: str, *, with_counts: bool) -> IndexInfo:
        name = self._index_name(index)
        response = self._call(
            "get index", lambda t: self.client.indices.get(index=name, request_timeout=t), index=name
        )
        meta = bodies.index_meta(response, name)
        if "embedder_id" not in meta:
            raise BackendError(
                f"index {name!r} exists but was not created by evidence (no embedder in its _meta)"
            )
        documents = chunks = 0
        if with_counts:
            documents = self._count(name, bodies.MARKER_KIND)
            chunks = self._count(name, bodies.CHUNK_KINDS)
        return IndexInfo(
            name=name,
            embedder_id=str(meta["embedder_id"]),
            dimension=int(meta.get("dimension") or 0),
            documents=documents,
            chunks=chunks,
            extra={
                "backend": "opensearch",
                "schema": meta.get("evidence_schema"),
                "engine": meta.get("engine") or "faiss",
                "has_generation": bool(meta.get("has_generation")),
            },
        )

    def _count(self, index: str, kind: str | Sequence[str]) -> int:
        body = bodies.count_body(kind)
        response = self._call(
            "count",
            lambda t: self.client.count(index=index, body=body, request_timeout=t),
            index=index,
            retry_timeouts=False,
        )
        return int(response.get("count", 0))

    def _search(self, what: str, index: str, body: Mapping[str, Any], **params: Any) -> Mapping[str, Any]:
        name = self._index_name(index)
        result: Mapping[str, Any] = self._call(
            what,
            lambda t: self.client.search(index=name, body=body, request_timeout=t, **params),
            index=name,
            retry_timeouts=False,
        )
        return result

    # --- versions ---------------------------------------------------------------------------

    def capabilities(self) -> bodies.Capabilities:
        """What the cluster accepts; refuses clusters older than `bodies.MIN_VERSION`."""
        if self._caps is None:
            if self.serverless:
                caps = bodies.Capabilities.serverless_collection()
            else:
                caps = bodies.Capabilities(version=self._detect_version())
                if caps.version < bodies.MIN_VERSION:
                    found = ".".join(map(str, caps.version))
                    oldest = ".".join(map(str, bodies.MIN_VERSION))
                    raise ConfigurationError(
                        f"OpenSearch {found} is older than the oldest supported version ({oldest}: the "
                        "hybrid query and the normalization-processor); upgrade the domain"
                    )
            self._caps = caps
        return self._caps

    def _detect_version(self) -> tuple[int, ...]:
        if self.settings.opensearch_version:
            return _version_tuple(self.settings.opensearch_version)
        info = self._call("info", lambda t: self.client.info(request_timeout=t))
        version = info.get("version") or {}
        number = str(version.get("number") or "0")
        if not number.startswith("7."):
            return _version_tuple(number)
        # `compatibility.override_main_response_version` makes GET / claim Elasticsearch 7.10.2;
        # the nodes API still tells the truth.
        nodes = self._call(
            "nodes info",
            lambda t: self.client.nodes.info(
                node_id="_local", filter_path="nodes.*.version", request_timeout=t
            ),
        )
        versions = [str(n.get("version")) for n in (nodes.get("nodes") or {}).values() if n.get("version")]
        if not versions:
            raise ConfigurationError(
                f"cannot tell the OpenSearch version (GET / says {number!r}, the nodes API says nothing); "
                "set EVIDENCE_OPENSEARCH_VERSION"
            )
        return min(_version_tuple(v) for v in versions)

    def cluster_version(self) -> tuple[int, ...]:
        """(0,) on Serverless, which reports none."""
        caps = self.capabilities()
        return (0,) if caps.serverless else caps.version

    # --- index lifecycle --------------------------------------------------------------------

    def create_index(self, index: str, *, embedder_id: str, dimension: int) -> IndexInfo:
        from opensearchpy import exceptions as os_exc

        name = self._index_name(index)
        if dimension < 0:
            raise RequestValidationError("dimension must be >= 0", field="dimension")
        exists = self._call(
            "index exists", lambda t: self.client.indices.exists(index=name, request_timeout=t), index=name
        )
        if not exists:
            body = bodies.create_index_body(
                embedder_id, dimension, self.capabilities(), k1=self.settings.bm25_k1, b=self.settings.bm25_b
            )
            try:
                self._call(
                    "create index",
                    lambda t: self.client.indices.create(index=name, body=body, request_timeout=t),
                    index=name,
                )
            except BackendError as exc:
                # Another writer created it between our check and create: verify it below.
                if not isinstance(exc.__cause__, os_exc.RequestError) or "already_exists" not in str(
                    exc.__cause__.error
                ):
                    raise
        if not exists and dimension > 0 and self.settings.opensearch_hybrid_mode is HybridMode.SERVER:
            try:
                self.ensure_search_pipeline()
            except (BackendError, ConfigurationError) as exc:
                # Not fatal: lexical and k-NN work without it, and hybrid retries the put.
                logger.warning("could not put the hybrid search pipeline: %s", exc.message)
        info = self._read_info(name, with_counts=False)
        if info.embedder_id != embedder_id or info.dimension != dimension:
            raise EmbedderMismatchError(
                f"index {name!r} was built with embedder {info.embedder_id!r} ({info.dimension} dims); "
                f"refusing {embedder_id!r} ({dimension} dims). Re-index into a new index to switch "
                "embedders",
                field="index",
            )
        info = self._with_generation(name, info)
        self._infos[name] = info
        return info

    def _with_generation(self, name: str, info: IndexInfo) -> IndexInfo:
        """A schema-1 index gets `generation` mapped before anything filters on it (dynamic
        mapping would make it `text`, and stale rows would never match the keep term)."""
        if info.extra.get("has_generation"):
            return info
        body = bodies.generation_mapping()
        self._call(
            "put mapping",
            lambda t: self.client.indices.put_mapping(index=name, body=body, request_timeout=t),
            index=name,
        )
        return replace(info, extra={**info.extra, "has_generation": True})

    def put_index_template(
        self, name: str, patterns: Sequence[str], *, embedder_id: str, dimension: int
    ) -> None:
        """Optional: a composable template so indexes created by other writers get our mappings."""
        body = bodies.index_template_body(
            patterns,
            embedder_id,
            dimension,
            self.capabilities(),
            k1=self.settings.bm25_k1,
            b=self.settings.bm25_b,
        )
        self._call(
            "put index template",
            lambda t: self.client.indices.put_index_template(name=name, body=body, request_timeout=t),
        )

    def get_index(self, index: str) -> IndexInfo:
        info = self._read_info(index, with_counts=True)
        self._infos[info.name] = replace(info, documents=0, chunks=0)
        return info

    def list_indexes(self) -> list[IndexInfo]:
        response = self._call("list indexes", lambda t: self.client.indices.get(index="*", request_timeout=t))
        out = []
        for name in sorted(response):
            meta = bodies.index_meta(response, name)
            if name.startswith(".") or "embedder_id" not in meta:
                continue
            out.append(
                IndexInfo(
                    name=name,
                    embedder_id=str(meta["embedder_id"]),
                    dimension=int(meta.get("dimension") or 0),
                    documents=self._count(name, bodies.MARKER_KIND),
                    chunks=self._count(name, bodies.CHUNK_KINDS),
                    extra={"backend": "opensearch", "schema": meta.get("evidence_schema")},
                )
            )
        return out

    def delete_index(self, index: str) -> None:
        name = self._index_name(index)
        self._infos.pop(name, None)
        self._call(
            "delete index", lambda t: self.client.indices.delete(index=name, request_timeout=t), index=name
        )

    # --- documents --------------------------------------------------------------------------

    def document_hash(self, index: str, document_id: str) -> str | None:
        """The stored version's hash; None if absent or, on Serverless, if rows of another
        generation are still there (an interrupted write the last one could not see yet): the
        caller then writes the document again, and `upsert` removes them (docs/opensearch.md)."""
        name = self._index_name(index)
        marker = self._markers(name, [document_id]).get(document_id)
        if marker is None:
            return None
        if self.serverless and marker.generation:
            body = {"query": bodies.stale_query([document_id], [marker.generation])}
            stale = self._call(
                "count",
                lambda t: self.client.count(index=name, body=body, request_timeout=t),
                index=name,
                retry_timeouts=False,
            )
            if int(stale.get("count", 0)):
                return None
        return marker.document_hash

    def _markers(self, index: str, document_ids: Sequence[str]) -> dict[str, _Marker]:
        """The current marker of each document: the newest generation if a Serverless
        redelivery briefly left two."""
        out: dict[str, _Marker] = {}
        ids = list(dict.fromkeys(document_ids))
        for start in range(0, len(ids), bodies.MAX_TERMS):
            batch = ids[start : start + bodies.MAX_TERMS]
            response = self._search("document hash", index, bodies.markers_body(batch))
            for hit in response.get("hits", {}).get("hits", []):
                source = hit.get("_source") or {}
                doc_id = str(source["document_id"])
                marker = _Marker(str(source.get("document_hash") or ""), str(source.get("generation") or ""))
                if doc_id not in out or marker.generation > out[doc_id].generation:
                    out[doc_id] = marker
        return out

    def upsert(
        self, index: str, documents: Sequence[DocumentChunks], vectors: Sequence[Vector | None]
    ) -> list[UpsertResult]:
        if len(documents) != len(vectors):
            raise RequestValidationError("upsert needs one vectors entry (or None) per document")
        name = self._index_name(index)
        info = self._info(name)
        for doc, vecs in zip(documents, vectors, strict=True):
            _check_vectors(doc, vecs, info)
        last = {d.document_id: i for i, d in enumerate(documents)}
        if len(last) != len(documents):
            # The same id twice in one batch: the last version wins, as two upserts in a row would
            # (one generation per batch must not hold two versions of a document).
            keep = sorted(last.values())
            documents, vectors = [documents[i] for i in keep], [vectors[i] for i in keep]
        if not info.extra.get("has_generation"):
            self._infos[name] = info = self._with_generation(name, info)
        existing = self._markers(name, [d.document_id for d in documents])
        results: dict[str, UpsertResult] = {}
        pending: list[tuple[DocumentChunks, Vector | None, bool]] = []
        unchanged: dict[str, str] = {}
        for doc, vecs in zip(documents, vectors, strict=True):
            old = existing.get(doc.document_id)
            if old is not None and old.document_hash == doc.content_hash:
                results[doc.document_id] = _result(doc, "unchanged")
                if old.generation:  # a layout-1 marker has none: its rows are all current
                    unchanged[doc.document_id] = old.generation
            else:
                pending.append((doc, vecs, old is not None))
        if self.serverless and unchanged:
            # Rows an earlier write left while they were not yet visible (a redelivery inside
            # the consistency window): the marker's generation is the one that stays. The
            # documents are complete either way; a failed clean-up is retried next time.
            for doc_id, problems in self._remove_stale(name, unchanged).items():
                logger.warning("stale rows of %s kept for now: %s", doc_id, problems[0].reason)
        failures = self._write_documents(name, pending)
        for doc, _vecs, replacing in pending:
            if doc.document_id not in failures:
                results[doc.document_id] = _result(doc, "updated" if replacing else "created")
        if failures:
            self._raise_failures(name, failures)
        return [results[d.document_id] for d in documents if d.document_id in results]

    def _raise_failures(self, index: str, failures: Mapping[str, list[_Failure]]) -> None:
        items = [(doc_id, f) for doc_id, fs in failures.items() for f in fs]
        shown = "; ".join(f"{doc_id}: {f.reason}" for doc_id, f in items[:5])
        more = f" (+{len(items) - 5} more)" if len(items) > 5 else ""
        message = (
            f"bulk indexing into {index!r} failed for {len(items)} action(s) of "
            f"{len(failures)} document(s): {shown}{more}. The other documents were written; "
            "the failed ones have no marker and are redone by the next upsert"
        )
        if all(f.transient for _, f in items):
            raise ServiceUnavailableError(message, retry_after_s=self._retry_after_s())
        raise BackendError(message)

    def _write_documents(
        self, index: str, pending: Sequence[tuple[DocumentChunks, Vector | None, bool]]
    ) -> dict[str, list[_Failure]]:
        """Chunks of a new generation, then every other generation's rows removed, then the
        markers: a marker is only ever written for a document all of whose rows are current.

        One bulk stream per phase, not per document: a 1,000-document migration is a handful
        of requests. Returns the failures by document id.
        """
        if not pending:
            return {}
        generation = bodies.new_generation()
        with_ids = not self.serverless
        failures: dict[str, list[_Failure]] = {}
        replacing = [doc.document_id for doc, _v, rep in pending if rep]
        if replacing and with_ids:
            # Chunks are overwritten in place by id: take the old marker away first, so that
            # an interrupted write never leaves a marker vouching for a half-replaced document.
            items = [
                _Item(doc_id, bodies.delete_action(index, bodies.marker_id(doc_id))) for doc_id in replacing
            ]
            _merge(failures, self._bulk(index, items, idempotent=True))
        chunk_items = [
            _Item(doc.document_id, action)
            for doc, vecs, _r in pending
            if doc.document_id not in failures
            for action in bodies.bulk_actions(index, doc, vecs, generation, with_ids=with_ids)
        ]
        _merge(failures, self._bulk(index, chunk_items, idempotent=with_ids))
        written = [doc for doc, _v, _r in pending if doc.document_id not in failures]
        _merge(failures, self._remove_stale(index, {doc.document_id: generation for doc in written}))
        markers = [
            _Item(doc.document_id, bodies.marker_action(index, doc, generation, with_ids=with_ids))
            for doc in written
            if doc.document_id not in failures
        ]
        _merge(failures, self._bulk(index, markers, idempotent=with_ids))
        return failures

    def _remove_stale(self, index: str, keep: Mapping[str, str]) -> dict[str, list[_Failure]]:
        """Remove every row of the documents whose generation is not `keep[document_id]`.

        Managed clusters: `_delete_by_query`, one term per kept generation (bounded groups of
        documents, so `index.max_terms_count` is never near). Serverless has no delete by query:
        the stale rows it can see are found by search and deleted by `_id`; rows it cannot see
        yet are removed by the document's next upsert (docs/opensearch.md, consistency window).
        """
        failures: dict[str, list[_Failure]] = {}
        ids = list(keep)
        for start in range(0, len(ids), bodies.MAX_TERMS):
            group = ids[start : start + bodies.MAX_TERMS]
            generations = sorted({keep[d] for d in group})
            try:
                if self.serverless:
                    _merge(failures, self._delete_rows(index, bodies.stale_query(group, generations)))
                else:
                    self._delete_by_query(index, bodies.stale_delete_body(group, generations))
            except ServiceUnavailableError as exc:
                for doc_id in group:
                    failures.setdefault(doc_id, []).append(
                        _Failure(f"stale rows not removed: {exc.message}", True)
                    )
            except BackendError as exc:
                for doc_id in group:
                    failures.setdefault(doc_id, []).append(
                        _Failure(f"stale rows not removed: {exc.message}", False)
                    )
        return failures

    def _delete_rows(self, index: str, query: Mapping[str, Any]) -> dict[str, list[_Failure]]:
        """Serverless: delete by `_id` what a query finds now (up to the result window)."""
        items: list[_Item] = []
        offset = 0
        while offset < _MAX_RESULT_WINDOW:
            size = min(_LOOKUP_PAGE, _MAX_RESULT_WINDOW - offset)
            response = self._search("find rows", index, bodies.rows_body(query, size=size, offset=offset))
            hits = response.get("hits", {}).get("hits", [])
            items.extend(
                _Item(
                    str((h.get("_source") or {}).get("document_id", "")),
                    bodies.delete_action(index, h["_id"]),
                )
                for h in hits
            )
            if len(hits) < size:
                break
            offset += size
        return self._bulk(index, items, idempotent=True)

    def _bulk(self, index: str, items: Sequence[_Item], *, idempotent: bool) -> dict[str, list[_Failure]]:
        """Send `items` in requests of at most `bulk_docs` actions / `bulk_bytes`; retry only what
        was not acknowledged. Per-item results are attributed by position within each request
        (the bulk API answers in request order) and checked against the action's `_id`.

        `idempotent=False` (Serverless, server-assigned ids): an action whose request failed
        without an answer (timeout, cut connection, 5xx) may have been applied, so it is not
        resent: its document fails and the next upsert rewrites it under a new generation.
        Per-item 429s and whole-request 429s were not applied and are always resent.
        """
        if not items:
            return {}
        # Inside a request, its deadline; elsewhere (indexer, migrate) attempts and per-request
        # timeouts bound a write, not one budget for what may be many requests.
        deadline = current_deadline()
        writer = _BulkWriter(self, index, items, idempotent=idempotent, deadline=deadline)

        def log_retry(exc: Exception, attempt: int, delay: float) -> None:
            logger.warning("opensearch bulk into %s: %s; round %d in %.2fs", index, exc, attempt + 1, delay)

        try:
            call_with_retries(
                writer.round,
                backoff=self.backoff,
                classify=lambda exc: Retry() if isinstance(exc, _BulkIncomplete) else None,
                deadline=deadline,
                sleep=self._sleep,
                on_retry=log_retry,
            )
        except RetriesExhausted as exc:
            why = "deadline reached" if exc.deadline_reached else f"{exc.attempts} attempts"
            for item in writer.pending:
                writer.fail(item, f"not acknowledged ({why}): {writer.last}", transient=True)
        return writer.failures

    def _requests(self, items: Sequence[_Item]) -> list[list[_Item]]:
        """Split by count and by serialised size (as opensearch-py's chunker measures it)."""
        out: list[list[_Item]] = []
        current: list[_Item] = []
        size = 0
        for item in items:
            source = item.action.get("_source")
            cost = 200 + (len(json.dumps(source, ensure_ascii=False).encode("utf-8")) if source else 0)
            if current and (len(current) >= self.bulk_docs or size + cost > self.bulk_bytes):
                out.append(current)
                current, size = [], 0
            current.append(item)
            size += cost
        if current:
            out.append(current)
        return out

    def _delete_by_query(self, index: str, body: Mapping[str, Any]) -> int:
        if self.serverless:
            raise ConfigurationError("OpenSearch Serverless has no _delete_by_query")  # pragma: no cover
        params: dict[str, Any] = {"conflicts": "proceed"}
        if self._refresh:
            params["refresh"] = "true"  # delete_by_query has no wait_for
        response = self._call(
            "delete by query",
            lambda t: self.client.delete_by_query(index=index, body=body, request_timeout=t, **params),
            index=index,
        )
        return int(response.get("deleted", 0))

    def delete_document(self, index: str, document_id: str) -> int:
        name = self._index_name(index)
        chunks = self._count_document_chunks(name, document_id)
        if chunks == 0 and self.document_hash(name, document_id) is None:
            return 0
        body = bodies.delete_documents_body([document_id])
        if self.serverless:
            failures = self._delete_rows(name, body["query"])
            if failures:
                self._raise_failures(name, failures)
        else:
            self._delete_by_query(name, body)
        return chunks

    def _count_document_chunks(self, index: str, document_id: str) -> int:
        body = {"query": {"bool": {"filter": bodies.filter_clauses({"document_id": document_id}, None)}}}
        response = self._call(
            "count",
            lambda t: self.client.count(index=index, body=body, request_timeout=t),
            index=index,
            retry_timeouts=False,
        )
        return int(response.get("count", 0))

    # --- queries ----------------------------------------------------------------------------

    def lexical(
        self,
        index: str,
        text: str,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> list[SearchHit]:
        if k <= 0 or not text.strip():
            self._index_name(index)
            return []
        body = bodies.lexical_body(text, k=min(k, _MAX_RESULT_WINDOW), filters=filters, kind=kind)
        return bodies.parse_lexical(self._search("lexical search", index, body))

    def dense(
        self,
        index: str,
        vector: Vector,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
    ) -> list[SearchHit]:
        name = self._index_name(index)
        info = self._check_query_vector(name, vector)
        if k <= 0:
            return []
        k = min(k, _MAX_RESULT_WINDOW)
        if _no_direction(vector):
            body = bodies.zero_vector_body(k=k, filters=filters, kind=kind)
            return bodies.parse_zero_vector(self._search("k-NN search (zero vector)", name, body))
        body = bodies.knn_body(_as_list(vector), k=k, filters=filters, kind=kind)
        return bodies.parse_dense(
            self._search("k-NN search", name, body), str(info.extra.get("engine", "faiss"))
        )

    def _check_query_vector(self, index: str, vector: Vector) -> IndexInfo:
        info = self._info(index)
        shape = np.shape(vector)
        if info.dimension == 0:
            raise EmbedderMismatchError(f"index {index!r} was built without vectors (lexical only)")
        if shape != (info.dimension,):
            raise EmbedderMismatchError(
                f"query vector has shape {shape}; index {index!r} holds {info.dimension}-dim vectors "
                f"from {info.embedder_id!r}",
                field="index",
            )
        return info

    def hybrid(
        self,
        index: str,
        text: str,
        vector: Vector,
        *,
        k: int,
        filters: Filters | None = None,
        kind: ChunkKind | None = ChunkKind.PASSAGE,
        pagination_depth: int | None = None,
        mode: HybridMode | None = None,
        explain: bool = False,
    ) -> HybridResult:
        """Server-side hybrid (`hybrid` query + search pipeline) or the two legs (client mode).

        `pagination_depth` defaults to k (the first-stage k) and is sent only where the cluster
        knows it (>= 2.19); client mode is what Serverless needs when its cluster has no RRF,
        what `opensearch_hybrid_mode=client` selects, and what a zero query vector gets (a
        cosine space refuses it).
        """
        mode = mode or self.settings.opensearch_hybrid_mode
        name = self._index_name(index)
        self._check_query_vector(name, vector)
        depth = pagination_depth or k
        if mode is HybridMode.CLIENT or _no_direction(vector):
            return HybridResult(
                mode=HybridMode.CLIENT,
                fused=None,
                lexical=self.lexical(name, text, k=depth, filters=filters, kind=kind),
                dense=self.dense(name, vector, k=depth, filters=filters, kind=kind),
            )
        pipeline, fusion, _ = self._pipeline_choice()
        body = bodies.hybrid_body(
            text,
            _as_list(vector),
            k=k,
            filters=filters,
            kind=kind,
            pagination_depth=depth,
            caps=self.capabilities(),
        )
        try:
            response = self._search("hybrid search", name, body, search_pipeline=pipeline)
        except BackendError as exc:
            if not _missing_pipeline(exc) or pipeline in self._pipelines_ready:
                raise
            self.ensure_search_pipeline()
            response = self._search("hybrid search", name, body, search_pipeline=pipeline)
        fused = bodies.parse_hybrid(response)
        if not explain:
            return HybridResult(mode=mode, fused=fused, fusion=fusion)
        lexical = self.lexical(name, text, k=depth, filters=filters, kind=kind)
        dense = self.dense(name, vector, k=depth, filters=filters, kind=kind)
        lex = {h.chunk.chunk_id: h.score for h in lexical}
        den = {h.chunk.chunk_id: h.score for h in dense}
        fused = [
            replace(h, lexical=lex.get(h.chunk.chunk_id), dense=den.get(h.chunk.chunk_id)) for h in fused
        ]
        return HybridResult(mode=mode, fused=fused, lexical=lexical, dense=dense, fusion=fusion)

    def _pipeline_choice(self) -> tuple[str, str, dict[str, Any]]:
        """(pipeline name, fusion, body): RRF via score-ranker-processor where the cluster has it
        (>= 2.19), else min-max normalisation + arithmetic mean."""
        caps = self.capabilities()
        fusion = self._fusion
        if fusion is None:
            fusion = "rrf" if caps.rrf else "normalization"
        if fusion == "rrf":
            if not caps.rrf:
                raise ConfigurationError(
                    "RRF needs OpenSearch >= 2.19 (score-ranker-processor); use "
                    "EVIDENCE_OPENSEARCH_HYBRID_MODE=client on Serverless or older clusters"
                )
            return bodies.RRF_PIPELINE, fusion, bodies.rrf_pipeline_body()
        return bodies.MINMAX_PIPELINE, fusion, bodies.normalization_pipeline_body()

    def ensure_search_pipeline(self) -> tuple[str, str]:
        """Put the pipeline hybrid queries run through (idempotent; once per process).

        Called by `create_index` (indexing roles may manage pipelines) and, should a query find
        it missing, once by `hybrid` itself; queries never put it routinely.
        """
        pipeline, fusion, body = self._pipeline_choice()
        if pipeline not in self._pipelines_ready:
            self._call(
                "put search pipeline",
                lambda t: self.client.search_pipeline.put(id=pipeline, body=body, request_timeout=t),
            )
            self._pipelines_ready.add(pipeline)
        return pipeline, fusion

    def lookup(
        self, index: str, filters: Filters, *, limit: int = 100, kind: ChunkKind | None = None
    ) -> list[SearchHit]:
        """Filter-only retrieval (follow-ups by criterion hash: a term filter), paged by search_after."""
        name = self._index_name(index)
        out: list[SearchHit] = []
        search_after: list[Any] | None = None
        while len(out) < limit:
            size = min(_LOOKUP_PAGE, limit - len(out))
            body = bodies.lookup_body(filters, size=size, kind=kind, search_after=search_after)
            response = self._search("lookup", name, body)
            raw = response.get("hits", {}).get("hits", [])
            out.extend(bodies.parse_lookup(response))
            if len(raw) < size:
                break
            search_after = list(raw[-1].get("sort") or [])
            if not search_after:
                break
        return out

    def list_documents(self, index: str) -> list[DocumentInfo]:
        """Every document of `index` from its markers (which carry the passage and span counts)."""
        name = self._index_name(index)
        self._info(name)  # IndexNotFoundError before a search on a missing index
        newest: dict[str, tuple[str, DocumentInfo]] = {}
        search_after: list[Any] | None = None
        while True:
            body = bodies.document_page_body(size=_LOOKUP_PAGE, search_after=search_after)
            raw = self._search("list documents", name, body).get("hits", {}).get("hits", [])
            for hit in raw:
                src = hit.get("_source") or {}
                doc_id = str(src["document_id"])
                generation = str(src.get(bodies.GENERATION_FIELD) or "")
                info = DocumentInfo(
                    doc_id,
                    str(src.get("source") or doc_id),
                    int(src.get("passages") or 0),
                    int(src.get("spans") or 0),
                )
                if doc_id not in newest or generation > newest[doc_id][0]:
                    newest[doc_id] = (generation, info)
            if len(raw) < _LOOKUP_PAGE or not raw[-1].get("sort"):
                break
            search_after = list(raw[-1]["sort"])
        return [info for _, info in sorted(newest.values(), key=lambda item: item[1].document_id)]

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        name = self._index_name(index)
        out: dict[str, Vector] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), _LOOKUP_PAGE):
            batch = ids[start : start + _LOOKUP_PAGE]
            out.update(bodies.parse_vectors(self._search("vectors", name, bodies.vectors_body(batch))))
        return out

    def close(self) -> None:
        if self._client is not None:
            close = getattr(self._client, "close", None)
            if callable(close):
                close()
            self._client = None


def _merge(into: dict[str, list[_Failure]], more: Mapping[str, list[_Failure]]) -> None:
    for doc_id, failures in more.items():
        into.setdefault(doc_id, []).extend(failures)


def _result(doc: DocumentChunks, status: str) -> UpsertResult:
    passages = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
    return UpsertResult(doc.document_id, status, passages, len(doc.chunks) - passages)


def _as_list(vector: Vector) -> list[float]:
    return [float(x) for x in np.asarray(vector, dtype=np.float32).ravel()]


def _no_direction(vector: Vector) -> bool:
    arr = np.asarray(vector, dtype=np.float32)
    return not np.isfinite(arr).all() or not arr.any()


def _check_vectors(doc: DocumentChunks, vecs: Vector | None, info: IndexInfo) -> None:
    if vecs is None:
        return
    if info.dimension == 0:
        raise EmbedderMismatchError(f"index {info.name!r} was built without vectors (lexical only)")
    expected = (len(doc.chunks), info.dimension)
    if np.shape(vecs) != expected:
        raise EmbedderMismatchError(
            f"document {doc.document_id!r}: vectors of shape {np.shape(vecs)}, expected {expected} "
            f"for index {info.name!r} ({info.embedder_id!r})",
            field="vectors",
        )


def _missing_pipeline(exc: BackendError) -> bool:
    text = exc.message.lower()
    return "pipeline" in text and any(
        phrase in text for phrase in ("not defined", "not found", "does not exist", "no such")
    )


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
