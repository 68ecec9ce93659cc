"""The Embedder port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    #: Recorded by every index; a query or migration with another id is refused.
    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """(len(texts), dimension) float32, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> Matrix:
        """(dimension,) float32, L2-normalised."""
        ...


@runtime_checkable
class PieceEmbedder(Embedder, Protocol):
    """An Embedder that also gives texts' contextual word-piece vectors (a local MiniLM), and both
    from one forward pass. The verbatim span scorer reads a span's pooled vector and its pieces;
    on a store that has cached neither, one pass gives the two (`CachedEmbedder.embed_with_pieces`;
    with no store cache in front, `verbatim.span_rank.IndexEmbed.with_pieces`). `evidence serve`'s
    document embedder (`embed.background`) gives both from its in-process model. An embedder
    without `embed_documents_and_tokens` (a remote model) is asked twice, as before."""

    #: What its word pieces depend on besides the text: the key of their cache (`embed.pieces`).
    piece_key: str

    def embed_tokens(self, texts: Sequence[str]) -> list[Matrix]:
        """Each text's word-piece vectors, (pieces, dimension), rows L2-normalised."""
        ...

    def embed_documents_and_tokens(self, texts: Sequence[str]) -> tuple[Matrix, list[Matrix]]:
        """`embed_documents(texts)` and `embed_tokens(texts)` from one forward pass per model
        input: the same bits as the two calls."""
        ...


@runtime_checkable
class LateEmbedder(Embedder, Protocol):
    """An Embedder that gives, from a text's own forward pass, the late-chunked vectors of
    character ranges of it (a local MiniLM; `embed.late`)."""

    def first_window_chars(self, texts: Sequence[str], *, keep: bool = True) -> list[int]:
        """How many characters of each text the window `embed_documents` reads covers. `keep`:
        the embedder may keep the texts' encodings for an `embed_documents_and_late` of the same
        texts to take (indexing); False when no such call follows (migrate places spans only)."""
        ...

    def embed_documents_and_late(
        self, texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[Matrix, list[list[Matrix | None]]]:
        """`embed_documents(texts)` (same bits) and each range's pooled word-piece vector."""
        ...


def document_key(embedder: Embedder) -> str:
    """What a document vector depends on besides its text: the model id, and the rule of an
    embedder that reads a long text in windows or truncates it to another window than the default
    (`MiniLMEmbedder.document_rule`; empty for truncation to the default window, so vectors cached
    before windows stay valid for it). Cached vectors and eval indexes are keyed by it, so a
    vector made under another rule or window is never reused."""
    rule = getattr(embedder, "document_rule", "")
    return f"{embedder.model_id}+{rule}" if rule else embedder.model_id
