"""`evidence migrate --from-store DIR --index NAME`: copy an embedded index into OpenSearch.

- Vectors are copied, never re-embedded; the target records the source's embedder id and
  dimension, and an existing target built with another embedder is refused
  (EmbedderMismatchError) before anything is written.
- The indexing settings the documents were written with (`search.written`: header rule, span
  vectors, embedding window, cache scope) are compared before anything is written: the source
  index's record with the running process's (`written`: what the copy writes the lexical field
  and places the anchor's vectors with), and an existing target's record with the source's; a
  difference is refused (IndexSettingsMismatchError, naming the setting). An index without a
  record (written before they were recorded) is not compared. The header rule alone is compared
  as writes compare it (`_refuse_other_settings`): not while the source holds no sectioned chunk,
  and against a target only when the copy or the target holds one.
- Resumable: documents go over in batches, each document's hash marker written last, and
  documents whose hash already matches on the target are skipped — a killed run is simply
  run again.
- A progress line on a terminal (documents copied / total).
- The focus span anchor's vectors (docs/opensearch.md#anchor-vectors) go with their passages
  (`anchors`, the CLI's `CachedAnchors`): read from the source store's embedding cache, placed
  on the passage indexing pools each span in; nothing is embedded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evidence.errors import (
    BackendError,
    ConfigurationError,
    EmbedderMismatchError,
    IndexNotFoundError,
    IndexSettingsMismatchError,
)
from evidence.progress import ProgressFn
from evidence.records import Chunk, DocumentChunks

if TYPE_CHECKING:
    from evidence.embed.cache import CachedEmbedder
    from evidence.search.base import AnchorVectors, IndexInfo, SearchBackend, Vector
    from evidence.search.embedded import EmbeddedBackend
    from evidence.search.headers import SectionHeaders

#: A document's anchor vectors by chunk position (`Indexing._embed_late_kept`'s shape).
Anchors = Callable[[DocumentChunks], Mapping[int, "AnchorVectors"]]


@dataclass
class MigrateReport:
    source_index: str
    target_index: str
    embedder_id: str
    dimension: int
    documents: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    chunks: int = 0
    #: Anchor span vectors written with the passages of the documents created or updated.
    anchor_spans: int = 0
    failed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_index": self.source_index,
            "target_index": self.target_index,
            "embedder_id": self.embedder_id,
            "dimension": self.dimension,
            "documents": self.documents,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "chunks": self.chunks,
            "anchor_spans": self.anchor_spans,
            "failed": self.failed,
        }


def _embedded_documents(
    source: EmbeddedBackend, index: str
) -> Iterable[tuple[DocumentChunks, Vector | None]]:
    from evidence.search.embedded import iter_chunks

    return iter_chunks(source, index)


def migrate(
    source: SearchBackend,
    target: SearchBackend,
    index: str,
    *,
    target_index: str | None = None,
    batch_size: int = 100,
    documents: Iterable[tuple[DocumentChunks, Vector | None]] | None = None,
    progress: ProgressFn | None = None,
    anchors: Anchors | None = None,
    written: Mapping[str, str] | None = None,
) -> MigrateReport:
    """Copy `index` from `source` to `target` (`documents` defaults to the embedded store's).

    `anchors`: each document's anchor vectors (`CachedAnchors`), written with its passages when
    the target keeps them (`search.base.AnchorVectorStore`: OpenSearch); None copies none.
    `written`: the running process's indexing settings (`search.written.written_with`), compared
    with the source's record (`_refuse_other_settings`); None compares only source and target."""
    from evidence.search.base import AnchorVectorStore, sectioned

    dest = target_index or index
    info = source.get_index(index)
    try:
        existing = target.get_index(dest)
    except IndexNotFoundError:
        existing = None
    if existing is not None and (existing.embedder_id, existing.dimension) != (
        info.embedder_id,
        info.dimension,
    ):
        raise EmbedderMismatchError(
            f"target index {dest!r} holds {existing.embedder_id!r} ({existing.dimension} dims) vectors; "
            f"the source {index!r} was built with {info.embedder_id!r} ({info.dimension} dims). "
            "Migrate into a new index name (--target-index)",
            field="index",
        )
    sectionless = _refuse_other_settings(
        index,
        info,
        dest,
        existing,
        written,
        source_sections=_probe(source, index),
        target_sections=_probe(target, dest),
    )
    target.create_index(dest, embedder_id=info.embedder_id, dimension=info.dimension)
    if documents is None:
        from evidence.search.embedded import EmbeddedBackend

        if not isinstance(source, EmbeddedBackend):
            raise ConfigurationError("migrate reads documents from an embedded store; pass `documents`")
        documents = _embedded_documents(source, index)

    report = MigrateReport(index, dest, info.embedder_id, info.dimension)
    total = info.documents or None
    batch: list[tuple[DocumentChunks, Vector | None]] = []

    def flush() -> None:
        if not batch:
            return
        docs = [d for d, _ in batch]
        kept: list[Mapping[int, AnchorVectors]] = []  # by document, when the target keeps them
        try:
            if anchors is not None and isinstance(target, AnchorVectorStore):
                kept = [anchors(d) for d in docs]
                results = target.upsert(  # type: ignore[call-arg]
                    dest, docs, [v for _, v in batch], anchor_vectors=kept
                )
            else:
                results = target.upsert(dest, docs, [v for _, v in batch])
        except BackendError as exc:
            # Per-item failures: the rest of the batch is written; the run reports and goes on.
            report.failed.append(str(exc.message))
            results = []
        counts = [sum(len(a.spans) for a in k.values()) for k in kept]
        spans = {d.document_id: n for d, n in zip(docs, counts, strict=False)}
        for result in results:
            setattr(report, result.status, getattr(report, result.status) + 1)
            if result.status != "unchanged":
                report.anchor_spans += spans.get(result.document_id, 0)
            report.chunks += result.passages + result.spans
        report.documents += len(batch)
        batch.clear()
        if progress is not None:
            progress(report.documents, total, "documents")

    for doc, vecs in documents:
        if sectionless is not None and sectioned([doc]):
            # The source took a sectioned document after the check found none (another writer,
            # under the index's rule): the header rule let through no longer holds for it.
            raise IndexSettingsMismatchError(
                f"document {doc.document_id!r} of index {index!r} has a section, but the index held "
                f"none when migrate compared its settings, so another {sectionless} was let through; "
                "nothing of this batch was written: run migrate again (it resumes, and compares the "
                "index as it then is)",
                field=sectionless,
            )
        batch.append((doc, vecs))
        if len(batch) >= batch_size:
            flush()
    flush()
    return report


def _probe(backend: SearchBackend, index: str) -> Callable[[], bool]:
    """Whether `index` of `backend` holds a sectioned chunk (`search.base.SectionsProbe`), asked
    once at most; a backend that cannot tell is taken as holding one (the header rule compared)."""
    from functools import cache

    from evidence.search.base import SectionsProbe

    @cache
    def probe() -> bool:
        return not isinstance(backend, SectionsProbe) or backend.has_sections(index)

    return probe


def _refuse_other_settings(
    index: str,
    info: IndexInfo,
    dest: str,
    existing: IndexInfo | None,
    written: Mapping[str, str] | None,
    *,
    source_sections: Callable[[], bool],
    target_sections: Callable[[], bool],
) -> str | None:
    """IndexSettingsMismatchError, before anything is written, when the source index's documents
    were written under other indexing settings than the running process's (`written`: the copy
    writes the lexical field under its header rule and reads the anchor's vectors in its cache
    scope and window) or than an existing target's documents. Records compare on the settings
    both hold (`search.written.first_difference`), a lexical-only source without the vector keys
    (`search.written.VECTOR_KEYS`); an index without one is not compared.

    The header rule as writes decide it (`search.written.HEADER_KEYS`): another rule than the
    source's is not refused while the source holds no sectioned chunk (`source_sections`: the
    embedded store's seek), and the copy then carries the process's rule (what a write records);
    another rule than an existing target's is refused when the copied documents or the target
    hold a sectioned chunk (`target_sections`: OpenSearch's count, as its `create_index` asks;
    its `upsert` would refuse the sectioned batches). Returns the header setting let through
    because nothing was sectioned (the copy must then stay sectionless), else None."""
    from evidence.search.written import EXTRA_KEY, HEADER_KEYS, refuse_difference

    source = info.extra.get(EXTRA_KEY)
    let_through = refuse_difference(
        source, written, _source_message(index), dimension=info.dimension, has_sections=source_sections
    )
    if source is not None and written is not None and let_through is not None:
        # Let through: the source holds no sectioned chunk. The copy is the process's rule, as a
        # write into such an index records it.
        source = {k: v for k, v in source.items() if k not in HEADER_KEYS}
        source.update((k, v) for k, v in written.items() if k in HEADER_KEYS)
    copied = source or written
    recorded = existing.extra.get(EXTRA_KEY) if existing is not None else None
    into_target = refuse_difference(
        recorded,
        copied,
        lambda name, stored, copied: (
            f"target index {dest!r} was written with {name}={stored!r}; the documents of {index!r} "
            f"were written with {name}={copied!r}. Migrate into a new index name (--target-index)"
        ),
        dimension=info.dimension,
        has_sections=lambda: source_sections() or target_sections(),
    )
    let_through = let_through or into_target
    return None if let_through is None else let_through[0]


def _source_message(index: str) -> Callable[[str, str, str], str]:
    return lambda name, stored, running: (
        f"index {index!r} of the store was written with {name}={stored!r}, but this run has "
        f"{name}={running!r}: set EVIDENCE_{name.upper()}={stored} (the store's setting) and run "
        "migrate again, or index the documents again under the current settings first (into a "
        f"new index name, or after `evidence delete --index {index} --all`: the store refuses "
        "to mix them into this one)"
    )


class CachedAnchors:
    """A document's anchor vectors as indexing against OpenSearch keeps them
    (`Indexing._embed_late_kept`), read from an embedded store's embedding cache instead of
    embedded: each anchor span's late vector (`embed.late.late_key` with the document's content
    hash, else `legacy_late_key`, as the query-time read `span_rank.LateVectors` falls back) on
    the passage `embed.late.late_ranges` pools it in, and the cached own vector of each of those
    spans' headings. A span (or heading) the cache lacks is left out: the anchor's no-op for it,
    as on the source. Placing needs each passage input's first-window length, so a document with
    a cached late vector is **tokenized** (`first_window_chars`: the tokenizer only, no model run;
    the encodings are not kept, as indexing keeps them for its pass: none follows here).

    `embedder`: the source's document embedder in the index's cache scope; `headers`: the section
    header rule the store was indexed under (what a passage's input is, `dense_text`)."""

    def __init__(self, embedder: CachedEmbedder, headers: SectionHeaders) -> None:
        self.embedder = embedder
        self.headers = headers

    def __call__(self, doc: DocumentChunks) -> dict[int, AnchorVectors]:
        from evidence.embed.late import late_ranges, read_late
        from evidence.records import ChunkKind
        from evidence.search.base import AnchorVectors
        from evidence.verbatim.spans import anchor_spans

        spans = anchor_spans(doc.chunks)
        if not spans or not doc.content_hash:
            return {}
        late = read_late(self.embedder.cached_late, spans, [doc.content_hash] * len(spans))
        if not any(v is not None for v in late) or not self.embedder.late_capable:
            return {}
        at = [i for i, c in enumerate(doc.chunks) if c.kind is ChunkKind.PASSAGE]
        at.sort(key=lambda i: (doc.chunks[i].char_start, i))  # indexing's order (`_late_placed`)
        passages = [doc.chunks[i] for i in at]
        inputs = [self.headers.dense_text(c) for c in passages]
        # past_window=True: a span cached under either setting is placed as indexing placed it.
        # keep=False: no pass follows to take the encodings (placing is all migrate tokenizes for).
        placed = late_ranges(passages, inputs, self.embedder.first_window_chars(inputs, keep=False), spans)
        held: dict[int, list[tuple[Chunk, Vector]]] = {}
        for span, vec, rng in zip(spans, late, placed, strict=True):
            if vec is not None and rng is not None:
                held.setdefault(at[rng.passage], []).append((span, vec))
        names = list(dict.fromkeys(s.section for h in held.values() for s, _ in h if s.section))
        cached = self.embedder.cached_documents(names)
        heads = {n: v for n, v in zip(names, cached, strict=True) if v is not None}
        return {
            ci: AnchorVectors(
                {s.sequence: v for s, v in h},
                {s.section: heads[s.section] for s, _ in h if s.section in heads},
            )
            for ci, h in sorted(held.items())
        }
