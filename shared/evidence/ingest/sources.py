"""CLI paths → work items, lazily, without losing anything to one bad input.

A folder is walked recursively (hidden entries skipped, sorted); JSONL files are
read line by line and told apart by their keys: BEIR corpus lines
(`_id`, `title`, `text`) or records (`id`?, `text`, `metadata`). A bad line or an
unreadable file becomes a `SourceFailure` naming it; the rest goes on.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from evidence.errors import RequestValidationError
from evidence.ids import criterion_hash
from evidence.ingest.parsers import parse_bytes, unsupported_reason
from evidence.rank.followups import parse_round
from evidence.records import ParsedDocument

log = logging.getLogger(__name__)

KNOWN_TYPES = ("tc_files", "followup_response:{round}", "soc2_summary:{track}", "followup_document")
_FOLLOWUP_RESPONSE = "followup_response:"
_SOC2 = "soc2_summary:"
_INT = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One document to index: raw bytes of a file, or an already-parsed record."""

    document_id: str
    source: str
    filename: str
    metadata: dict[str, Any] = field(default_factory=dict)
    data: bytes | None = None
    parsed: ParsedDocument | None = None
    as_record: bool = False
    content_type: str | None = None

    def parse(self) -> ParsedDocument:
        """The parsed document; raises `DocumentParseError` naming the file for bad bytes."""
        if self.parsed is not None:
            return self.parsed
        return parse_bytes(self.data or b"", filename=self.filename, content_type=self.content_type)


@dataclass(frozen=True, slots=True)
class SourceFailure:
    """An input that produced nothing: `source` is a path, or `path:line` for a JSONL line."""

    source: str
    reason: str


# --- metadata --------------------------------------------------------------------------------


def type_note(value: str) -> str | None:
    """A note when `type` is outside seed 001's taxonomy (allowed, but worth knowing)."""
    if value in ("tc_files", "followup_document"):
        return None
    if value.startswith((_FOLLOWUP_RESPONSE, _SOC2)):
        return None
    return f"type {value!r} is outside the known taxonomy ({', '.join(KNOWN_TYPES)})"


def enrich_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and complete a document's metadata (index API, CLI, JSONL records alike).

    - `criterion_question` → `criterion_question_hash` (seed 000: the same hash as at query time);
    - `round_number` coerced to an int ("2", 2.0, "2.0" → 2; 2.5 or "two" are refused);
    - `type` checked against seed 001's taxonomy; `followup_response:{round}` needs an integer
      round, fills in `round_number` when it is missing and must agree with it when present;
    - keys with `None` values are dropped (a keyword field cannot hold them).
    Raises `RequestValidationError` naming the field.
    """
    out = _plain_values(meta)
    if "round_number" in out:
        try:
            out["round_number"] = parse_round(out["round_number"])
        except ValueError as exc:
            raise RequestValidationError(
                f"metadata.round_number: {exc}", field="metadata.round_number"
            ) from None
    doc_type = out.get("type")
    if doc_type is not None:
        _check_type(doc_type, out)
    question = out.get("criterion_question")
    if question is not None:
        _link_criterion(question, out)
    return out


def _plain_values(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Scalars and lists of strings; `None` values dropped, objects refused."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str) or not key:
            raise RequestValidationError("metadata keys must be non-empty strings", field="metadata")
        if value is None:
            continue
        if isinstance(value, dict):
            raise RequestValidationError(
                f"metadata value of {key!r} must be a scalar or a list, not an object",
                field=f"metadata.{key}",
            )
        if isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value if v is not None]
        else:
            out[key] = value
    return out


def _check_type(doc_type: Any, out: dict[str, Any]) -> None:
    """Seed 001's taxonomy: `followup_response:{round}` fills or must agree with `round_number`."""
    if not isinstance(doc_type, str) or not doc_type.strip():
        raise RequestValidationError("metadata.type must be a non-empty string", field="metadata.type")
    if doc_type.startswith(_FOLLOWUP_RESPONSE):
        suffix = doc_type[len(_FOLLOWUP_RESPONSE) :]
        if not _INT.match(suffix.strip()):
            raise RequestValidationError(
                f"metadata.type {doc_type!r}: the round after 'followup_response:' must be an integer",
                field="metadata.type",
            )
        round_from_type = int(suffix)
        if "round_number" not in out:
            out["round_number"] = round_from_type
        elif out["round_number"] != round_from_type:
            raise RequestValidationError(
                f"metadata.round_number {out['round_number']} disagrees with type {doc_type!r}",
                field="metadata.round_number",
            )
    elif doc_type.startswith(_SOC2) and not doc_type[len(_SOC2) :].strip():
        raise RequestValidationError(
            "metadata.type 'soc2_summary:' needs a track, e.g. 'soc2_summary:overview'",
            field="metadata.type",
        )
    note = type_note(doc_type)
    if note:
        log.info(note)


