"""The service: what handlers, the CLI and the local server call.

index / delete / retrieve / plan / format, and the coach (knowledge graphs, seed 004).
Dependencies (backend, embedder, reranker) are built lazily from settings on first use, or
injected by tests.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.config import BackendKind, EmbedderKind, HybridMode, Settings, get_settings
from evidence.errors import (
    BadRequestError,
    ConfigurationError,
    DocumentNotFoundError,
    DocumentParseError,
    EmbedderMismatchError,
    EvidenceError,
    PayloadTooLargeError,
    RequestValidationError,
)
from evidence.model import (
    AnswerTelemetry,
    DeleteDocumentResponse,
    FormatRequest,
    FormatResponse,
    IndexDocumentRequest,
    IndexDocumentResponse,
    IndexSummary,
    ListIndexesResponse,
    Plan,
    PlanRequest,
    RetrieveRequest,
    RetrieveResponse,
    StageTelemetry,
    Telemetry,
)
from evidence.names import validate_index_name
from evidence.records import ChunkKind, DocumentChunks

if TYPE_CHECKING:
    import numpy as np

    from evidence.coach.contract import CoachRequest, CoachResponse
    from evidence.coach.service import CoachRuntime
    from evidence.embed.base import Embedder
    from evidence.format.evidence import EvidenceDocument
    from evidence.ingest import SourceFailure, SourceItem
    from evidence.profiles import Extras, ProfileEnv
    from evidence.rank.candidate import Candidate
    from evidence.rank.confidence import AnswerSignal
    from evidence.rank.pipeline import RankOutcome
    from evidence.rank.rerank import Reranker
    from evidence.search.base import DocumentInfo, IndexInfo, SearchBackend

log = logging.getLogger(__name__)

_WRITE_BATCH_DOCS = 256
_WRITE_BATCH_PASSAGES = 256
#: Embedder id recorded by indexes built without vectors.
LEXICAL_ONLY = "none"


@dataclass(frozen=True)
class ProfileRun:
    """One request's run through its profile (`EvidenceService.run_profile`)."""

    plan: Plan
    outcome: RankOutcome
    signal: AnswerSignal
    withheld: bool
    kept: list[Candidate]
    evidence: EvidenceDocument
    extras: Extras
    degraded: list[str]
    ms: float


@dataclass(frozen=True, slots=True)
class IndexProgress:
    """Where `index_paths` is: after each input file and after each write."""

    files: int  # input files read (a failed one counts), of `total_files`
    total_files: int | None
    documents: int  # documents written
    passages: int  # passages written
    failed: int
    current: str  # the file last read


@dataclass
class IndexReport:
    """Outcome of indexing many inputs: nothing else is lost when one input fails."""

    indexed: list[IndexDocumentResponse] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    seconds: float = 0.0
    #: Inputs refused as invalid (a knowledge graph with a cycle, ...): nothing of them was written.
    refused: int = 0

    @property
    def chunks(self) -> int:
        return sum(r.chunks for r in self.indexed)

    def count(self, status: str) -> int:
        return sum(1 for r in self.indexed if r.status == status)


