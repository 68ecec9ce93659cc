"""Rebuild the Markdown and PDF labels of this family from the real SPL XML they were made from.

Usage (reportlab is needed for the PDF only and is not a project dependency):

    python bench/qa/drug-labels/build_derived.py SRC_DIR

SRC_DIR holds the SPL files named in SOURCES.md (from the FDA/openfda repository's test data).
The label text is copied verbatim from the SPL sections (highlights, product-data elements and
package-image panels are left out); only the container changes: headings, paragraphs, lists
and tables become Markdown, or a typeset PDF with headings, a running header and ruled tables.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

V3 = "{urn:hl7-org:v3}"
WS = re.compile(r"\s+")
SKIP_CODES = {"48780-1", "51945-4"}  # product data elements; package label / display panel
SKIP_INLINE = {f"{V3}footnote", f"{V3}renderMultiMedia", f"{V3}observationMedia"}
HERE = Path(__file__).resolve().parent
DOCS = HERE / "documents"


@dataclass(frozen=True)
class Block:
    kind: str  # "h", "p", "li", "table"
    text: str = ""
    level: int = 0
    rows: tuple[tuple[str, ...], ...] = ()
    header_rows: int = 0


def inline(el: ElementTree.Element) -> str:
    out: list[str] = []

    def walk(node: ElementTree.Element) -> None:
        if node.tag in SKIP_INLINE:
            return
        if node.tag == f"{V3}br":
            out.append(" ")
        if node.text:
            out.append(node.text)
        for child in node:
            walk(child)
            if child.tail:
                out.append(child.tail)

    walk(el)
    return WS.sub(" ", "".join(out)).strip()


def table_block(table: ElementTree.Element) -> list[Block]:
    out: list[Block] = []
    caption = table.find(f"{V3}caption")
    if caption is not None and inline(caption):
        out.append(Block("p", inline(caption)))
    rows: list[tuple[str, ...]] = []
    header = 0
    for part in ("thead", "tbody", "tfoot"):
        for group in table.findall(f"{V3}{part}"):
            for tr in group.findall(f"{V3}tr"):
                cells = tuple(inline(c) for c in tr if c.tag in (f"{V3}td", f"{V3}th"))
                if any(cells):
                    rows.append(cells)
                    header += part == "thead"
    for tr in table.findall(f"{V3}tr"):
        cells = tuple(inline(c) for c in tr if c.tag in (f"{V3}td", f"{V3}th"))
        if any(cells):
            rows.append(cells)
    if rows:
        width = max(len(r) for r in rows)
        rows = [r + ("",) * (width - len(r)) for r in rows]
        out.append(Block("table", rows=tuple(rows), header_rows=max(header, 1)))
    return out


def list_blocks(lst: ElementTree.Element, depth: int = 0) -> list[Block]:
    out: list[Block] = []
    for item in lst.findall(f"{V3}item"):
        nested = [c for c in item if c.tag == f"{V3}list"]
        for c in nested:
            item.remove(c)
        caption = item.find(f"{V3}caption")
        label = inline(caption) if caption is not None else ""
        if caption is not None:
            item.remove(caption)
        text = f"{label} {inline(item)}".strip()
        if text:
            out.append(Block("li", text, level=depth))
        for c in nested:
            out.extend(list_blocks(c, depth + 1))
    return out


def text_blocks(text_el: ElementTree.Element) -> list[Block]:
    out: list[Block] = []
    for child in text_el:
        if child.tag == f"{V3}list":
            out.extend(list_blocks(child))
        elif child.tag == f"{V3}table":
            out.extend(table_block(child))
        elif child.tag not in SKIP_INLINE and inline(child):
            out.append(Block("p", inline(child)))
    return out


def section_blocks(section: ElementTree.Element, level: int) -> list[Block]:
    code = section.find(f"{V3}code")
    if code is not None and code.get("code") in SKIP_CODES:
        return []
    out: list[Block] = []
    title_el = section.find(f"{V3}title")
    title = inline(title_el) if title_el is not None else ""
    if title:
        out.append(Block("h", title.replace("\t", " "), level=level))
    text_el = section.find(f"{V3}text")
    if text_el is not None:
        out.extend(text_blocks(text_el))
    for comp in section.findall(f"{V3}component"):
        sub = comp.find(f"{V3}section")
        if sub is not None:
            out.extend(section_blocks(sub, level + 1 if title else level))
    return out


def spl_blocks(path: Path) -> list[Block]:
    root = ElementTree.parse(path).getroot()
    body = root.find(f"{V3}component/{V3}structuredBody")
    assert body is not None, path
    out: list[Block] = []
    for comp in body.findall(f"{V3}component"):
        sec = comp.find(f"{V3}section")
        if sec is not None:
            out.extend(section_blocks(sec, 1))
    return out


def to_markdown(title: str, blocks: list[Block]) -> str:
    lines = [f"# {title}", ""]
    prev = ""
    for b in blocks:
        if b.kind == "h":
            lines += ["#" * min(b.level + 1, 6) + " " + b.text, ""]
        elif b.kind == "p":
            lines += [b.text, ""]
        elif b.kind == "li":
            if prev != "li" and lines[-1] != "":
                lines.append("")
            lines.append("  " * b.level + "- " + b.text)
        elif b.kind == "table":
            if lines[-1] != "":
                lines.append("")
            cells = [[c.replace("|", "\\|") for c in r] for r in b.rows]
            head, body = cells[: b.header_rows], cells[b.header_rows :]
            lines.append("| " + " | ".join(head[-1]) + " |")
            lines.append("|" + "|".join("---" for _ in head[-1]) + "|")
            for r in head[:-1] + body:
                lines.append("| " + " | ".join(r) + " |")
            lines.append("")
        if b.kind != "li" and prev == "li" and lines[-1] != "":
            lines.append("")
        if b.kind == "li":
            pass
        prev = b.kind
    text = "\n".join(lines)
    text = re.sub(r"(\n- [^\n]*|\n  +- [^\n]*)\n(?=[^\n-])", r"\1\n\n", text)  # blank line after lists
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def to_pdf(title: str, running: str, blocks: list[Block], out: Path) -> None:
    from reportlab import rl_config
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.lib.units import inch
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    rl_config.invariant = 1  # no creation date or random document ID: the same input gives the same bytes
    ss = getSampleStyleSheet()
    body = ParagraphStyle("body", parent=ss["BodyText"], fontName="Helvetica", fontSize=9.5, leading=12)
    cell = ParagraphStyle("cell", parent=body, fontSize=8.5, leading=10)
    bullet = ParagraphStyle("bullet", parent=body, leftIndent=14, bulletIndent=4)
    h = {
        1: ParagraphStyle(
            "h1", parent=ss["Heading2"], fontName="Helvetica-Bold", fontSize=12, spaceBefore=10
        ),
        2: ParagraphStyle(
            "h2", parent=ss["Heading3"], fontName="Helvetica-Bold", fontSize=10.5, spaceBefore=6
        ),
        3: ParagraphStyle("h3", parent=ss["Heading4"], fontName="Helvetica-BoldOblique", fontSize=9.5),
    }
    title_style = ParagraphStyle("title", parent=ss["Title"], fontName="Helvetica-Bold", fontSize=15)
    note = ParagraphStyle("note", parent=body, alignment=TA_CENTER, fontSize=8.5)

    def esc(s: str) -> str:
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    story: list[object] = [
        Paragraph(esc(title), title_style),
        Paragraph("FULL PRESCRIBING INFORMATION", note),
        Spacer(1, 8),
    ]
    for b in blocks:
        if b.kind == "h":
            story.append(Paragraph(esc(b.text), h[min(b.level, 3)]))
        elif b.kind == "p":
            story.append(Paragraph(esc(b.text), body))
        elif b.kind == "li":
            style = ParagraphStyle(f"li{b.level}", parent=bullet, leftIndent=14 + 12 * b.level)
            story.append(Paragraph(esc(b.text), style, bulletText="•"))
        elif b.kind == "table":
            data = [[Paragraph(esc(c), cell) for c in r] for r in b.rows]
            t = Table(data, repeatRows=b.header_rows, hAlign="LEFT", colWidths=_widths(b.rows, 7.0 * inch))
            t.setStyle(
                TableStyle(
                    [
                        ("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
                        ("BACKGROUND", (0, 0), (-1, b.header_rows - 1), colors.HexColor("#e8e8e8")),
                        ("VALIGN", (0, 0), (-1, -1), "TOP"),
                    ]
                )
            )
            story += [Spacer(1, 4), t, Spacer(1, 6)]

    def page(canvas: object, doc: object) -> None:
        c = canvas
        c.saveState()  # type: ignore[attr-defined]
        c.setFont("Helvetica", 7.5)  # type: ignore[attr-defined]
        c.drawString(0.75 * inch, 10.6 * inch, running)  # type: ignore[attr-defined]
        c.drawRightString(7.75 * inch, 0.5 * inch, f"Page {doc.page}")  # type: ignore[attr-defined]
        c.restoreState()  # type: ignore[attr-defined]

    doc = SimpleDocTemplate(
        str(out), pagesize=letter, leftMargin=0.75 * inch, rightMargin=0.75 * inch, topMargin=0.8 * inch,
        bottomMargin=0.75 * inch, title=title, author="Pfizer (label text); PDF typeset for this suite",
    )  # fmt: skip
    doc.build(story, onFirstPage=page, onLaterPages=page)


def _widths(rows: tuple[tuple[str, ...], ...], total: float) -> list[float]:
    n = len(rows[0])
    longest = [max(len(r[i]) for r in rows) or 1 for i in range(n)]
    weights = [min(max(w, 8), 60) for w in longest]
    return [total * w / sum(weights) for w in weights]


def main(src: Path) -> None:
    viagra = spl_blocks(src / "64f8040f-938d-4236-8e22-c838c9b5f8da.xml")
    (DOCS / "viagra-sildenafil.md").write_text(
        to_markdown("VIAGRA (sildenafil citrate) tablets, for oral use", viagra), encoding="utf-8"
    )
    halo = spl_blocks(src / "no-title.xml")
    (DOCS / "haloperidol-tablets.md").write_text(
        to_markdown("Haloperidol Tablets, USP", halo), encoding="utf-8"
    )
    lipitor = [
        b for b in spl_blocks(src / "lipitor-orig.xml") if not b.text.startswith("PRINCIPAL DISPLAY PANEL")
    ]
    to_pdf(
        "LIPITOR® (atorvastatin calcium) Tablets for oral administration",
        "LIPITOR® (atorvastatin calcium) Tablets — Full Prescribing Information",
        lipitor,
        DOCS / "lipitor-atorvastatin.pdf",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
