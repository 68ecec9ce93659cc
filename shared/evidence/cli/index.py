"""`evidence index PATH… --index NAME`: files, folders, BEIR corpora, record JSONL, or knowledge graphs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evidence.cli import common
from evidence.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, Command, key_values
from evidence.cli.output import index_summary, print_failures


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--index", required=True, metavar="NAME")
    p.add_argument("--type", metavar="TYPE", help='metadata "type" for every document (e.g. tc_files)')
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="also index symlinked files whose target lies outside the folder given (refused by default)",
    )
    p.add_argument(
        "--kind",
        choices=("documents", "graph"),
        default="documents",
        help="graph: knowledge-graph files (JSON or YAML) for the coach profile (docs/coach.md)",
    )


def run(args: argparse.Namespace) -> int:
    from evidence.progress import FileProgress

    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise CliError(f"no such file or folder: {', '.join(missing)}")
    metadata = dict(key_values(args.meta, "--meta"))
    service = common.service_from_args(args)
    from evidence.embed.background import lower_priority

    # A bulk write: an `evidence serve` on this machine keeps the cores for its reads (write_nice).
    lower_priority(service.settings.write_nice)
    try:
        if args.kind == "graph":
            # Knowledge-graph files (docs/coach.md): each validated whole; a refused one writes nothing.
            if args.type or metadata:
                raise CliError(
                    "--type and --meta do not apply to --kind graph (nodes carry their own fields)"
                )
            report = service.index_graph_paths(args.index, paths)
        else:
            bar = FileProgress(f"indexing into {args.index}")
            try:
                report = service.index_paths(
                    args.index,
                    paths,
                    doc_type=args.type,
                    metadata=metadata,
                    progress=bar,
                    follow_symlinks=args.follow_symlinks,
                )
            finally:
                bar.close()
    finally:
        service.close()
    print_failures(report.failed)
    print(index_summary(report, args.index))
    sys.stdout.flush()
    if report.refused:
        return EXIT_USAGE
    return EXIT_FAILED if report.failed else EXIT_OK


COMMAND = Command("index", "index files, folders, BEIR corpora or record JSONL", add_arguments, run)
