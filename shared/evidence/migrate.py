"""`evidence migrate --from-store DIR --index NAME`: copy an embedded index into OpenSearch.

- Vectors are copied, never re-embedded; the target records the source's embedder id and
  dimension, and an existing target built with another embedder is refused
  (EmbedderMismatchError) before anything is written.
- Resumable: documents go over in batches, each document's hash marker written last, and
  documents whose hash already matches on the target are skipped — a killed run is simply
  run again.
- A progress line on a terminal (documents copied / total).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evidence.errors import BackendError, ConfigurationError, EmbedderMismatchError, IndexNotFoundError
from evidence.progress import ProgressFn
from evidence.records import DocumentChunks

if TYPE_CHECKING:
    from evidence.search.base import SearchBackend, Vector
    from evidence.search.embedded import EmbeddedBackend


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
) -> MigrateReport:
    """Copy `index` from `source` to `target` (`documents` defaults to the embedded store's)."""
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
        try:
            results = target.upsert(dest, docs, [v for _, v in batch])
        except BackendError as exc:
            # Per-item failures: the rest of the batch is written; the run reports and goes on.
            report.failed.append(str(exc.message))
            results = []
        for result in results:
            setattr(report, result.status, getattr(report, result.status) + 1)
            report.chunks += result.passages + result.spans
        report.documents += len(batch)
        batch.clear()
        if progress is not None:
            progress(report.documents, total, "documents")

    for doc, vecs in documents:
        batch.append((doc, vecs))
        if len(batch) >= batch_size:
            flush()
    flush()
    return report
