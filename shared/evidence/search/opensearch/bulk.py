"""Bulk writes (docs/opensearch.md, "Writes"): one bulk request per chunk of actions, each result
attributed to its action by position within its own request (and checked by `_id`), only
unacknowledged actions resent, a document's marker written only once all its chunks are
acknowledged and its stale rows removed. On Serverless (no delete by query, server-assigned ids)
stale rows are deleted by `_id` and a document's current rows are its newest generation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evidence.errors import (
    BackendError,
    ConfigurationError,
    EmbedderMismatchError,
    IndexNotFoundError,
    RequestValidationError,
    ServiceUnavailableError,
)
from evidence.records import ChunkKind, DocumentChunks
from evidence.retry import (
    Deadline,
    RetriesExhausted,
    Retry,
    call_with_retries,
    current_deadline,
)
from evidence.search import opensearch_bodies as bodies
from evidence.search.base import AnchorVectors, IndexInfo, UpsertResult, Vector, sectioned
from evidence.search.headers import SectionHeaders
from evidence.search.opensearch.admin import _LOOKUP_PAGE, _MAX_RESULT_WINDOW, IndexAdmin
from evidence.search.opensearch.transport import _RETRY_STATUS

logger = logging.getLogger(__name__)


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


class _BulkWriter:
    """One `OpenSearchBackend._bulk` call across its rounds: what is still pending, what failed
    for good, and the last refusal (for the message when the rounds run out)."""

    def __init__(
        self,
        backend: BulkWrites,
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
            if isinstance(err, Mapping) and err.get("type") == "index_not_found_exception":
                raise self._index_gone(detail)
            if status == 429:
                self.last = detail
                resend.append(item)
            else:
                self.fail(item, f"{op.get('_id', '?')}: {detail}", transient=status in _RETRY_STATUS)
        return resend

    def _index_gone(self, detail: str) -> IndexNotFoundError:
        """The index was deleted (by another process) after this write read it, and the cluster
        refused to create it implicitly (`action.auto_create_index`,
        docs/opensearch.md#no-implicit-index-creation).
        The whole write stops here: the rest would fail the same way, and a document whose marker
        is not written is redone by the caller's next upsert once the index exists again."""
        self.backend._forget(self.index)
        return IndexNotFoundError(
            self.index,
            f"index {self.index!r} was deleted while this write was under way ({detail}); nothing "
            "more was written. Create the index again (evidence index, or a document post) and "
            "write the documents again",
        )


class BulkWrites(IndexAdmin):
    """upsert, delete_document and the document markers."""

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

    def check_documents(self, index: str, documents: Sequence[DocumentChunks]) -> None:
        """`search.base.SettingsCheck`: `upsert`'s settings check of `documents`, asked before
        they are embedded (a header rule alone is refused only for a batch holding a sectioned
        chunk, which `create_index` cannot know); no request beyond the index's cached read."""
        name = self._index_name(index)
        self._refuse_other_settings(name, self._info(name), lambda: sectioned(documents))

    def upsert(
        self,
        index: str,
        documents: Sequence[DocumentChunks],
        vectors: Sequence[Vector | None],
        *,
        anchor_vectors: Sequence[Mapping[int, AnchorVectors] | None] | None = None,
    ) -> list[UpsertResult]:
        """`anchor_vectors` (`search.base.AnchorVectorStore`): per document, by chunk position, the
        focus span anchor's vectors kept with a passage (`bodies.anchor_source`)."""
        if len(documents) != len(vectors):
            raise RequestValidationError("upsert needs one vectors entry (or None) per document")
        anchors = list(anchor_vectors) if anchor_vectors is not None else [None] * len(documents)
        if len(anchors) != len(documents):
            raise RequestValidationError("upsert needs one anchor_vectors entry (or None) per document")
        name = self._index_name(index)
        info = self._info(name)
        # Before anything is written: documents under other indexing settings than the index's
        # would not match its others (docs/opensearch.md#indexing-settings-of-an-index).
        self._refuse_other_settings(name, info, lambda: sectioned(documents))
        for doc, vecs in zip(documents, vectors, strict=True):
            _check_vectors(doc, vecs, info)
        last = {d.document_id: i for i, d in enumerate(documents)}
        if len(last) != len(documents):
            # The same id twice in one batch: the last version wins, as two upserts in a row would
            # (one generation per batch must not hold two versions of a document).
            keep = sorted(last.values())
            documents, vectors = [documents[i] for i in keep], [vectors[i] for i in keep]
            anchors = [anchors[i] for i in keep]
        if not info.extra.get("has_generation"):
            self._infos[name] = info = self._with_generation(name, info)
        if any(anchors) and not info.extra.get("has_anchor_vectors"):
            self._infos[name] = info = self._with_anchor_vectors(name, info)
        existing = self._markers(name, [d.document_id for d in documents])
        results: dict[str, UpsertResult] = {}
        pending: list[tuple[DocumentChunks, Vector | None, bool]] = []
        unchanged: dict[str, str] = {}
        kept = {d.document_id: a for d, a in zip(documents, anchors, strict=True) if a}
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
        failures = self._write_documents(name, pending, kept)
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
        self,
        index: str,
        pending: Sequence[tuple[DocumentChunks, Vector | None, bool]],
        anchors: Mapping[str, Mapping[int, AnchorVectors]] | None = None,
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
        headers = SectionHeaders.from_settings(self.settings)
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
            for action in bodies.bulk_actions(
                index,
                doc,
                vecs,
                generation,
                with_ids=with_ids,
                headers=headers,
                anchors=(anchors or {}).get(doc.document_id),
            )
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
        return self._count_matching(index, body)

    # --- queries ----------------------------------------------------------------------------


def _merge(into: dict[str, list[_Failure]], more: Mapping[str, list[_Failure]]) -> None:
    for doc_id, failures in more.items():
        into.setdefault(doc_id, []).extend(failures)


def _result(doc: DocumentChunks, status: str) -> UpsertResult:
    passages = sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
    return UpsertResult(doc.document_id, status, passages, len(doc.chunks) - passages)


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
