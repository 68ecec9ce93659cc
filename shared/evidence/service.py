"""The service: what handlers, the CLI and the local server call.

index / delete / retrieve / plan / format. Dependencies (backend, embedder,
reranker) are built lazily from settings on first use, or injected by tests.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.config import BackendKind, EmbedderKind, Settings, get_settings
from evidence.errors import (
    DocumentNotFoundError,
    DocumentParseError,
    EmbedderMismatchError,
    EvidenceError,
    PayloadTooLargeError,
    RequestValidationError,
)
from evidence.model import (
    DeleteDocumentResponse,
    FormatRequest,
    FormatResponse,
    IndexDocumentRequest,
    IndexDocumentResponse,
    Plan,
    PlanRequest,
    RetrieveRequest,
    RetrieveResponse,
    validate_index_name,
)
from evidence.records import ChunkKind, DocumentChunks

if TYPE_CHECKING:
    import numpy as np

    from evidence.embed.base import Embedder
    from evidence.ingest import SourceItem
    from evidence.search.base import SearchBackend

#: progress(done, total or None, label)
ProgressFn = Callable[[int, int | None, str], None]
_WRITE_BATCH_DOCS = 256
#: Embedder id recorded by indexes built without vectors.
LEXICAL_ONLY = "none"


@dataclass
class IndexReport:
    """Outcome of indexing many inputs: nothing else is lost when one input fails."""

    indexed: list[IndexDocumentResponse] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    seconds: float = 0.0

    @property
    def chunks(self) -> int:
        return sum(r.chunks for r in self.indexed)

    def count(self, status: str) -> int:
        return sum(1 for r in self.indexed if r.status == status)


def check_index_name(index: str) -> str:
    try:
        return validate_index_name(index)
    except ValueError as exc:
        raise RequestValidationError(str(exc), field="index") from None


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedder is EmbedderKind.TITAN:
        from evidence.embed.titan import TitanEmbedder

        return TitanEmbedder(
            model_id=settings.bedrock_embed_model,
            region=settings.aws_region,
            dimension=settings.titan_dimension,
        )
    from evidence.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(
        max_tokens=settings.embed_max_tokens,
        batch_size=settings.embed_batch_size,
        threads=settings.embed_threads,
    )


def build_backend(settings: Settings) -> SearchBackend:
    from evidence.search.factory import get_backend

    return get_backend(settings)


class EvidenceService:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: SearchBackend | None = None,
        embedder: Embedder | None = None,
        reranker: Any | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self._backend = backend
        self._embedder = embedder
        self._reranker = reranker
        self._reranker_built = reranker is not None
        self._lock = threading.Lock()

    # --- dependencies, built on first use -------------------------------------------------

    @property
    def backend(self) -> SearchBackend:
        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    self._backend = build_backend(self.settings)
        return self._backend

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    inner = build_embedder(self.settings)
                    if self.settings.backend is BackendKind.EMBEDDED:
                        from evidence.embed.cache import CachedEmbedder, EmbeddingCache

                        cache = EmbeddingCache(self.settings.store_dir / "embeddings.sqlite3")
                        self._embedder = CachedEmbedder(inner, cache)
                    else:
                        self._embedder = inner
        return self._embedder

    @property
    def reranker(self) -> Any | None:
        if not self._reranker_built:
            with self._lock:
                if not self._reranker_built:
                    from evidence.rank.rerank import build_reranker

                    self._reranker = build_reranker(self.settings)
                    self._reranker_built = True
        return self._reranker

    # --- indexing -------------------------------------------------------------------------

    def _ensure_index(self, index: str, *, embed: bool) -> None:
        if not embed:
            self.backend.create_index(index, embedder_id=LEXICAL_ONLY, dimension=0)
            return
        emb = self.embedder
        self.backend.create_index(index, embedder_id=emb.model_id, dimension=emb.dimension)

    def write_documents(
        self, index: str, docs: Sequence[DocumentChunks], *, embed: bool = True
    ) -> list[IndexDocumentResponse]:
        """Embed and upsert; documents whose content hash is unchanged cost nothing.

        `embed=False` builds a lexical-only index (BM25 evaluation, bulk loads without a model).
        """
        import numpy as np

        self._ensure_index(index, embed=embed)
        backend = self.backend
        todo = [d for d in docs if backend.document_hash(index, d.document_id) != d.content_hash]
        vectors: list[np.ndarray | None] = [None] * len(todo)
        if todo and embed:
            texts: list[str] = []
            owners: list[tuple[int, int]] = []  # (doc position, chunk position) of each passage
            for di, d in enumerate(todo):
                for ci, c in enumerate(d.chunks):
                    if c.kind is ChunkKind.PASSAGE:
                        texts.append(c.search_text)
                        owners.append((di, ci))
            emb = self.embedder.embed_documents(texts) if texts else np.empty((0, self.embedder.dimension))
            # Rows stay NaN ("no vector") for fact spans: they are found lexically, and embedding
            # every sentence would multiply indexing cost for a leg the cascade uses last.
            mats = [np.full((len(d.chunks), self.embedder.dimension), np.nan, dtype=np.float32) for d in todo]
            for (di, ci), vec in zip(owners, emb, strict=True):
                mats[di][ci] = vec
            vectors = list(mats)
        # Only documents that changed reach the backend, so only they have a result.
        results = {r.document_id: r for r in backend.upsert(index, todo, vectors)} if todo else {}
        out = []
        for d in docs:
            r = results.get(d.document_id)
            n_pass = sum(1 for c in d.chunks if c.kind is ChunkKind.PASSAGE)
            status = r.status if r is not None else "unchanged"
            out.append(
                IndexDocumentResponse(
                    index=index,
                    document_id=d.document_id,
                    status=status,
                    chunks=n_pass,
                    spans=len(d.chunks) - n_pass,
                )
            )
        return out

    def index_document(self, index: str, request: IndexDocumentRequest) -> IndexDocumentResponse:
        from evidence.ingest import chunk_document, enrich_metadata, parse_bytes

        check_index_name(index)
        if request.text is not None:
            data = request.text.encode("utf-8")
        else:
            try:
                data = base64.b64decode(request.content_base64 or "", validate=True)
            except (binascii.Error, ValueError):
                raise RequestValidationError(
                    "content_base64 is not valid base64; encode the file's bytes with standard base64",
                    field="content_base64",
                ) from None
        if len(data) > self.settings.max_document_bytes:
            raise PayloadTooLargeError(
                f"document is {len(data)} bytes; the limit is {self.settings.max_document_bytes}",
                field="content",
            )
        metadata = enrich_metadata(dict(request.metadata))
        document_id = request.document_id or request.filename
        parsed = parse_bytes(data, filename=request.filename, content_type=request.content_type)
        source = str(metadata.get("FILENAME") or request.filename)
        chunks = chunk_document(
            parsed,
            document_id=document_id,
            source=source,
            metadata=metadata,
            passage_tokens=self.settings.passage_tokens,
            overlap=self.settings.passage_overlap,
        )
        return self.write_documents(index, [chunks])[0]

    def index_paths(
        self,
        index: str,
        paths: Sequence[Path],
        *,
        doc_type: str | None = None,
        metadata: dict[str, str] | None = None,
        progress: ProgressFn | None = None,
        embed: bool = True,
    ) -> IndexReport:
        from evidence.ingest import SourceFailure, iter_sources

        check_index_name(index)
        start = time.perf_counter()
        report = IndexReport()
        batch: list[DocumentChunks] = []
        done = 0

        def flush() -> None:
            nonlocal done
            if batch:
                report.indexed.extend(self.write_documents(index, batch, embed=embed))
                done += len(batch)
                batch.clear()
                if progress:
                    progress(done, None, "documents")

        self._ensure_index(index, embed=embed)
        bulk = getattr(self.backend, "bulk", None)
        with bulk(index) if bulk is not None else nullcontext():
            for item in iter_sources(paths, doc_type=doc_type, metadata=metadata or {}):
                if isinstance(item, SourceFailure):
                    report.failed.append((item.source, item.reason))
                    continue
                try:
                    batch.append(self.chunk_source(item))
                except DocumentParseError as exc:
                    report.failed.append((exc.source, exc.reason))
                except EvidenceError as exc:
                    report.failed.append((item.source, exc.message))
                if len(batch) >= _WRITE_BATCH_DOCS:
                    flush()
            flush()
        report.seconds = time.perf_counter() - start
        return report

    def chunk_source(self, item: SourceItem) -> DocumentChunks:
        """Parse (files) and chunk one work item from `iter_sources`."""
        from evidence.ingest import chunk_document, parse_bytes

        parsed = item.parsed
        if parsed is None:
            parsed = parse_bytes(item.data or b"", filename=item.filename, content_type=item.content_type)
        s = self.settings
        return chunk_document(
            parsed,
            document_id=item.document_id,
            source=item.source,
            metadata=item.metadata,
            passage_tokens=s.passage_tokens,
            overlap=s.passage_overlap,
            as_record=item.as_record,
            record_max_tokens=s.record_max_tokens,
        )

    def delete_document(self, index: str, document_id: str) -> DeleteDocumentResponse:
        check_index_name(index)
        self.backend.get_index(index)
        n = self.backend.delete_document(index, document_id)
        if n == 0:
            raise DocumentNotFoundError(
                f"document {document_id!r} is not in index {index!r}", field="document_id"
            )
        return DeleteDocumentResponse(index=index, document_id=document_id, deleted_chunks=n)

    # --- querying -------------------------------------------------------------------------

    def query_vector(self, index: str, text: str) -> np.ndarray | None:
        info = self.backend.get_index(index)
        if info.embedder_id in ("", LEXICAL_ONLY) or info.dimension == 0:
            return None
        emb = self.embedder
        if info.embedder_id != emb.model_id or info.dimension != emb.dimension:
            raise EmbedderMismatchError(
                f"index {index!r} was built with {info.embedder_id} ({info.dimension} dims) but this "
                f"service embeds queries with {emb.model_id} ({emb.dimension} dims); set "
                "EVIDENCE_EMBEDDER to match the index",
                field="index",
            )
        return emb.embed_query(text)

    def plan(self, request: PlanRequest) -> Plan:
        from evidence.plan.rules import rule_plan

        return rule_plan(request)

    def retrieve(self, index: str, request: RetrieveRequest) -> RetrieveResponse:
        from evidence.rank.pipeline import run_request

        check_index_name(index)
        started = time.perf_counter()
        self.backend.get_index(index)
        plan = self.plan(
            PlanRequest(
                query=request.query,
                criterion_question=request.criterion_question,
                profile=request.profile,
                filters=request.filters,
            )
        )
        return run_request(self, index, request, plan, started=started)

    def format(self, request: FormatRequest) -> FormatResponse:
        from evidence.format import format_request

        return format_request(request)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


@lru_cache(maxsize=1)
def get_service() -> EvidenceService:
    """The process-wide service (Lambda handlers, the local server): built on first call."""
    return EvidenceService(get_settings())
