"""The embedder a deployment's settings name (`EVIDENCE_EMBEDDER`), and the store's embedding
cache in front of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidence.config import BackendKind, EmbedderKind, Settings

if TYPE_CHECKING:
    from evidence.embed.base import Embedder


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
        long_text=settings.embed_long_text,
    )


def with_store_cache(settings: Settings, inner: Embedder) -> Embedder:
    """`inner` behind the store's embedding cache on the embedded backend (re-indexing an
    unchanged text embeds nothing; the word-piece cache next to it, `token_cache_mb`, keeps the
    span scorer's pieces across processes); as it is elsewhere."""
    if settings.backend is not BackendKind.EMBEDDED:
        return inner
    from evidence.embed.cache import CachedEmbedder, EmbeddingCache

    cache = EmbeddingCache(
        settings.store_dir / "embeddings.sqlite3", pieces_max_bytes=settings.token_cache_mb << 20
    )
    return CachedEmbedder(inner, cache)


def drop_store_cache(settings: Settings, scope: str) -> None:
    """Forget a deleted index's cached vectors and word pieces in the store's cache files, from a
    process that never built its embedder (its first call a delete): nothing of a deleted index
    may outlive it, and loading the model to learn that would cost a delete a second."""
    path = settings.store_dir / "embeddings.sqlite3"
    if settings.backend is not BackendKind.EMBEDDED or not path.exists():
        return
    from evidence.embed.cache import EmbeddingCache

    once = EmbeddingCache(path)
    try:
        once.drop_scope(scope)
    finally:
        once.close()
