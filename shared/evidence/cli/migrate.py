"""`evidence migrate [--store DIR] --index NAME`: copy an embedded index into OpenSearch.

The embedded store it reads is named as every other command names its store, `--store DIR`
(default `./.evidence`, or `EVIDENCE_STORE_DIR`); `--from-store DIR`, the older spelling
(docs/contracts.md#cli), names the same thing and stays accepted."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from evidence.cli.common import EXIT_FAILED, EXIT_OK, CliError, Command, settings_from_args
from evidence.cli.output import print_migrate_report

if TYPE_CHECKING:
    from evidence.config import Settings
    from evidence.migrate import CachedAnchors
    from evidence.search.embedded import EmbeddedBackend


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from-store",
        type=Path,
        metavar="DIR",
        dest="from_store",
        help="the embedded store directory to read: the same as --store (kept for older scripts)",
    )
    p.add_argument("--index", required=True, metavar="NAME", help="the index to copy")
    p.add_argument(
        "--target-index",
        metavar="NAME",
        dest="target_index",
        help="name on OpenSearch (default: the same name)",
    )
    p.add_argument(
        "--endpoint", metavar="URL", help="OpenSearch endpoint (default EVIDENCE_OPENSEARCH_ENDPOINT)"
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=100,
        metavar="N",
        dest="batch_size",
        help="documents per bulk round (default 100)",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON line")


def run(args: argparse.Namespace) -> int:
    from evidence.config import BackendKind
    from evidence.migrate import migrate
    from evidence.progress import Progress
    from evidence.search.opensearch import OpenSearchBackend
    from evidence.search.written import written_with

    if args.batch_size < 1:
        raise CliError("--batch-size must be >= 1")
    endpoint = {"opensearch_endpoint": args.endpoint} if args.endpoint else {}
    settings = settings_from_args(args, backend=BackendKind.OPENSEARCH, **endpoint)
    store = source_store(args, settings.store_dir)
    if not (store / "indexes" / args.index).exists():
        raise CliError(f"no index {args.index!r} in store {store}")
    source = embedded_source(settings, store)
    anchors = source_anchors(settings, store, args.index)
    target = OpenSearchBackend(settings)
    bar = Progress(f"migrating {args.index}")
    try:
        report = migrate(
            source,
            target,
            args.index,
            target_index=args.target_index,
            batch_size=args.batch_size,
            progress=bar,
            anchors=anchors,
            written=written_with(settings),
        )
    finally:
        bar.close()
        source.close()
        if anchors is not None:
            anchors.embedder.cache.close()
        target.close()
    print_migrate_report(report, args.index, as_json=args.json)
    return EXIT_FAILED if report.failed else EXIT_OK


def embedded_source(settings: Settings, store: Path) -> EmbeddedBackend:
    """The embedded store to read, opened as `evidence index` and `evidence serve` open it under
    the same settings (`search.factory.get_backend`): its section header rule above all
    (docs/ingest.md#section-headers), so that a document whose BM25 document is rebuilt while it
    is read (one pending its lexical sync) gets the header a fresh index under that rule gives, as
    the OpenSearch copy's lexical field does; it was opened with the default (no header)."""
    from evidence.config import BackendKind
    from evidence.search.embedded import EmbeddedBackend
    from evidence.search.factory import get_backend

    backend = get_backend(settings.model_copy(update={"backend": BackendKind.EMBEDDED, "store_dir": store}))
    assert isinstance(backend, EmbeddedBackend)
    return backend


def source_anchors(settings: Settings, store: Path, index: str) -> CachedAnchors | None:
    """The focus span anchor's vectors of `index`'s documents as the store's embedding cache holds
    them (`migrate.CachedAnchors`: read, never embedded; docs/opensearch.md#anchor-vectors), in
    the index's cache scope and under the settings' model and header rule, as `evidence index`
    wrote them. None without a cache file or with a model that makes no late vectors (Titan)."""
    from evidence.config import BackendKind, EmbedderKind, EmbeddingCacheScope
    from evidence.embed.cache import CachedEmbedder
    from evidence.embed.factory import build_embedder, with_store_cache
    from evidence.migrate import CachedAnchors
    from evidence.search.headers import SectionHeaders

    local = settings.model_copy(update={"backend": BackendKind.EMBEDDED, "store_dir": store})
    if local.embedder is not EmbedderKind.MINILM or not (store / "embeddings.sqlite3").exists():
        return None
    embedder = with_store_cache(local, build_embedder(local))
    assert isinstance(embedder, CachedEmbedder)
    if local.embedding_cache_scope is EmbeddingCacheScope.INDEX:
        embedder = embedder.scoped(f"index:{index}")
    return CachedAnchors(embedder, SectionHeaders.from_settings(local))


def source_store(args: argparse.Namespace, default: Path) -> Path:
    """The embedded store to read: `--store` or `--from-store` (one directory, named either way),
    else `default` (the settings' `store_dir`: `EVIDENCE_STORE_DIR` or `./.evidence`)."""
    named = {Path(p) for p in (args.store, args.from_store) if p is not None}
    if len(named) > 1:
        raise CliError(f"--store {args.store} and --from-store {args.from_store} name two stores: give one")
    return named.pop() if named else Path(default)


COMMAND = Command(
    "migrate",
    "copy an embedded index into OpenSearch (resumable; vectors copied, not re-embedded)",
    add_arguments,
    run,
)
