"""The service: what handlers, the CLI and the local server call.

index / delete / retrieve / plan / format. Dependencies (backend, embedder,
reranker) are built lazily from settings, or injected by tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.config import Settings, get_settings
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
)

if TYPE_CHECKING:
    from evidence.embed.base import Embedder
    from evidence.search.base import SearchBackend

ProgressFn = Callable[[int, int | None, str], None]


@dataclass
class IndexReport:
    """Outcome of indexing many inputs: nothing else is lost when one input fails."""

    indexed: list[IndexDocumentResponse] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)

    @property
    def chunks(self) -> int:
        return sum(r.chunks for r in self.indexed)


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

    # Implemented below by the foundation; signatures are the contract other modules code against.
    def index_document(self, index: str, request: IndexDocumentRequest) -> IndexDocumentResponse:
        raise NotImplementedError

    def index_paths(
        self,
        index: str,
        paths: Sequence[Path],
        *,
        doc_type: str | None = None,
        metadata: dict[str, str] | None = None,
        progress: ProgressFn | None = None,
    ) -> IndexReport:
        raise NotImplementedError

    def delete_document(self, index: str, document_id: str) -> DeleteDocumentResponse:
        raise NotImplementedError

    def retrieve(self, index: str, request: RetrieveRequest) -> RetrieveResponse:
        raise NotImplementedError

    def plan(self, request: PlanRequest) -> Plan:
        raise NotImplementedError

    def format(self, request: FormatRequest) -> FormatResponse:
        raise NotImplementedError

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


