"""Fixture builders for ingestion tests: real PDFs and docx files written byte by byte."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from xml.sax.saxutils import escape


def _pdf_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


#: A styled line for `make_pdf`: (text, font size in points, bold).
StyledLine = tuple[str, float, bool]
#: A line opening on a bold term for `make_pdf`: (term in bold, the rest in the regular face), or
#: (text in the regular face, text in bold, the rest in the regular face).
TermLine = tuple[str, str] | tuple[str, str, str]


def make_pdf(
    pages: Sequence[Sequence[str | StyledLine | TermLine]],
    *,
    title: str | None = None,
    differences: str = "",
    courier: frozenset[str] = frozenset(),
    typewriter: str = "courier",
    bold_face: str = "Helvetica-Bold",
) -> bytes:
    """A valid PDF with a Helvetica text layer: one inner list of lines per page.

    `differences` re-maps character codes of the regular face to other glyph names (the body of
    an encoding's /Differences array, e.g. "88 /fi /ffi 87 /g18": X is drawn as the fi ligature,
    Y as ffi, W as the private glyph g18, which maps to no character).

    A line is a string (12 pt Helvetica) or a `StyledLine` ("Methods", 16, True: 16 pt
    Helvetica-Bold, or the face `bold_face` names: TeX's "ABCDEF+SFBX1000"); a `TermLine`
    ("dgeMatrix", " Real matrices") sets its term in that bold face (`("(", "dge", ") …")`: a
    word in bold inside the line); a string in `courier` is
    set in 12 pt Courier (a code listing's line), or with `typewriter="type3"` in a Type3 font
    with no name whose glyphs are all 600 units wide (TeX's bitmap typewriter face),
    `"type3-proportional"` the same with widths that vary. An empty inner list makes a page with
    no text (as a scanned page looks to a parser).
    """
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled once the page tree's number is known
    pages_obj = add(b"")
    encoding = (
        f"<< /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [{differences}] >>"
        if differences
        else "/WinAnsiEncoding"
    )
    font = add(f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding {encoding} >>".encode())
    bold = add(
        f"<< /Type /Font /Subtype /Type1 /BaseFont /{bold_face} /Encoding /WinAnsiEncoding >>".encode()
    )
    if typewriter == "courier":
        mono = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>")
    else:
        widths = " ".join(
            "600" if typewriter == "type3" else str(400 + 50 * (code % 7)) for code in range(32, 127)
        )
        mono = add(
            (
                "<< /Type /Font /Subtype /Type3 /FontBBox [0 0 600 700] /FontMatrix [0.001 0 0 0.001 0 0]"
                " /CharProcs << >> /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126"
                f" /Widths [{widths}] >>"
            ).encode()
        )
    kids: list[int] = []
    for lines in pages:
        if lines:
            ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
            for line in lines:
                if isinstance(line, str) and line in courier:
                    ops.append(f"/F3 12 Tf ({_pdf_escape(line)}) Tj T* /F1 12 Tf")
                elif isinstance(line, str):
                    ops.append(f"({_pdf_escape(line)}) Tj T*")
                elif len(line) == 2 or isinstance(line[1], str):
                    plain, term, rest = ("", *line) if len(line) == 2 else line
                    ops.append(
                        f"/F1 12 Tf ({_pdf_escape(str(plain))}) Tj /F2 12 Tf ({_pdf_escape(str(term))}) Tj"
                        f" /F1 12 Tf ({_pdf_escape(str(rest))}) Tj T*"
                    )
                else:
                    text, size, is_bold = line
                    face = "/F2" if is_bold else "/F1"
                    ops.append(
                        f"{face} {size:g} Tf {size + 2:g} TL ({_pdf_escape(text)}) Tj T* /F1 12 Tf 14 TL"
                    )
            ops.append("ET")
            stream = "\n".join(ops).encode("cp1252")
        else:
            stream = b"0 0 1 rg 72 72 200 200 re f"  # a filled box: ink but no text
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                (
                    f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 612 792] "
                    f"/Resources << /Font << /F1 {font} 0 R /F2 {bold} 0 R /F3 {mono} 0 R >> >> "
                    f"/Contents {content} 0 R >>"
                ).encode()
            )
        )
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R >>".encode()
    kid_refs = " ".join(f"{k} 0 R" for k in kids)
    objects[pages_obj - 1] = f"<< /Type /Pages /Kids [{kid_refs}] /Count {len(kids)} >>".encode()
    info = add(f"<< /Title ({_pdf_escape(title)}) >>".encode()) if title else None

    return pdf_file(objects, root=catalog, info=info)


def pdf_file(objects: list[bytes], *, root: int = 1, info: int | None = None) -> bytes:
    """A PDF file of `objects` (numbered from 1, in order) with its cross-reference table and a
    trailer naming the catalog `root` and, if any, the document information `info`."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    trailer = f"<< /Size {len(objects) + 1} /Root {root} 0 R"
    if info:
        trailer += f" /Info {info} 0 R"
    out.write(f"trailer\n{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def make_docx(blocks: list[tuple[str, str] | list[list[str]]]) -> bytes:
    """A minimal Word document: (style, text) paragraphs ("" for Normal, "list" for numbered) and tables."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body: list[str] = []
    for block in blocks:
        if isinstance(block, tuple):
            style, text = block
            ppr = ""
            if style == "list":
                ppr = '<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>'
            elif style:
                ppr = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>'
            body.append(f'<w:p>{ppr}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>')
        else:
            rows = "".join(
                "<w:tr>"
                + "".join(f"<w:tc><w:p><w:r><w:t>{escape(c)}</w:t></w:r></w:p></w:tc>" for c in row)
                + "</w:tr>"
                for row in block
            )
            body.append(f"<w:tbl>{rows}</w:tbl>")
    document = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        f'<w:document xmlns:w="{w}"><w:body>{"".join(body)}</w:body></w:document>'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Override PartName="/word/document.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        zf.writestr("word/document.xml", document)
    return buf.getvalue()