def _link_criterion(question: Any, out: dict[str, Any]) -> None:
    """`criterion_question` → `criterion_question_hash`, the same hash as at query time (seed 000)."""
    if not isinstance(question, str):
        raise RequestValidationError(
            "metadata.criterion_question must be a string", field="metadata.criterion_question"
        )
    linked = criterion_hash(question)
    if linked is not None:
        out["criterion_question_hash"] = linked
    elif question.strip():
        # Words-free criteria ("???") would all share one hash: refuse rather than mislink.
        raise RequestValidationError(
            "metadata.criterion_question has no words to link on; give the criterion's text",
            field="metadata.criterion_question",
        )
    else:
        del out["criterion_question"]


# --- paths -----------------------------------------------------------------------------------


def _is_jsonl(name: str) -> bool:
    low = name.lower()
    return low.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz"))


def _walk(folder: Path, root: Path, follow_symlinks: bool) -> Iterator[Path | SourceFailure]:
    """Files under `folder` in path order (a folder's entries sorted by name), hidden entries skipped.

    Symlinked folders are not followed (no cycles); symlinked files are when their target lies
    inside `root` (the folder given), or anywhere with `follow_symlinks`: a link in a shared
    folder to /etc/passwd is not indexed by accident. Every other entry skipped gets a failure
    line (a dangling link, a FIFO, a socket, a device), so nothing disappears silently.
    """
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield SourceFailure(str(folder), f"cannot list folder: {exc.strerror or exc}")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path), root, follow_symlinks)
        elif entry.is_symlink():
            yield _symlinked(Path(entry.path), root, follow_symlinks)
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path)
        else:
            yield SourceFailure(entry.path, f"skipped: {_file_kind(Path(entry.path))}, not a regular file")


def _symlinked(link: Path, root: Path, follow_symlinks: bool) -> Path | SourceFailure:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return SourceFailure(str(link), f"skipped: dangling symlink (to {os.readlink(link)})")
    if target.is_dir():
        return SourceFailure(str(link), "skipped: symlink to a folder (not followed; give the folder itself)")
    if not target.is_file():
        return SourceFailure(str(link), f"skipped: symlink to {_file_kind(target)}, not a regular file")
    if not follow_symlinks and not target.is_relative_to(root):
        return SourceFailure(
            str(link),
            f"skipped: symlink to {target}, outside {root} (evidence index --follow-symlinks indexes it)",
        )
    return link


