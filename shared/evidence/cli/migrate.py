"""`evidence migrate [--store DIR] --index NAME`: copy an embedded index into OpenSearch.

The embedded store it reads is named as every other command names its store, `--store DIR`
(default `./.evidence`, or `EVIDENCE_STORE_DIR`); `--from-store DIR`, the older spelling
(docs/contracts.md#cli), names the same thing and stays accepted."""

from __future__ import annotations

import argparse
from pathlib import Path

from evidence.cli.common import EXIT_FAILED, EXIT_OK, CliError, Command, settings_from_args
from evidence.cli.output import print_migrate_report


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
    from evidence.search.embedded import EmbeddedBackend
    from evidence.search.opensearch import OpenSearchBackend

    if args.batch_size < 1:
        raise CliError("--batch-size must be >= 1")
    endpoint = {"opensearch_endpoint": args.endpoint} if args.endpoint else {}
    settings = settings_from_args(args, backend=BackendKind.OPENSEARCH, **endpoint)
    store = source_store(args, settings.store_dir)
    if not (store / "indexes" / args.index).exists():
        raise CliError(f"no index {args.index!r} in store {store}")
    source = EmbeddedBackend(store)
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
        )
    finally:
        bar.close()
        source.close()
        target.close()
    print_migrate_report(report, args.index, as_json=args.json)
    return EXIT_FAILED if report.failed else EXIT_OK


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
