"""`evidence list [--index NAME] [--json]`: the store's indexes, or one index's documents."""

from __future__ import annotations

import argparse

from evidence.cli import common
from evidence.cli.common import EXIT_OK, Command
from evidence.cli.output import print_documents, print_indexes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", metavar="NAME", help="list this index's documents with their chunk counts")
    p.add_argument("--json", action="store_true", help="print one JSON line")


def run(args: argparse.Namespace) -> int:
    service = common.service_from_args(args)
    try:
        if args.index:
            documents = service.list_documents(args.index)
            print_documents(args.index, documents, as_json=args.json)
        else:
            print_indexes(service.list_indexes(), str(service.settings.store_dir), as_json=args.json)
    finally:
        service.close()
    return EXIT_OK


COMMAND = Command("list", "list the indexes, or the documents of one index", add_arguments, run)