def _file_kind(path: Path) -> str:
    import stat

    try:
        mode = path.lstat().st_mode
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    kinds = [
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    return next((name for test, name in kinds if test(mode)), "a special file")


def file_identity(file: Path) -> tuple[str, str]:
    """(document id, source) of a file on disk.

    The id is the file's resolved absolute path: two different files never share it, and the
    same file reached through another argument (`corpus` vs `corpus/cdk`, `./x/../x`, a symlink)
    is the same document. The source, what an LLM reads in `<source>`, is that path relative to
    the working directory when it lies below it (as the user typed it), else the absolute path.
    """
    resolved = file.resolve()
    try:
        source = resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        source = resolved.as_posix()
    return resolved.as_posix(), source


def iter_sources(
    paths: Sequence[Path],
    *,
    doc_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    follow_symlinks: bool = False,
) -> Iterator[SourceItem | SourceFailure]:
    """Work items for `evidence index PATH...`; `--type` and `--meta` override a record's own metadata."""
    overrides = source_overrides(doc_type, metadata)
    for entry in iter_inputs(paths, follow_symlinks=follow_symlinks):
        if isinstance(entry, SourceFailure):
            yield entry
        else:
            yield from file_items(entry, overrides)


def source_overrides(doc_type: str | None, metadata: Mapping[str, str] | None) -> dict[str, Any]:
    overrides: dict[str, Any] = dict(metadata or {})
    if doc_type is not None:
        overrides["type"] = doc_type
    return overrides


def iter_inputs(paths: Sequence[Path], *, follow_symlinks: bool = False) -> Iterator[Path | SourceFailure]:
    """The files `iter_sources` reads, in its order, without reading them (a progress bar's total):
    folders walked, BEIR companions and missing paths as failures."""
    for path in paths:
        if path.is_dir():
            beir_dirs: dict[Path, bool] = {}
            for file in _walk(path, path.resolve(), follow_symlinks):
                if isinstance(file, SourceFailure):
                    yield file
                elif _beir_companion(file, beir_dirs):
                    yield SourceFailure(
                        str(file),
                        "skipped: part of a BEIR dataset folder (only corpus.jsonl[.gz] is indexed)",
                    )
                else:
                    yield file
        elif path.is_file():
            yield path
        elif path.exists():
            yield SourceFailure(str(path), f"{_file_kind(path)}, not a regular file or folder")
        else:
            yield SourceFailure(str(path), "no such file or folder")


_CORPUS_NAMES = ("corpus.jsonl", "corpus.jsonl.gz")


def _beir_companion(file: Path, cache: dict[Path, bool]) -> bool:
    """Queries, qrels and the like next to a BEIR `corpus.jsonl[.gz]` (or in its qrels/ folder)."""
    if file.name in _CORPUS_NAMES:
        return False
    folder = file.parent
    for candidate in (folder, folder.parent) if folder.name == "qrels" else (folder,):
        if candidate not in cache:
            cache[candidate] = any((candidate / name).is_file() for name in _CORPUS_NAMES)
        if cache[candidate]:
            return True
    return False


def file_items(file: Path, overrides: Mapping[str, Any]) -> Iterator[SourceItem | SourceFailure]:
    if _is_jsonl(file.name):
        yield from _jsonl_items(file, overrides)
        return
    reason = unsupported_reason(file.name)
    if reason is not None:
        yield SourceFailure(str(file), reason)
        return
    try:
        meta = enrich_metadata(overrides)
    except RequestValidationError as exc:
        yield SourceFailure(str(file), exc.message)
        return
    try:
        data = file.read_bytes()
    except OSError as exc:
        yield SourceFailure(str(file), f"cannot read: {exc.strerror or exc}")
        return
    document_id, source = file_identity(file)
    yield SourceItem(document_id=document_id, source=source, filename=file.name, metadata=meta, data=data)


def _open_lines(file: Path) -> IO[bytes]:
    if file.name.lower().endswith(".gz"):
        return gzip.open(file, "rb")  # type: ignore[return-value]
    return file.open("rb")


def _jsonl_items(file: Path, overrides: Mapping[str, Any]) -> Iterator[SourceItem | SourceFailure]:
    line_no = 0
    identity = file_identity(file)
    try:
        with _open_lines(file) as fh:
            for raw in fh:
                line_no += 1
                line = raw[3:] if line_no == 1 and raw.startswith(b"\xef\xbb\xbf") else raw
                if not line.strip():
                    continue
                yield _jsonl_line(line, file, identity, line_no, overrides)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        # A truncated or corrupt file: the lines read so far stand; the rest is reported.
        where = f"{file}:{line_no + 1}" if line_no else str(file)
        yield SourceFailure(where, f"cannot read: {exc}")


def _jsonl_line(
    raw: bytes, file: Path, identity: tuple[str, str], line_no: int, overrides: Mapping[str, Any]
) -> SourceItem | SourceFailure:
    """One record. Its id is the record's own (`_id`, `id`: the caller named it), else the file's
    id and the line; its source is its `FILENAME` metadata, else the file's source and the id."""
    file_id, file_source = identity
    where = f"{file}:{line_no}"
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return SourceFailure(where, f"invalid JSON: {exc}")
    if not isinstance(obj, dict):
        return SourceFailure(where, f"expected a JSON object, got {type(obj).__name__}")
    text = obj.get("text")
    if not isinstance(text, str):
        return SourceFailure(
            where, "no 'text' string (expected BEIR {_id, title, text} or {id?, text, metadata})"
        )
    if not text.strip():
        return SourceFailure(where, "empty text")
    title = obj.get("title")
    if title is not None and not isinstance(title, str):
        return SourceFailure(where, "'title' must be a string")
    if "_id" in obj:
        doc_id = obj["_id"]
        if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool) or str(doc_id) == "":
            return SourceFailure(where, "'_id' must be a non-empty string")
        own_meta: Mapping[str, Any] = {}
        source = f"{file_source}#{doc_id}"
    else:
        raw_id = obj.get("id")
        if raw_id is not None and (
            not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or raw_id == ""
        ):
            return SourceFailure(where, "'id' must be a non-empty string")
        doc_id = raw_id if raw_id is not None else f"{file_id}#{line_no}"
        meta_obj = obj.get("metadata", {})
        if meta_obj is None:
            meta_obj = {}
        if not isinstance(meta_obj, dict):
            return SourceFailure(where, "'metadata' must be an object")
        own_meta = meta_obj
        fname = meta_obj.get("FILENAME", meta_obj.get("filename"))
        source = fname if isinstance(fname, str) and fname else f"{file_source}#{raw_id or line_no}"
    try:
        meta = enrich_metadata({**own_meta, **overrides})
    except RequestValidationError as exc:
        return SourceFailure(where, exc.message)
    return SourceItem(
        document_id=str(doc_id),
        source=source,
        filename=file.name,
        metadata=meta,
        parsed=ParsedDocument(text=text, title=title or "", fmt="txt"),
        as_record=True,
    )
