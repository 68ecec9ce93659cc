"""Plain text: bytes decoded to text (the txt format, and the first step of Markdown and HTML)."""

from __future__ import annotations

import codecs
import re

from evidence.errors import DocumentParseError

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def decode_text(data: bytes, *, filename: str, charset: str | None = None) -> str:
    """UTF-8 (BOM aware; UTF-16/32 only with a BOM), else the declared charset, else cp1252."""
    text: str | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise DocumentParseError(filename, f"invalid {encoding} after its byte-order mark") from exc
            break
    if text is None:
        if b"\x00" in data[:8192]:
            raise DocumentParseError(filename, "binary content, not text (NUL bytes)")
        candidates = ["utf-8"]
        if charset and _known(charset) and codecs.lookup(charset).name != "utf-8":
            candidates.append(charset)
        candidates.append("cp1252")
        for encoding in candidates:
            try:
                text = data.decode(encoding)
                break
            except UnicodeDecodeError:
                continue
        if text is None:
            raise DocumentParseError(filename, "binary content, not text (neither UTF-8 nor cp1252)")
    sample = text[:20000]
    if sample and len(_CONTROL.findall(sample)) > max(8, len(sample) // 20):
        raise DocumentParseError(filename, "binary content, not text (control characters)")
    return text


def _known(charset: str) -> bool:
    try:
        codecs.lookup(charset)
    except LookupError:
        return False
    return True
