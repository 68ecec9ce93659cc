"""Rebuild this family's Markdown label from the FDA SPL XML it was converted from.

Usage (standard library only):

    python bench/qa-blind8/drug-label-markdown/build_markdown.py SPL_XML [OUT_MD]

SPL_XML is the DailyMed SPL named in SOURCES.md (sha256 checked). The label text is copied
verbatim from the SPL sections, in order; only the container changes: each section title becomes a
Markdown heading one level deeper than its parent section (the document title is `#`), paragraphs
stay paragraphs, SPL lists become bullets (nested lists indented), SPL tables become pipe tables
whose spanned cells are repeated empty so every row keeps its columns. Left out: the Highlights
(their text is a summary repeated in the full prescribing information), the product-data elements,
the package-label display panels and figures (images); footnote bodies in tables are kept as rows.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from xml.etree import ElementTree

V3 = "{urn:hl7-org:v3}"
WS = re.compile(r"\s+")
SOURCE_SHA256 = "b6df90e18a0a9559f45334fe4a263f1d8520a67f551b4becda6473504cec9e3e"
# SPL product data elements; package label / principal display panel (images and NDC lines only).
SKIP_CODES = {"48780-1", "51945-4"}
SKIP_INLINE = {f"{V3}footnote", f"{V3}renderMultiMedia", f"{V3}observationMedia"}
TITLE = "AGGRENOX (aspirin/extended-release dipyridamole) capsules, for oral use"
OUT = Path(__file__).resolve().parent / "documents" / "aggrenox-aspirin-dipyridamole.md"


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


def cell_text(cell: ElementTree.Element) -> str:
    # A cell may hold paragraphs or lists: join their text with spaces, as a browser would show it.
    return inline(cell).replace("|", "\\|")


def table_lines(table: ElementTree.Element) -> list[str]:
    lines: list[str] = []
    caption = table.find(f"{V3}caption")
    if caption is not None and inline(caption):
        lines += [inline(caption), ""]
    rows: list[list[str]] = []
    header = 0
    pending: dict[int, int] = {}  # column -> rows still covered by a rowspan from above
    trs = [
        (part, tr)
        for part in ("thead", "tbody", "tfoot")
        for g in table.findall(f"{V3}{part}")
        for tr in g.findall(f"{V3}tr")
    ] + [("tbody", tr) for tr in table.findall(f"{V3}tr")]
    for part, tr in trs:
        row: list[str] = []
        col = 0
        for cell in (c for c in tr if c.tag in (f"{V3}td", f"{V3}th")):
            while pending.get(col, 0) > 0:
                pending[col] -= 1
                row.append("")
                col += 1
            span = int(cell.get("colspan", "1"))
            down = int(cell.get("rowspan", "1"))
            row.append(cell_text(cell))
            row += [""] * (span - 1)
            for c in range(col, col + span):
                if down > 1:
                    pending[c] = down - 1
            col += span
        while pending.get(col, 0) > 0:
            pending[col] -= 1
            row.append("")
            col += 1
        if any(row):
            rows.append(row)
            header += part == "thead"
    if not rows:
        return lines
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    head = max(header, 1)
    lines.append("| " + " | ".join(rows[head - 1]) + " |")
    lines.append("|" + "|".join("---" for _ in range(width)) + "|")
    for r in rows[: head - 1] + rows[head:]:
        lines.append("| " + " | ".join(r) + " |")
    return [*lines, ""]


def list_lines(lst: ElementTree.Element, depth: int = 0) -> list[str]:
    lines: list[str] = []
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
            lines.append("  " * depth + "- " + text)
        for c in nested:
            lines += list_lines(c, depth + 1)
    return lines


def text_lines(text_el: ElementTree.Element) -> list[str]:
    lines: list[str] = []
    for child in text_el:
        if child.tag == f"{V3}list":
            lines += [*list_lines(child), ""]
        elif child.tag == f"{V3}table":
            lines += table_lines(child)
        elif child.tag not in SKIP_INLINE and inline(child):
            lines += [inline(child), ""]
    return lines


def section_lines(section: ElementTree.Element, level: int) -> list[str]:
    code = section.find(f"{V3}code")
    if code is not None and code.get("code") in SKIP_CODES:
        return []
    lines: list[str] = []
    title_el = section.find(f"{V3}title")
    title = inline(title_el).replace("\t", " ") if title_el is not None else ""
    if title:
        lines += ["#" * min(level + 1, 6) + " " + title, ""]
    text_el = section.find(f"{V3}text")
    if text_el is not None:
        lines += text_lines(text_el)
    for comp in section.findall(f"{V3}component"):
        sub = comp.find(f"{V3}section")
        if sub is not None:
            lines += section_lines(sub, level + 1 if title else level)
    return lines


def to_markdown(spl: bytes) -> str:
    root = ElementTree.fromstring(spl)
    body = root.find(f"{V3}component/{V3}structuredBody")
    if body is None:
        raise SystemExit("not an SPL document: no structuredBody")
    lines = [f"# {TITLE}", ""]
    for comp in body.findall(f"{V3}component"):
        sec = comp.find(f"{V3}section")
        if sec is not None:
            lines += section_lines(sec, 1)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    spl = Path(argv[0]).read_bytes()
    digest = hashlib.sha256(spl).hexdigest()
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{argv[0]}: sha256 {digest} is not the SPL named in SOURCES.md")
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.write_text(to_markdown(spl), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
