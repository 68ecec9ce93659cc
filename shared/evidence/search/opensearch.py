"""OpenSearch adapter behind the SearchBackend port (Amazon OpenSearch Service, Serverless, self-managed).

- Auth: basic auth when a username is configured, SigV4 (`AWSV4SignerAuth`, service `es` or
  `aoss`, credentials from boto3) for AWS endpoints, none for a local/loopback cluster.
- Every call goes through `_call`: retries with exponential backoff on 429, 5xx and connection
  errors; everything else becomes a typed error (IndexNotFoundError, BackendError with the
  server's reason, EmbedderMismatchError from `create_index`).
- opensearch-py and boto3 are imported inside functions; the client is built on first use.
- Request bodies come from `opensearch_bodies` (validated against the official API spec in
  tests); this module only sequences calls.

Scores: `lexical` returns OpenSearch's BM25 `_score` unchanged; `dense` converts the
`cosinesimil` score (1 + cos) / 2 back to cos in [-1, 1]; `hybrid` (server mode) returns the
search pipeline's fused score, with per-leg scores attached when `explain=True`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
)
from evidence.records import ChunkKind, DocumentChunks, SearchHit
from evidence.search import opensearch_bodies as bodies
from evidence.search.base import Filters, IndexInfo, UpsertResult, Vector

logger = logging.getLogger(__name__)

T = TypeVar("T")

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: Bulk requests stay well under every managed cluster's http.max_content_length (10 MB on the
#: smallest Amazon OpenSearch Service instances) and Serverless's request limit.
DEFAULT_BULK_BYTES = 5 * 1024 * 1024
DEFAULT_BULK_DOCS = 500
_MAX_RESULT_WINDOW = 10_000
_LOOKUP_PAGE = 1_000

Fusion = Literal["rrf", "normalization"]


@dataclass(frozen=True, slots=True)
class HybridResult:
    """What `hybrid` returns.

    server mode: `fused` holds the pipeline's ranking; `lexical`/`dense` are filled only with
    `explain=True` (so the ranking layer can report per-leg scores).
    client mode: `fused` is None; the two legs are for the ranking layer's fusion.
    """

    mode: HybridMode
    fused: list[SearchHit] | None
    lexical: list[SearchHit] = field(default_factory=list)
    dense: list[SearchHit] = field(default_factory=list)
    fusion: str | None = None


def _version_tuple(number: str) -> tuple[int, ...]:
    parts = []
    for piece in number.split("-", maxsplit=1)[0].split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


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
    elif settings.opensearch_service == "aoss" or host.endswith(".amazonaws.com"):
        kwargs["http_auth"] = _sigv4_auth(settings, host)
        kwargs["connection_class"] = RequestsHttpConnection
        kwargs["pool_maxsize"] = 20
    return OpenSearch(**kwargs)


def _sigv4_auth(settings: Settings, host: str) -> Any:
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
    return AWSV4SignerAuth(credentials, region, settings.opensearch_service)


def _region_from_host(host: str) -> str | None:
    # search-x.eu-west-1.es.amazonaws.com / x.us-east-1.aoss.amazonaws.com
    parts = host.split(".")
    for i, part in enumerate(parts):
        if part in {"es", "aoss"} and i > 0:
            return parts[i - 1]
    return None


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
        bulk_bytes: int = DEFAULT_BULK_BYTES,
        bulk_docs: int = DEFAULT_BULK_DOCS,
        fusion: Fusion | None = None,
    ) -> None:
        self.settings = settings or Settings(backend="opensearch")
        self._client = client
        self._client_lock = threading.Lock()
        self.serverless = self.settings.opensearch_service == "aoss"
        # Serverless rejects `refresh` (it refreshes on its own schedule, ~1 s to 10 s).
        self._refresh: str | None = "wait_for" if refresh and not self.serverless else None
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.bulk_bytes = bulk_bytes
        self.bulk_docs = bulk_docs
        self._fusion = fusion
        self._infos: dict[str, IndexInfo] = {}
        self._pipelines_ready: set[str] = set()
        self._version: tuple[int, ...] | None = None

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """Built once, on first use (never at import, never per call)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = build_client(self.settings)
        return self._client

    def _call(self, what: str, fn: Callable[[], T], *, index: str | None = None) -> T:
        from opensearchpy import exceptions as os_exc

        attempt = 0
        while True:
            try:
                return fn()
            except (os_exc.ConnectionError, os_exc.TransportError) as exc:
                status = exc.status_code if isinstance(exc.status_code, int) else None
                transient = isinstance(exc, os_exc.ConnectionError) or status in _RETRY_STATUS
                if transient and attempt < self.max_retries:
                    delay = self.backoff_s * (2**attempt) * (0.5 + random.random())
                    logger.warning(
                        "opensearch %s failed (%s); retry %d in %.2fs", what, exc, attempt + 1, delay
                    )
                    time.sleep(delay)
                    attempt += 1
                    continue
                raise self._translate(what, exc, index) from exc

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
        response = self._call("get index", lambda: self.client.indices.get(index=name), index=name)
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
            extra={"backend": "opensearch", "schema": meta.get("evidence_schema")},
        )

    def _count(self, index: str, kind: str | Sequence[str]) -> int:
        body = bodies.count_body(kind)
        response = self._call("count", lambda: self.client.count(index=index, body=body), index=index)
        return int(response.get("count", 0))

    def _search(self, what: str, index: str, body: Mapping[str, Any], **params: Any) -> Mapping[str, Any]:
        name = self._index_name(index)
        result: Mapping[str, Any] = self._call(
            what, lambda: self.client.search(index=name, body=body, **params), index=name
        )
        return result

    # --- index lifecycle --------------------------------------------------------------------

    def create_index(self, index: str, *, embedder_id: str, dimension: int) -> IndexInfo:
        from opensearchpy import exceptions as os_exc

        name = self._index_name(index)
        if dimension < 0:
            raise RequestValidationError("dimension must be >= 0", field="dimension")
        body = bodies.create_index_body(
            embedder_id,
            dimension,
            serverless=self.serverless,
            k1=self.settings.bm25_k1,
            b=self.settings.bm25_b,
        )
        exists = self._call("index exists", lambda: self.client.indices.exists(index=name), index=name)
        if not exists:
            try:
                self._call(
                    "create index", lambda: self.client.indices.create(index=name, body=body), index=name
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
        self._infos[name] = info
        return info

    def put_index_template(
        self, name: str, patterns: Sequence[str], *, embedder_id: str, dimension: int
    ) -> None:
        """Optional: a composable template so indexes created by other writers get our mappings."""
        body = bodies.index_template_body(patterns, embedder_id, dimension, serverless=self.serverless)
        self._call("put index template", lambda: self.client.indices.put_index_template(name=name, body=body))

    def get_index(self, index: str) -> IndexInfo:
        info = self._read_info(index, with_counts=True)
        self._infos[info.name] = replace(info, documents=0, chunks=0)
        return info

    def list_indexes(self) -> list[IndexInfo]:
        response = self._call("list indexes", lambda: self.client.indices.get(index="*"))
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
        self._call("delete index", lambda: self.client.indices.delete(index=name), index=name)

    # --- documents --------------------------------------------------------------------------

    def document_hash(self, index: str, document_id: str) -> str | None:
        return self._document_hashes(index, [document_id]).get(document_id)

    def _document_hashes(self, index: str, document_ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for start in range(0, len(document_ids), _LOOKUP_PAGE):
            batch = list(document_ids[start : start + _LOOKUP_PAGE])
            response = self._search("document hash", index, bodies.markers_body(batch))
            for hit in response.get("hits", {}).get("hits", []):
                source = hit.get("_source") or {}
                out[str(source["document_id"])] = str(source.get("document_hash") or "")
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
        existing = self._document_hashes(name, [d.document_id for d in documents])
        results: dict[str, UpsertResult] = {}
        pending: list[tuple[DocumentChunks, Vector | None, bool]] = []
        for doc, vecs in zip(documents, vectors, strict=True):
            old = existing.get(doc.document_id)
            if old is not None and old == doc.content_hash:
                results[doc.document_id] = _result(doc, "unchanged")
            else:
                pending.append((doc, vecs, old is not None))
        failures = self._write_documents(name, pending)
        failed_docs = {doc_id for doc_id, _ in failures}
        for doc, _vecs, replacing in pending:
            if doc.document_id not in failed_docs:
                results[doc.document_id] = _result(doc, "updated" if replacing else "created")
        if failures:
            shown = "; ".join(f"{doc_id}: {msg}" for doc_id, msg in failures[:5])
            more = f" (+{len(failures) - 5} more)" if len(failures) > 5 else ""
            raise BackendError(
                f"bulk indexing into {name!r} failed for {len(failures)} chunk(s) of "
                f"{len(failed_docs)} document(s): {shown}{more}. The other documents were written; "
                "the failed ones keep their previous version and are redone by the next upsert"
            )
        return [results[d.document_id] for d in documents if d.document_id in results]

    def _write_documents(
        self, index: str, pending: Sequence[tuple[DocumentChunks, Vector | None, bool]]
    ) -> list[tuple[str, str]]:
        """Chunks first, stale chunks next, hash markers last (see opensearch_bodies).

        One bulk stream per phase, not per document: a 1,000-document migration is a handful of
        requests. Returns (document_id, reason) per failed chunk.
        """
        if not pending:
            return []
        replacing = [doc.document_id for doc, _v, rep in pending if rep]
        if self.serverless and replacing:
            # Serverless vector collections assign their own ids, so a new version cannot
            # overwrite the old one in place: remove the old chunks (and markers) first.
            self._delete_by_query(index, bodies.delete_documents_body(replacing))
        with_ids = not self.serverless
        actions = [
            a for doc, vecs, _r in pending for a in bodies.bulk_actions(index, doc, vecs, with_ids=with_ids)
        ]
        failures = self._bulk(index, actions)
        failed = {doc_id for doc_id, _ in failures}
        if replacing and with_ids:
            done = [(doc, rep) for doc, _v, rep in pending if rep and doc.document_id not in failed]
            if done:
                keep = [c.chunk_id for doc, _ in done for c in doc.chunks]
                keep += [bodies.marker_id(doc.document_id) for doc, _ in done]
                self._delete_by_query(
                    index, bodies.delete_documents_body([d.document_id for d, _ in done], keep_chunk_ids=keep)
                )
        markers = []
        for doc, _v, _r in pending:
            if doc.document_id in failed:
                continue
            marker: dict[str, Any] = {
                "_op_type": "index",
                "_index": index,
                "_source": bodies.marker_source(doc),
            }
            if with_ids:
                marker["_id"] = bodies.marker_id(doc.document_id)
            markers.append(marker)
        return failures + self._bulk(index, markers)

    def _bulk(self, index: str, actions: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
        """Chunked by size and count; per-item failures come back as messages, not exceptions."""
        from opensearchpy import helpers

        if not actions:
            return []
        # streaming_bulk reports items in order, so item i belongs to actions[i].
        owners = [str(a["_source"]["document_id"]) for a in actions]
        params: dict[str, Any] = {}
        if self._refresh:
            params["refresh"] = self._refresh

        def run() -> list[tuple[str, str]]:
            errors: list[tuple[str, str]] = []
            for i, (ok, item) in enumerate(
                helpers.streaming_bulk(
                    self.client,
                    actions,
                    chunk_size=self.bulk_docs,
                    max_chunk_bytes=self.bulk_bytes,
                    raise_on_error=False,
                    raise_on_exception=True,
                    max_retries=self.max_retries,
                    initial_backoff=max(1, int(self.backoff_s)),
                    **params,
                )
            ):
                if not ok:
                    op = next(iter(item.values()))
                    err = op.get("error") or {}
                    detail = (
                        f"{err.get('type')}: {err.get('reason')}" if isinstance(err, Mapping) else str(err)
                    )
                    errors.append((owners[i], f"{op.get('_id', '?')}: {detail}"))
            return errors

        return self._call("bulk", run, index=index)

    def _delete_by_query(self, index: str, body: Mapping[str, Any]) -> int:
        params: dict[str, Any] = {"conflicts": "proceed"}
        if self._refresh:
            params["refresh"] = "true"  # delete_by_query has no wait_for
        response = self._call(
            "delete by query",
            lambda: self.client.delete_by_query(index=index, body=body, **params),
            index=index,
        )
        return int(response.get("deleted", 0))

    def delete_document(self, index: str, document_id: str) -> int:
        name = self._index_name(index)
        chunks = self._count_document_chunks(name, document_id)
        if chunks == 0 and self.document_hash(name, document_id) is None:
            return 0
        self._delete_by_query(name, bodies.delete_documents_body([document_id]))
        return chunks

    def _count_document_chunks(self, index: str, document_id: str) -> int:
        body = {"query": {"bool": {"filter": bodies.filter_clauses({"document_id": document_id}, None)}}}
        response = self._call("count", lambda: self.client.count(index=index, body=body), index=index)
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
        self._check_query_vector(name, vector)
        if k <= 0:
            return []
        body = bodies.knn_body(_as_list(vector), k=min(k, _MAX_RESULT_WINDOW), filters=filters, kind=kind)
        return bodies.parse_dense(self._search("k-NN search", name, body))

    def _check_query_vector(self, index: str, vector: Vector) -> None:
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

        `pagination_depth` defaults to k (the first-stage k); client mode is what Serverless
        needs when its cluster has no RRF, and what `opensearch_hybrid_mode=client` selects.
        """
        mode = mode or self.settings.opensearch_hybrid_mode
        name = self._index_name(index)
        self._check_query_vector(name, vector)
        depth = pagination_depth or k
        if mode is HybridMode.CLIENT:
            return HybridResult(
                mode=mode,
                fused=None,
                lexical=self.lexical(name, text, k=depth, filters=filters, kind=kind),
                dense=self.dense(name, vector, k=depth, filters=filters, kind=kind),
            )
        pipeline, fusion, _ = self._pipeline_choice()
        body = bodies.hybrid_body(
            text, _as_list(vector), k=k, filters=filters, kind=kind, pagination_depth=depth
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

    def cluster_version(self) -> tuple[int, ...]:
        if self._version is None:
            if self.serverless:
                # Serverless reports no version; it tracks the latest release but has no RRF.
                self._version = (0,)
            else:
                info = self._call("info", self.client.info)
                self._version = _version_tuple(str(info.get("version", {}).get("number", "0")))
        return self._version

    def _pipeline_choice(self) -> tuple[str, str, dict[str, Any]]:
        """(pipeline name, fusion, body): RRF via score-ranker-processor where the cluster has it
        (>= 2.19), else min-max normalisation + arithmetic mean."""
        fusion = self._fusion
        if fusion is None:
            fusion = "rrf" if self.cluster_version() >= (2, 19) else "normalization"
        if fusion == "rrf":
            if self.serverless or self.cluster_version() < (2, 19):
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
            self._call("put search pipeline", lambda: self.client.search_pipeline.put(id=pipeline, body=body))
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


def _result(doc: DocumentChunks, status: str) -> UpsertResult:
    passages = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
    return UpsertResult(doc.document_id, status, passages, len(doc.chunks) - passages)


def _as_list(vector: Vector) -> list[float]:
    return [float(x) for x in np.asarray(vector, dtype=np.float32).ravel()]


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
