"""Which format a file is: its content type, then its extension, then its bytes.

XML is read only as FDA Structured Product Labeling ("spl", `ingest/spl.py`): an `.xml` file or
an XML content type is routed there, and `parse_bytes` refuses other XML by name.

Formats we deliberately do not parse (images, archives, legacy Office) are refused by name
with the list of supported ones, instead of being read as text.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import PurePath

from evidence.errors import DocumentParseError
from evidence.ingest.spl import is_spl

#: What a damaged zip can raise from zipfile (found by mutation fuzzing: a corrupted header
#: offset is a ValueError "negative seek value", a bad method NotImplementedError, …).
ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    ValueError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
)

SUPPORTED_FORMATS: tuple[str, ...] = ("txt", "md", "html", "pdf", "docx", "spl")

_EXTENSIONS: dict[str, str] = {
    ".txt": "txt",
    ".text": "txt",
    ".log": "txt",
    ".md": "md",
    ".markdown": "md",
    ".mdown": "md",
    ".mkd": "md",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".xml": "spl",
    ".pdf": "pdf",
    ".docx": "docx",
}

_CONTENT_TYPES: dict[str, str] = {
    "text/plain": "txt",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/xml": "spl",
    "text/xml": "spl",
    "application/pdf": "pdf",
    "application/x-pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}

# Content types that say nothing about the format (S3's and browsers' defaults).
_GENERIC_CONTENT_TYPES = frozenset(
    {"application/octet-stream", "binary/octet-stream", "application/unknown", ""}
)

# Formats people upload that we deliberately do not parse: refuse them by name
# instead of sniffing their bytes.
_KNOWN_UNSUPPORTED = frozenset(
    {
        ".doc", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".rtf", ".epub",
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".svg", ".ico", ".heic",
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar",
        ".mp3", ".wav", ".mp4", ".mov", ".avi", ".mkv", ".exe", ".dll", ".so", ".bin", ".pyc",
    }
)  # fmt: skip


def supported_description() -> str:
    return "supported: " + ", ".join(SUPPORTED_FORMATS)


def unsupported_reason(filename: str) -> str | None:
    """Why a file is refused by its name alone (known unsupported extension), else None."""
    suffix = PurePath(filename).suffix.lower()
    if suffix in _KNOWN_UNSUPPORTED:
        return f"unsupported file type {suffix!r} ({supported_description()})"
    return None


def content_type_format(content_type: str | None) -> tuple[str | None, str | None]:
    """(format, charset) from a Content-Type header; format None when it is generic."""
    if not content_type:
        return None, None
    main, _, params = content_type.partition(";")
    main = main.strip().lower()
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"').lower()
    if main in _GENERIC_CONTENT_TYPES:
        return None, charset
    return _CONTENT_TYPES.get(main, f"!{main}"), charset


def detect_format(data: bytes, *, filename: str, content_type: str | None = None) -> str:
    """Content type first, then extension, then sniffing the bytes.

    `text/plain` defers to a Markdown extension: browsers and S3 label `.md`
    uploads `text/plain`, and we would lose the headings.
    """
    by_type, _ = content_type_format(content_type)
    suffix = PurePath(filename).suffix.lower()
    by_ext = _EXTENSIONS.get(suffix)
    if by_type is not None and by_type.startswith("!"):
        raise DocumentParseError(
            filename, f"unsupported content type {by_type[1:]!r} ({supported_description()})"
        )
    if by_type == "txt" and by_ext == "md":
        return "md"
    if by_type is not None:
        return by_type
    if by_ext is not None:
        return by_ext
    reason = unsupported_reason(filename)
    if reason is not None:
        raise DocumentParseError(filename, reason)
    return _sniff(data, filename)


def _sniff(data: bytes, filename: str) -> str:
    head = data[:1024].lstrip()
    # Some producers put junk before the header; then the trailer must be there too.
    if head.startswith(b"%PDF-") or (b"%PDF-" in data[:1024] and b"%%EOF" in data[-2048:]):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        if _is_docx(data):
            return "docx"
        raise DocumentParseError(filename, f"unsupported type: a zip archive ({supported_description()})")
    for magic, name in _MAGIC:
        if head.startswith(magic):
            raise DocumentParseError(filename, f"unsupported type: {name} ({supported_description()})")
    if is_spl(data):
        return "spl"
    lowered = head[:512].lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
        return "html"
    return "txt"


_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\xd0\xcf\x11\xe0", "legacy Office document (.doc/.xls)"),
    (b"{\\rtf", "RTF document"),
    (b"\x7fELF", "executable"),
)


def _is_docx(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return "word/document.xml" in zf.namelist()
    except ZIP_ERRORS:
        return False