def content_document_id(filename: str, data: bytes) -> str:
    """The id of an upload the caller did not name: its file name and a hash of its bytes.

    Two different uploads never share it (two vendors' `policy.pdf` stay two documents), and the
    same bytes uploaded again are the same document (a no-op). To REPLACE a document with a new
    version, name it: pass `document_id`.
    """
    import hashlib

    return f"{filename}@{hashlib.sha256(data).hexdigest()[:16]}"


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
        reranker: Reranker | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self._backend = backend
        self._embedder = embedder
        self._reranker = reranker
        self._reranker_built = reranker is not None
        self._lock = threading.Lock()
        self._coach: CoachRuntime | None = None

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

    def document_embedder(self, index: str) -> Embedder:
        """The embedder for `index`'s documents: its cache reads and writes `index`'s vectors only,
        unless EVIDENCE_EMBEDDING_CACHE_SCOPE=shared."""
        from evidence.config import EmbeddingCacheScope
        from evidence.embed.cache import CachedEmbedder

        emb = self.embedder
        if (
            isinstance(emb, CachedEmbedder)
            and self.settings.embedding_cache_scope is EmbeddingCacheScope.INDEX
        ):
            return emb.scoped(f"index:{index}")
        return emb

    @property
    def reranker(self) -> Reranker | None:
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
            embedder = self.document_embedder(index)
            emb = embedder.embed_documents(texts) if texts else np.empty((0, embedder.dimension))
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

    def document_data(self, request: IndexDocumentRequest) -> bytes:
        """The upload's bytes (its text, or its base64 decoded), within the document size limit."""
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
        return data

    def index_document(self, index: str, request: IndexDocumentRequest) -> IndexDocumentResponse:
        from evidence.ingest import chunk_document, enrich_metadata, parse_bytes
        from evidence.ingest.sections import annotate_chunks

        check_index_name(index)
        data = self.document_data(request)
        metadata = enrich_metadata(dict(request.metadata))
        document_id = request.document_id or content_document_id(request.filename, data)
        from evidence.coach.service import is_graph

        if is_graph(metadata):
            return self._graph_response(
                index,
                self.coach_runtime.index_graph(
                    index, data, filename=request.filename, graph_id=document_id, metadata=metadata
                ),
            )
        parsed = parse_bytes(data, filename=request.filename, content_type=request.content_type)
        # What an LLM reads in <source>: seed 000's FILENAME when given, else the document's id
        # (the caller's, an s3:// URI, or the content-derived one), which tells documents apart.
        source = str(metadata.get("FILENAME") or document_id)
        chunks = chunk_document(
            parsed,
            document_id=document_id,
            source=source,
            metadata=metadata,
            passage_tokens=self.settings.passage_tokens,
            overlap=self.settings.passage_overlap,
        )
        from evidence.retry import check_deadline

        check_deadline("parsing the document")
        return self.write_documents(index, [annotate_chunks(chunks, parsed)])[0]

    def index_paths(
        self,
        index: str,
        paths: Sequence[Path],
        *,
        doc_type: str | None = None,
        metadata: dict[str, str] | None = None,
        progress: Callable[[IndexProgress], None] | None = None,
        embed: bool = True,
        follow_symlinks: bool = False,
    ) -> IndexReport:
        """Index files, folders, BEIR corpora and record JSONL; one bad input fails alone.

        Symlinked files in a folder are indexed when their target lies inside that folder, or
        anywhere with `follow_symlinks`; every file skipped is in `failed` with its reason.

        `progress` is told after each input file and each write (`evidence index`'s bar)."""
        from evidence.ingest.sources import SourceFailure, file_items, iter_inputs, source_overrides
        from evidence.search.base import BulkLoading

        check_index_name(index)
        start = time.perf_counter()
        report = IndexReport()
        batch: list[DocumentChunks] = []
        # Listing the inputs first (no reading) gives the bar its total; without a bar, stream.
        listed = iter_inputs(paths, follow_symlinks=follow_symlinks)
        inputs = list(listed) if progress else listed
        total = len(inputs) if isinstance(inputs, list) else None
        files = pending = 0  # input files read; passages waiting in `batch`
        current = ""

        def tell() -> None:
            if progress:
                progress(
                    IndexProgress(
                        files=files,
                        total_files=total,
                        documents=len(report.indexed),
                        passages=report.chunks,
                        failed=len(report.failed),
                        current=current,
                    )
                )

        def flush() -> None:
            nonlocal pending
            if batch:
                report.indexed.extend(self.write_documents(index, batch, embed=embed))
                batch.clear()
                pending = 0
                tell()

        overrides = source_overrides(doc_type, metadata)
        self._ensure_index(index, embed=embed)
        backend = self.backend
        with backend.bulk(index) if isinstance(backend, BulkLoading) else nullcontext():
            for entry in inputs:
                if isinstance(entry, SourceFailure):
                    report.failed.append((entry.source, entry.reason))
                else:
                    current = str(entry)
                    for item in file_items(entry, overrides):
                        pending += self._add_item(item, batch, report)
                        # Bounded by passages as well: a few long files are minutes of embedding,
                        # and the bar should move while they are written.
                        if len(batch) >= _WRITE_BATCH_DOCS or pending >= _WRITE_BATCH_PASSAGES:
                            flush()
                files += 1
                tell()
            flush()
        report.seconds = time.perf_counter() - start
        return report

    def _add_item(
        self, item: SourceItem | SourceFailure, batch: list[DocumentChunks], report: IndexReport
    ) -> int:
        """Chunk one work item into `batch` (or record its failure); returns its passage count."""
        from evidence.ingest.sources import SourceFailure

        if isinstance(item, SourceFailure):
            report.failed.append((item.source, item.reason))
            return 0
        try:
            doc = self.chunk_source(item)
        except DocumentParseError as exc:
            # Named as the item's source (its path as shown everywhere), not the parser's filename.
            report.failed.append((item.source, exc.reason))
            return 0
        except EvidenceError as exc:
            report.failed.append((item.source, exc.message))
            return 0
        batch.append(doc)
        return sum(1 for c in doc.chunks if c.kind is ChunkKind.PASSAGE)

    def index_graph_paths(self, index: str, paths: Sequence[Path], *, embed: bool = True) -> IndexReport:
        """Knowledge-graph files (`evidence index FILE --kind graph`): each is validated whole and
        written or replaced; a refused file writes nothing and counts in `refused`."""
        from evidence.graph import GraphValidationError, is_graph_filename
        from evidence.ingest.sources import file_identity

        check_index_name(index)
        start = time.perf_counter()
        report = IndexReport()
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*") if p.is_file() and is_graph_filename(p.name)))
            elif path.is_file():
                files.append(path)
            else:
                report.failed.append((str(path), "no such file or folder"))
        for file in files:
            graph_id, source = file_identity(file)
            try:
                data = file.read_bytes()
                result = self.coach_runtime.index_graph(
                    index, data, filename=file.name, graph_id=graph_id, embed=embed
                )
            except OSError as exc:
                report.failed.append((str(file), f"cannot read: {exc.strerror or exc}"))
                continue
            except GraphValidationError as exc:
                report.failed.append((source, exc.message))
                report.refused += 1
                continue
            except EvidenceError as exc:
                report.failed.append((source, exc.message))
                continue
            report.indexed.append(self._graph_response(index, result))
        report.seconds = time.perf_counter() - start
        return report

    @staticmethod
    def _graph_response(index: str, report: Any) -> IndexDocumentResponse:
        """A graph as one document of the index: `chunks` counts its nodes, `spans` their sentences."""
        return IndexDocumentResponse(
            index=index,
            document_id=report.graph_id,
            status=report.status,
            chunks=report.chunks,
            spans=report.spans,
        )

    @property
    def coach_runtime(self) -> CoachRuntime:
        if self._coach is None:
            with self._lock:
                if self._coach is None:
                    from evidence.coach.service import CoachRuntime

                    self._coach = CoachRuntime(self)
        return self._coach

    def warm(self) -> None:
        """Load the coach's models and the default index before the first request (the Lambda
        handler before its first event, `evidence serve` at start): docs/coach.md#cold-start."""
        self.coach_runtime.warm(self.settings.default_index)

    def coach(self, index: str, request: CoachRequest) -> CoachResponse:
        """Seed 004's coach request against a knowledge-graph index (docs/coach.md): the `coach`
        profile on the one path of every profile, its response the profile's extras."""
        from evidence.coach.contract import CoachResponse

        run = self.run_profile(
            index, RetrieveRequest.model_construct(query=request.query, profile="coach"), payload=request
        )
        response = run.extras.response
        if not isinstance(response, CoachResponse):
            raise TypeError("the coach profile returned no coach response")
        return response

    def chunk_source(self, item: SourceItem) -> DocumentChunks:
        """Parse (files) and chunk one work item from `iter_sources`."""
        from evidence.ingest import chunk_document, parse_bytes
        from evidence.ingest.sections import annotate_chunks

        parsed = item.parsed
        if parsed is None:
            parsed = parse_bytes(item.data or b"", filename=item.filename, content_type=item.content_type)
        s = self.settings
        chunks = chunk_document(
            parsed,
            document_id=item.document_id,
            source=item.source,
            metadata=item.metadata,
            passage_tokens=s.passage_tokens,
            overlap=s.passage_overlap,
            as_record=item.as_record,
            record_max_tokens=s.record_max_tokens,
        )
        # Records (BEIR, JSONL) are retrieval units, not documents with sections and a subject.
        return chunks if item.as_record else annotate_chunks(chunks, parsed)

    def delete_document(self, index: str, document_id: str) -> DeleteDocumentResponse:
        check_index_name(index)
        self.backend.get_index(index)
        n = self.backend.delete_document(index, document_id)
        if n == 0:
            # A knowledge graph is one document to its caller, stored as one document per node.
            n = self.coach_runtime.delete_graph(index, document_id)
        if n == 0:
            raise DocumentNotFoundError(
                f"document {document_id!r} is not in index {index!r}", field="document_id"
            )
        return DeleteDocumentResponse(index=index, document_id=document_id, deleted_chunks=n)

    def list_indexes(self) -> list[IndexInfo]:
        return self.backend.list_indexes()

    def list_documents(self, index: str) -> list[DocumentInfo]:
        """The documents of `index` with their passage and span counts (`evidence list --index`)."""
        from evidence.search.base import DocumentListing

        check_index_name(index)
        backend = self.backend
        if not isinstance(backend, DocumentListing):
            raise BadRequestError(
                f"the {self.settings.backend.value} backend cannot list documents; "
                "list them on the embedded store",
                field="index",
            )
        return backend.list_documents(index)

    def delete_index(self, index: str) -> IndexInfo:
        """Delete a whole index; returns what it held."""
        check_index_name(index)
        info = self.backend.get_index(index)
        self.backend.delete_index(index)
        from evidence.embed.cache import CachedEmbedder

        if isinstance(self._embedder, CachedEmbedder):
            self._embedder.cache.drop_scope(f"index:{index}")
        return info

    def index_summaries(
        self, visible: Callable[[Iterable[str]], list[str]] | None = None
    ) -> ListIndexesResponse:
        """`GET /v1/indexes`: every index, or those `visible` keeps (the access policy's filter)."""
        infos = {i.name: i for i in self.backend.list_indexes()}
        names = sorted(infos) if visible is None else sorted(visible(infos))
        return ListIndexesResponse(
            indexes=[
                IndexSummary(name=n, documents=infos[n].documents, chunks=infos[n].chunks) for n in names
            ]
        )

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
        return self.plan_with_markers(request)[0]

    def plan_with_markers(self, request: PlanRequest, *, index: str | None = None) -> tuple[Plan, list[str]]:
        """The plan and any degradation markers (an LLM planner that fell back to the rules)."""
        from evidence.profiles import get_plugin

        return get_plugin(request.profile).plan(request, self._env(index))

    def _env(self, index: str | None, **more: Any) -> ProfileEnv:
        from evidence.profiles import ProfileEnv

        return ProfileEnv(backend=self.backend, settings=self.settings, index=index, services=self, **more)

    def retrieve(self, index: str, request: RetrieveRequest) -> RetrieveResponse:
        """Run the request's profile and build the response from its outcome."""
        from evidence.format.hits import to_followups, to_hits

        run = self.run_profile(index, request)
        return RetrieveResponse(
            hits=to_hits(run.kept, explain=request.explain),
            followups=to_followups(run.outcome.followups),
            evidence_xml=run.evidence.xml,
            valid_indexes=run.evidence.valid_indexes,
            plan=run.plan,
            telemetry=Telemetry(
                stages=[
                    StageTelemetry(
                        name=r.name,
                        candidates_in=r.candidates_in,
                        candidates_out=r.candidates_out,
                        ms=r.ms,
                        detail=dict(r.detail) if r.detail else None,
                    )
                    for r in run.outcome.stages
                ],
                path_used=run.extras.path_used,
                degraded=run.degraded,
                total_ms=run.ms,
                answer=AnswerTelemetry(
                    basis=run.signal.basis, features=run.signal.features, withheld=run.withheld
                ),
            ),
            can_answer=run.signal.can_answer,
            confidence=run.signal.confidence,
            needs_clarification=run.extras.needs_clarification,
        )

    def run_profile(self, index: str, request: RetrieveRequest, *, payload: Any = None) -> ProfileRun:
        """The one path of every request, whatever its profile: plan, scope, stages, answer signal,
        withhold floor, span check, evidence bundle, extras; each step the profile's (its plug-in,
        `evidence.profiles`). `payload`: the request of the profile's own endpoint (the coach's)."""
        from evidence.profiles import get_plugin
        from evidence.rank.context import RankContext
        from evidence.verbatim.check import verify_spans

        check_index_name(index)
        started = time.perf_counter()
        info = self.backend.get_index(index)
        plugin = get_plugin(request.profile)
        env = self._env(index, embedder_id=info.embedder_id, reranker=self.reranker, payload=payload)
        plan, plan_degraded = plugin.plan(
            PlanRequest(
                query=request.query,
                criterion_question=request.criterion_question,
                profile=request.profile,
                filters=request.filters,
            ),
            env,
        )
        plan = plugin.scope(request.query, plan, env)
        profile = plugin.pipeline(env)
        params = profile.params({**self._deployment_defaults(profile.name), **request.overrides()})
        criterion = request.criterion_question or (request.query if plan.criterion_hash else None)
        s = self.settings
        env.query_vector = self.query_vector(index, request.query) if profile.embeds_query else None
        outcome = profile.run(
            RankContext(
                index=index,
                query=request.query,
                query_vector=env.query_vector,
                criterion_question=criterion,
                criterion_hash=plan.criterion_hash,
                params=params,
                filters=plan.filters or None,
                explain=request.explain,
                backend=self.backend,
                reranker=env.reranker,
                server_hybrid=s.backend is BackendKind.OPENSEARCH
                and s.opensearch_hybrid_mode is HybridMode.SERVER,
                plan=plan,
            )
        )
        env.degraded = [*plan_degraded, *outcome.degraded]
        signal = plugin.answer_signal(request.query, outcome, env)
        # Off unless a request or deployment asks for it: defaults never change which hits are
        # returned (seed 003), `can_answer` and `confidence` say the rest.
        floor = params.withhold_below
        withheld = bool(floor) and signal.confidence < (floor or 0.0) and bool(outcome.hits)
        kept = [] if withheld else outcome.hits
        # The verbatim guarantee: no span leaves unless it is its source's text at its offsets.
        verify_spans(self.backend, index, [c.chunk for c in kept if c.chunk.kind is ChunkKind.SPAN])
        return ProfileRun(
            plan=plan,
            outcome=outcome,
            signal=signal,
            withheld=withheld,
            kept=kept,
            evidence=plugin.bundle(kept, outcome.followups),
            extras=plugin.extras(outcome),
            degraded=env.degraded,
            ms=round((time.perf_counter() - started) * 1000.0, 3),
        )

    def _deployment_defaults(self, profile: str) -> dict[str, Any]:
        """Knob defaults this deployment sets (EVIDENCE_MIN_SIMILARITY, …, PROFILE_DEFAULTS)."""
        from evidence.rank.pipeline import validate_overrides

        s = self.settings
        out: dict[str, Any] = {}
        if s.min_similarity:
            out["min_similarity"] = s.min_similarity
        if s.max_chars:
            out["max_chars"] = s.max_chars
        try:
            out.update(validate_overrides(s.profile_defaults.get(profile, {})))
        except RequestValidationError as exc:
            raise ConfigurationError(
                f"EVIDENCE_PROFILE_DEFAULTS[{profile!r}]: {exc.message}", field="profile_defaults"
            ) from None
        return out

    def format(self, request: FormatRequest) -> FormatResponse:
        from evidence.format import format_request

        return format_request(request)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
