"""The embedder a deployment's settings name (`EVIDENCE_EMBEDDER`), built on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidence.config import EmbedderKind, Settings

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
    )
