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
_C1 = re.compile(r"[\x80-\x9f]")
#: The C1 controls latin-1 decodes bytes 0x80-0x9F to, as windows-1252 reads those bytes (its
#: quotes, dashes, ellipsis, euro sign); the five bytes cp1252 leaves undefined stay as they are.
#: One character for one, so offsets do not move.
_C1_AS_CP1252 = str.maketrans(
    {
        chr(b): bytes([b]).decode("cp1252")
        for b in range(0x80, 0xA0)
        if bytes([b]).decode("cp1252", errors="replace") != "\ufffd"
    }
)


def decode_text(data: bytes, *, filename: str, charset: str | None = None) -> str:
    """UTF-8 (BOM aware; UTF-16/32 only with a BOM), else the declared charset, else UTF-8 per line
    with cp1252 for the lines that are not UTF-8."""
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
        fallback = "cp1252"
        if charset and _known(charset) and codecs.lookup(charset).name != "utf-8":
            fallback = charset
        # A declared charset is trusted for the whole file; cp1252 is only a guess, made per line.
        whole = ("utf-8",) if fallback == "cp1252" else ("utf-8", fallback)
        for encoding in whole:
            try:
                text = data.decode(encoding)
                break
            except UnicodeDecodeError:
                continue
        if text is None:
            text = _decode_lines(data, fallback, filename)
        if codecs.lookup(fallback).name == "iso8859-1" and _C1.search(text):
            # A latin-1 label on windows-1252 text (the common case: a Windows editor's "ANSI"
            # served as ISO-8859-1) turns its smart quotes and dashes into C1 controls, which no
            # latin-1 text uses; the WHATWG encoding standard reads the label as windows-1252 for
            # that reason, and so does this.
            text = text.translate(_C1_AS_CP1252)
    sample = text[:20000]
    if sample and len(_CONTROL.findall(sample)) > max(8, len(sample) // 20):
        raise DocumentParseError(filename, "binary content, not text (control characters)")
    return text


def _decode_lines(data: bytes, fallback: str, filename: str) -> str:
    """UTF-8 line by line, `fallback` (cp1252 unless a charset is declared) for the lines that are
    not: a file pasted together from a UTF-8 and a latin-1 source keeps its UTF-8 lines intact,
    where decoding it whole as cp1252 turned every one of them into mojibake. Lines are cut at
    b"\\n" and joined with "\\n", so line structure and offsets within a line are as decoded."""
    out: list[str] = []
    for line in data.split(b"\n"):
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            try:
                out.append(line.decode(fallback))
            except UnicodeDecodeError:
                raise DocumentParseError(
                    filename, f"binary content, not text (neither UTF-8 nor {fallback})"
                ) from None
    return "\n".join(out)


def _known(charset: str) -> bool:
    try:
        codecs.lookup(charset)
    except LookupError:
        return False
    return True
