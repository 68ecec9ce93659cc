"""Settings: explicit argument > environment variable (prefix EVIDENCE_) > default.

Read once through `get_settings()`; nothing else in `shared/` looks at the
environment. Tests build `Settings(...)` directly.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class BackendKind(StrEnum):
    EMBEDDED = "embedded"
    OPENSEARCH = "opensearch"


class EmbedderKind(StrEnum):
    MINILM = "minilm"
    TITAN = "titan"


class RerankerKind(StrEnum):
    NONE = "none"
    COHERE = "cohere"
    BEDROCK = "bedrock"


class PlannerKind(StrEnum):
    RULES = "rules"
    BEDROCK = "bedrock"


class HybridMode(StrEnum):
    SERVER = "server"
    CLIENT = "client"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EVIDENCE_", extra="ignore", frozen=True)

    store_dir: Path = Field(default=Path(".evidence"), description="Embedded backend's store directory")
    backend: BackendKind = BackendKind.EMBEDDED
    embedder: EmbedderKind = EmbedderKind.MINILM
    reranker: RerankerKind = RerankerKind.NONE
    planner: PlannerKind = PlannerKind.RULES

    # Local embedder
    # Small batches bound the embedder's peak memory (32: ~1.5 GB RSS on 256-token passages,
    # 16: ~0.8 GB) at equal or better throughput on 2 cores (bench: 4,700-5,500 tokens/s at 2-16).
    embed_batch_size: int = Field(default=8, ge=1, le=512)
    embed_threads: int = Field(default=0, ge=0, le=64, description="0 = one per core")
    embed_max_tokens: int = Field(default=256, ge=16, le=512)

    # Chunking
    passage_tokens: int = Field(default=256, ge=32, le=2048)
    passage_overlap: int = Field(default=32, ge=0, le=512)
    record_max_tokens: int = Field(default=2048, ge=64, le=32768)

    # Lexical analysis: OpenSearch's `english` analyzer by default. The embedded backend applies
    # the analyzer switches to new indexes (each index keeps the analysis it was built with) and
    # computes BM25 with k1 1.2, b 0.75 only (tantivy's constants); OpenSearch takes any k1/b.
    analyzer_stopwords: bool = True
    analyzer_stemming: bool = True
    bm25_k1: float = Field(default=1.2, ge=0.0, le=3.0)
    bm25_b: float = Field(default=0.75, ge=0.0, le=1.0)

    # Remote models
    aws_region: str | None = None
    bedrock_embed_model: str = "amazon.titan-embed-text-v2:0"
    titan_dimension: int = Field(default=1024, description="256, 512 or 1024")
    bedrock_rerank_model: str = "cohere.rerank-v3-5:0"
    bedrock_planner_model: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    cohere_api_key: SecretStr | None = None
    #: In Lambda the key lives in Secrets Manager; read once, on the first reranked request.
    cohere_api_key_secret_arn: str | None = None
    cohere_base_url: str | None = None
    cohere_model: str = "rerank-v3.5"
    rerank_timeout_s: float = Field(default=5.0, gt=0, le=60)
    rerank_retries: int = Field(default=2, ge=0, le=10)
    planner_timeout_s: float = Field(default=3.0, gt=0, le=60)

    # OpenSearch
    opensearch_endpoint: str | None = None
    opensearch_service: str = Field(default="es", pattern="^(es|aoss)$")
    opensearch_username: str | None = None
    opensearch_password: SecretStr | None = None
    opensearch_hybrid_mode: HybridMode = HybridMode.SERVER
    opensearch_timeout_s: float = Field(default=10.0, gt=0, le=120)
    opensearch_verify_certs: bool = True

    # Lambda wiring
    default_index: str = Field(default="documents", pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    results_bucket: str | None = Field(default=None, description="batch assessment results (S3)")

    # Limits (DESIGN.md §3)
    max_query_chars: int = 4096
    max_body_bytes: int = 6 * 1024 * 1024
    max_document_bytes: int = 50 * 1024 * 1024


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
