"""Backend selection by settings (`EVIDENCE_BACKEND=embedded|opensearch`): no code change to switch.

Adapters are imported here, lazily, so that picking one never imports the other's SDKs
(tantivy/SQLite for embedded, opensearch-py/boto3 for OpenSearch).
"""

from __future__ import annotations

from evidence.config import BackendKind, Settings
from evidence.errors import ConfigurationError
from evidence.search.base import SearchBackend


def get_backend(settings: Settings) -> SearchBackend:
    """A new backend for `settings`; callers (the service) cache it. Nothing connects yet."""
    if settings.backend is BackendKind.EMBEDDED:
        from evidence.search.analysis import ENGLISH_STOP_WORDS, AnalyzerConfig
        from evidence.search.embedded import EmbeddedBackend

        analyzer = AnalyzerConfig(
            stopwords=ENGLISH_STOP_WORDS if settings.analyzer_stopwords else frozenset(),
            stem=settings.analyzer_stemming,
        )
        from evidence.search.ann import AnnConfig

        ann = AnnConfig(
            min_vectors=settings.ann_min_vectors,
            probe_fraction=settings.ann_probe_fraction,
            max_probes=settings.ann_max_probes,
        )
        from evidence.search.headers import SectionHeaders
        from evidence.search.written import written_with

        return EmbeddedBackend(
            settings.store_dir,
            k1=settings.bm25_k1,
            b=settings.bm25_b,
            analyzer=analyzer,
            ann=ann,
            headers=SectionHeaders.from_settings(settings),
            written_with=written_with(settings),
        )
    if settings.backend is BackendKind.OPENSEARCH:
        if not settings.opensearch_endpoint:
            raise ConfigurationError(
                "EVIDENCE_BACKEND=opensearch needs EVIDENCE_OPENSEARCH_ENDPOINT "
                "(and EVIDENCE_AWS_REGION for SigV4)"
            )
        from evidence.search.opensearch import OpenSearchBackend

        return OpenSearchBackend(settings)
    raise ConfigurationError(  # pragma: no cover - the enum has two members
        f"unknown backend {settings.backend!r}; valid: {', '.join(k.value for k in BackendKind)}"
    )
