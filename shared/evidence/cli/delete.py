"""`evidence delete --index NAME (--document ID | --all) [--yes]`: remove a document or an index.

A document is named by its id (`evidence list --index NAME` shows them); a path to a file on
disk names the document that file was indexed as. `--all` deletes the whole index: on a
terminal it asks first (what it holds, then y/N); elsewhere it needs `--yes`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evidence.cli import common
from evidence.cli.common import EXIT_FAILED, EXIT_OK, CliError, Command

if TYPE_CHECKING:
    from evidence.model import DeleteDocumentResponse
    from evidence.service import EvidenceService


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, metavar="NAME")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--document", metavar="ID", help="the document's id (or the path it was indexed from)")
    which.add_argument("--all", action="store_true", help="the whole index")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask before deleting a whole index")


def run(args: argparse.Namespace) -> int:
    service = common.service_from_args(args)
    try:
        if args.all:
            return _delete_index(service, args.index, yes=args.yes)
        response = _delete_document(service, args.index, args.document)
    finally:
        service.close()
    print(f"deleted document {response.document_id!r} from {args.index!r}: {response.deleted_chunks} chunks")
    return EXIT_OK


def _delete_document(service: EvidenceService, index: str, document_id: str) -> DeleteDocumentResponse:
    from evidence.errors import DocumentNotFoundError
    from evidence.ingest.sources import file_identity

    try:
        return service.delete_document(index, document_id)
    except DocumentNotFoundError:
        path = Path(document_id)
        if not path.is_file():
            raise
        # A file's document id is its resolved path (docs/contracts.md): name it as typed.
        return service.delete_document(index, file_identity(path)[0])


def _delete_index(service: EvidenceService, index: str, *, yes: bool) -> int:
    info = service.backend.get_index(index)
    held = f"index {index!r} ({info.documents:,} documents, {info.chunks:,} chunks)"
    if not yes:
        if not sys.stdin.isatty():
            raise CliError(f"--all deletes {held}; add --yes to confirm")
        print(f"delete {held}? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing deleted", file=sys.stderr)
            return EXIT_FAILED
    service.delete_index(index)
    print(f"deleted {held}")
    return EXIT_OK


COMMAND = Command("delete", "delete a document, or a whole index", add_arguments, run)
