"""Reading evaluation inputs: (gzipped) text files, JSONL objects, index names."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from evidence.errors import RequestValidationError


def open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def ingest_code_digest() -> str:
    """A digest of the ingestion code (parsers, chunker, span extractor): an evaluation index
    records it, so a changed parser re-indexes instead of scoring a stale index."""
    from evidence import ingest

    h = hashlib.sha256()
    for path in sorted(Path(ingest.__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def late_version_tag() -> bytes:
    """What an evaluation index's fingerprint adds for the late vectors' code
    (`embed.late.LATE_VERSION`): nothing at version 1, so the fingerprints of the stores written
    so far stand; after a bump their suites are indexed afresh (the anchor would otherwise find no
    vector of the new version and score as if off)."""
    from evidence.embed.late import LATE_VERSION

    return b"" if LATE_VERSION == 1 else f"late-vectors:{LATE_VERSION}".encode()


def slug(name: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")
    return out[:40] or "dataset"


def jsonl_objects(path: Path, what: str, shown: str, *, field: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a missing file, a line that is not JSON or
    not an object is a 4xx on `field` naming the line."""
    if not path.is_file():
        raise RequestValidationError(f"{what} {shown} does not exist", field=field)
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RequestValidationError(f"{shown}:{n}: not JSON ({exc.msg})", field=field) from None
            if not isinstance(rec, dict):
                raise RequestValidationError(f"{shown}:{n}: each line must be a JSON object", field=field)
            yield n, rec
