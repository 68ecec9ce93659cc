"""Indexing: files, folders, record sets, uploads and knowledge graphs into an index.

`EvidenceService` is an `Indexing`: these methods use its backend, embedder and coach runtime
(declared below for the type checker), and stay callable as `service.index_paths(...)`.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.errors import (
    DocumentParseError,
    EvidenceError,
    PayloadTooLargeError,
    RequestValidationError,
)
from evidence.model import IndexDocumentRequest, IndexDocumentResponse
from evidence.names import validate_index_name
from evidence.records import Chunk, ChunkKind, DocumentChunks

if TYPE_CHECKING:
    import numpy as np

    from evidence.coach.service import CoachRuntime
    from evidence.config import Settings
    from evidence.embed.base import Embedder
    from evidence.ingest import SourceFailure, SourceItem
    from evidence.search.base import AnchorVectors, SearchBackend

_WRITE_BATCH_DOCS = 256
_WRITE_BATCH_PASSAGES = 256
#: Embedder id recorded by indexes built without vectors.
LEXICAL_ONLY = "none"


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


class Indexing:
    """The service's writing half (see the module docstring)."""

    settings: Settings

    if TYPE_CHECKING:

        @property
        def backend(self) -> SearchBackend: ...

        @property
        def embedder(self) -> Embedder: ...

        def document_embedder(self, index: str) -> Embedder: ...

        @property
        def coach_runtime(self) -> CoachRuntime: ...

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

        from evidence.search.base import SettingsCheck

        self._ensure_index(index, embed=embed)
        backend = self.backend
        todo = [d for d in docs if backend.document_hash(index, d.document_id) != d.content_hash]
        vectors: list[np.ndarray | None] = [None] * len(todo)
        anchors: list[dict[int, AnchorVectors]] | None = None
        if todo and isinstance(backend, SettingsCheck):
            # A backend that decides on the batch (OpenSearch: a header rule alone is refused for
            # sectioned chunks, which `_ensure_index` could not see) refuses before the embedding.
            backend.check_documents(index, todo)
        if todo and embed:
            from evidence.search.headers import SectionHeaders

            # What a passage's vector embeds: title + text, with its section header under a
            # header rule (docs/ingest.md#section-headers).
            headers = SectionHeaders.from_settings(self.settings)
            texts: list[str] = []
            owners: list[tuple[int, int]] = []  # (doc position, chunk position) of each passage
            for di, d in enumerate(todo):
                for ci, c in enumerate(d.chunks):
                    if c.kind is ChunkKind.PASSAGE:
                        texts.append(headers.dense_text(c))
                        owners.append((di, ci))
            embedder = self.document_embedder(index)
            self._drop_legacy_late(todo, embedder)
            n_passages = len(texts)
            if self._late(embedder):
                emb = self._embed_late(todo, texts, owners, embedder)
            elif self._late_kept(embedder):
                emb, anchors = self._embed_late_kept(todo, texts, owners, embedder)
            else:
                # The spans' texts after the passages (`embed_documents` caches slice by slice, and
                # checks the deadline between slices: a retry after a deadline resumes with them).
                texts.extend(self._span_texts(todo, embedder))
                emb = embedder.embed_documents(texts) if texts else np.empty((0, embedder.dimension))
                emb = emb[:n_passages]
            # Rows stay NaN ("no vector") for fact spans: they are found lexically, and a span's
            # vector, when embedded here at all (`_span_texts`), lives in the embedding cache only.
            mats = [np.full((len(d.chunks), self.embedder.dimension), np.nan, dtype=np.float32) for d in todo]
            for (di, ci), vec in zip(owners, emb, strict=True):
                mats[di][ci] = vec
            vectors = list(mats)
        # Only documents that changed reach the backend, so only they have a result.
        if anchors is not None:
            # A backend with no embedding cache keeps the anchor's vectors with the passages.
            written = backend.upsert(index, todo, vectors, anchor_vectors=anchors)  # type: ignore[call-arg]
        else:
            written = backend.upsert(index, todo, vectors) if todo else []
        results = {r.document_id: r for r in written}
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

    def _with_headers(self, chunks: DocumentChunks) -> DocumentChunks:
        """`chunks` with the section header rule in its content hash (unchanged when off), so a
        store indexed under another rule re-indexes (docs/ingest.md#section-headers)."""
        from evidence.search.headers import SectionHeaders

        return SectionHeaders.from_settings(self.settings).hashed(chunks)

    def _span_texts(self, docs: Sequence[DocumentChunks], embedder: Embedder) -> list[str]:
        """With `embed_spans_at_index`, the texts the span scorer would embed for `docs`' spans
        (`verbatim.spans.span_embedding_texts`), so that a question finds them in the store's
        embedding cache; none without the setting or without a persistent cache to put them in
        (OpenSearch: docs/ingest.md#span-vectors-at-indexing). Text already cached (unchanged
        spans of a changed document, a repeated sentence) costs no inference."""
        from evidence.config import SpanVectors

        if self.settings.embed_spans_at_index is not SpanVectors.OWN:
            return []
        from evidence.embed.cache import CachedEmbedder

        if not isinstance(embedder, CachedEmbedder):
            return []
        from evidence.verbatim.spans import span_embedding_texts

        out: dict[str, None] = {}
        for d in docs:
            out.update(dict.fromkeys(span_embedding_texts(d.chunks)))
        return list(out)

    @staticmethod
    def _drop_legacy_late(docs: Sequence[DocumentChunks], embedder: Embedder) -> None:
        """Delete the late vectors that stores written before session 47 keep for `docs`' spans
        under a key naming no content (`embed.late.legacy_late_key`; read when the new key finds
        nothing): before the documents are written, under every setting, so that an old-format
        vector is read only for a document no later write changed (docs/ingest.md#late-span-vectors)."""
        from evidence.embed.cache import CachedEmbedder

        if not isinstance(embedder, CachedEmbedder):
            return
        from evidence.embed.late import legacy_late_key

        embedder.drop_late([legacy_late_key(c) for d in docs for c in d.chunks if c.kind is ChunkKind.SPAN])

    def _late(self, embedder: Embedder) -> bool:
        """`EVIDENCE_EMBED_SPANS_AT_INDEX=late` with a persistent cache and a model that gives
        late-chunked vectors (MiniLM behind the store's cache, in process or in `serve`'s
        document-embedding process); anywhere else (OpenSearch, a remote model) no span vector is
        made (docs/ingest.md#span-vectors-at-indexing)."""
        from evidence.config import SpanVectors

        if self.settings.embed_spans_at_index is not SpanVectors.LATE:
            return False
        from evidence.embed.cache import CachedEmbedder

        return isinstance(embedder, CachedEmbedder) and embedder.late_capable

    def _late_kept(self, embedder: Embedder) -> bool:
        """`EVIDENCE_EMBED_SPANS_AT_INDEX=late` on a backend that keeps the anchor's vectors with
        its passages (`search.base.AnchorVectorStore`: OpenSearch, no embedding cache) and a model
        that gives late-chunked vectors (MiniLM): `_embed_late_kept` (docs/opensearch.md#anchor-vectors)."""
        from evidence.config import SpanVectors
        from evidence.embed.base import LateEmbedder
        from evidence.search.base import AnchorVectorStore

        return (
            self.settings.embed_spans_at_index is SpanVectors.LATE
            and isinstance(self.backend, AnchorVectorStore)
            and isinstance(embedder, LateEmbedder)
            and bool(getattr(embedder, "late_capable", True))
        )

    def _late_placed(
        self, docs: Sequence[DocumentChunks], texts: list[str], owners: list[tuple[int, int]], embedder: Any
    ) -> tuple[list[list[tuple[int, int]]], list[list[tuple[Chunk, str]]], dict[str, None]]:
        """Each passage input's late ranges (`embed.late.late_ranges`), the span of each range with
        its document's content hash (what `late_key` reads), and the anchor spans' distinct
        headings: what `_embed_late` and `_embed_late_kept` pool."""
        from evidence.embed.late import late_ranges
        from evidence.verbatim.spans import anchor_spans

        first = embedder.first_window_chars(texts) if texts else []
        ranges: list[list[tuple[int, int]]] = [[] for _ in texts]
        wanted: list[list[tuple[Chunk, str]]] = [[] for _ in texts]  # each range's span, its document's hash
        by_doc: dict[int, list[int]] = {}
        for t, (di, _) in enumerate(owners):
            by_doc.setdefault(di, []).append(t)
        headings: dict[str, None] = {}
        for di, d in enumerate(docs):
            spans = anchor_spans(d.chunks)
            if not spans or di not in by_doc:
                continue
            order = sorted(by_doc[di], key=lambda t: (d.chunks[owners[t][1]].char_start, owners[t][1]))
            passages = [d.chunks[owners[t][1]] for t in order]
            placed = late_ranges(
                passages,
                [texts[t] for t in order],
                [first[t] for t in order],
                spans,
                past_window=self.settings.late_spans_past_window,
            )
            for span, rng in zip(spans, placed, strict=True):
                if rng is None:
                    continue
                t = order[rng.passage]
                ranges[t].append((rng.start, rng.end))
                wanted[t].append((span, d.content_hash))
            headings.update(dict.fromkeys(c.section for c in spans if c.section))
        return ranges, wanted, headings

    def _embed_late_kept(
        self, docs: Sequence[DocumentChunks], texts: list[str], owners: list[tuple[int, int]], embedder: Any
    ) -> tuple[Any, list[dict[int, AnchorVectors]]]:
        """`_embed_late` for a backend with no embedding cache (OpenSearch): the passages' vectors
        (bit-identical to `embed_documents`'), and, per document by chunk position, what each
        passage keeps for the anchor (`search.base.AnchorVectors`): the late vector of every
        anchor span pooled in it (`late_ranges`: the same vector the embedded store caches, kept
        once) and the own vectors of those spans' headings. Passes of 32 passages (`in_slices`), the deadline
        checked between them."""
        import numpy as np

        from evidence.embed.cache import in_slices
        from evidence.search.base import AnchorVectors

        ranges, wanted, _ = self._late_placed(docs, texts, owners, embedder)
        vectors = np.empty((len(texts), embedder.dimension), dtype=np.float32)
        pooled_in: list[list[tuple[Chunk, Any]]] = [[] for _ in texts]

        def embed(part: list[int]) -> Any:
            return embedder.embed_documents_and_late([texts[t] for t in part], [ranges[t] for t in part])

        for part, (fresh, pooled) in in_slices(range(len(texts)), embed, "embedding the document's passages"):
            vectors[part] = fresh
            for t, vecs in zip(part, pooled, strict=True):
                pooled_in[t] = [(s, v) for (s, _), v in zip(wanted[t], vecs, strict=True) if v is not None]
        names = list(dict.fromkeys(s.section for held in pooled_in for s, _ in held if s.section))
        heads = dict(zip(names, embedder.embed_documents(names), strict=True)) if names else {}
        out: list[dict[int, AnchorVectors]] = [{} for _ in docs]
        for (di, ci), held in zip(owners, pooled_in, strict=True):
            if held:
                out[di][ci] = AnchorVectors(
                    {s.sequence: v for s, v in held},
                    {s.section: heads[s.section] for s, _ in held if s.section},
                )
        return vectors, out

    def _embed_late(
        self, docs: Sequence[DocumentChunks], texts: list[str], owners: list[tuple[int, int]], embedder: Any
    ) -> Any:
        """The passages' vectors (`texts`, owned by `owners`: bit-identical to `embed_documents`'),
        and, into the cache, every anchor span's late-chunked vector (`embed.late`, keyed by
        `late_key`: its document's content hash, id, offsets and text) and its heading's own
        vector (ordinary key: what the `verbatim` scorer would embed for it)."""
        from evidence.embed.late import late_key

        ranges, wanted, headings = self._late_placed(docs, texts, owners, embedder)
        vectors, late = embedder.embed_late(texts, ranges)
        embedder.put_late(
            [
                (late_key(span, document_hash), vec)
                for held, vecs in zip(wanted, late, strict=True)
                for (span, document_hash), vec in zip(held, vecs, strict=True)
                if vec is not None
            ]
        )
        if headings:
            embedder.embed_documents(list(headings))
        return vectors

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
        chunks = self._with_headers(chunks)
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
        chunks = self._with_headers(chunks)
        # Records (BEIR, JSONL) are retrieval units, not documents with sections and a subject.
        return chunks if item.as_record else annotate_chunks(chunks, parsed)
