"""FDA Structured Product Labeling (SPL) XML → `ParsedDocument`.

SPL is the HL7 v3 format US drug labels are published in (DailyMed). A label is a tree of
`<section>`s, each with a LOINC `<code>` ("34070-3" = contraindications), a `<title>` and a
`<text>` of paragraphs, lists and tables; the product block names the drug (brand in
`manufacturedProduct/name`, generic in `genericMedicine/name`).

The document text we build is what every span offset refers to: one heading line per section
(nested sections are deeper levels), paragraphs separated by blank lines, list items as
"- item" / "1. item", table captions on their own line and table rows as "| a | b |" — the
layout the span extractor reads as bullets, captions and table rows. Highlights (`<excerpt>`)
repeat the body in short and are left out, so an answer is not found twice.

Parsed with the standard library's ElementTree (expat): it never fetches external entities,
and expat ≥ 2.4 caps entity expansion; on top of that a document declaring a DTD is refused
outright, which is what defusedxml's `forbid_dtd` does — SPL never needs one. lxml would add
~5 MB to the layer for nothing this parser needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.etree import ElementTree

from evidence.errors import DocumentParseError
from evidence.ingest.limits import DEFAULT_LIMITS, check_count
from evidence.records import ParsedDocument, Section

NS = "urn:hl7-org:v3"
_V3 = "{" + NS + "}"
_WS = re.compile(r"\s+")
_DTD = re.compile(rb"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)
#: Sections holding structured product data or packaging art, not label text.
_SKIP_CODES = frozenset({"48780-1"})
#: Nested list items indent two spaces per level up to this depth (deeper ones stay at it), so
#: the text grows linearly with the nesting.
_MAX_INDENT_LEVELS = 8
_BULLET_GLYPH = re.compile(r"[\u2022\u2023\u2043\u2219\u25aa\u25ab\u25cf\u25e6\u00b7*\-\u2013\u2014]?")
_FOOTNOTE = f"{_V3}footnote"
#: Left out of the text they sit in: media, and footnotes (each a paragraph after its block).
_INLINE_SKIP = frozenset({_FOOTNOTE, f"{_V3}renderMultiMedia", f"{_V3}observationMedia"})


def is_spl(data: bytes) -> bool:
    """An HL7 v3 `<document>`: the SPL namespace within the first few kB."""
    head = data[:4096]
    return b"urn:hl7-org:v3" in head and b"<document" in head


@dataclass
class _Builder:
    parts: list[str] = field(default_factory=list)
    length: int = 0
    heads: list[tuple[int, int, str, str]] = field(default_factory=list)  # (start, level, name, code)

    def block(self, text: str, *, tight: bool = False) -> None:
        """Append a block: a blank line before it (one newline for consecutive rows/items)."""
        if not text:
            return
        if self.length:
            sep = "\n" if tight else "\n\n"
            self.parts.append(sep)
            self.length += len(sep)
        self.parts.append(text)
        self.length += len(text)

    def heading(self, name: str, level: int, code: str) -> None:
        self.block(name)
        self.heads.append((self.length - len(name), level, name, code))

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _inline(el: ElementTree.Element) -> str:
    """An element's text with inline markup flattened and whitespace collapsed."""
    out: list[str] = []

    def walk(node: ElementTree.Element) -> None:
        if node is not el and node.tag in _INLINE_SKIP:
            if node.tail:
                out.append(node.tail)
            return
        if node.tag == f"{_V3}br":
            out.append(" ")
        if node.text:
            out.append(node.text)
        for child in node:
            walk(child)
            # tails are appended by the child call
        if node is not el and node.tail:
            out.append(node.tail)

    walk(el)
    return _WS.sub(" ", "".join(out)).strip()


def _code_of(section: ElementTree.Element) -> str:
    code = section.find(f"{_V3}code")
    return (code.get("code") or "").strip() if code is not None else ""


def _cells(tr: ElementTree.Element) -> list[str]:
    return [_inline(c).replace("|", "\\|") for c in tr if c.tag in (f"{_V3}td", f"{_V3}th")]


def _table(b: _Builder, table: ElementTree.Element) -> None:
    caption = table.find(f"{_V3}caption")
    if caption is not None:
        b.block(_inline(caption))
    first = True
    for part in (f"{_V3}thead", f"{_V3}tbody", f"{_V3}tfoot"):
        for group in table.findall(part):
            for tr in group.findall(f"{_V3}tr"):
                cells = _cells(tr)
                if any(cells):
                    b.block("| " + " | ".join(cells) + " |", tight=not first)
                    first = False
    for tr in table.findall(f"{_V3}tr"):  # rows directly under <table>
        cells = _cells(tr)
        if any(cells):
            b.block("| " + " | ".join(cells) + " |", tight=not first)
            first = False


def _detach(parent: ElementTree.Element, child: ElementTree.Element) -> None:
    """Remove `child` but keep its tail: in ElementTree the text after an element is that element's
    tail, so `<item><caption>•</caption>Take with food.</item>` loses the item's words with a
    plain `remove`."""
    if child.tail:
        siblings = list(parent)
        at = siblings.index(child)
        if at:
            prev = siblings[at - 1]
            prev.tail = (prev.tail or "") + child.tail
        else:
            parent.text = (parent.text or "") + child.tail
    parent.remove(child)


def _list(b: _Builder, lst: ElementTree.Element, depth: int = 0) -> None:
    ordered = lst.get("listType") == "ordered"
    first = True
    for n, item in enumerate(lst.findall(f"{_V3}item"), start=1):
        nested = [c for c in item if c.tag == f"{_V3}list"]
        for c in nested:
            _detach(item, c)
        caption = item.find(f"{_V3}caption")
        label = _inline(caption) if caption is not None else ""
        if caption is not None:
            _detach(item, caption)
        if _BULLET_GLYPH.fullmatch(label):
            # a caption that only draws the bullet is the list marker, not a label
            label = ""
        text = _inline(item)
        marker = f"{n}. " if ordered else "- "
        body = f"{label} {text}".strip() if label and not ordered else text
        if body:
            b.block("  " * min(depth, _MAX_INDENT_LEVELS) + marker + body, tight=not first)
            first = False
        for c in nested:
            _list(b, c, depth + 1)


def _footnotes(b: _Builder, block: ElementTree.Element) -> None:
    """The footnotes inside a paragraph, list or table, each a paragraph after it (where the FDA's
    stylesheet prints them: under the table). Inline they would cut a sentence or a cell in two;
    left out, their facts were lost ("Abnormal Vision: Mild to moderate in severity …", "Use
    with caution and with the lowest dose necessary")."""
    for note in block.iter(_FOOTNOTE):
        b.block(_inline(note))


def _text_blocks(b: _Builder, text_el: ElementTree.Element) -> None:
    if text_el.text and text_el.text.strip():
        b.block(_WS.sub(" ", text_el.text).strip())
    for child in text_el:
        tag = child.tag
        if tag == f"{_V3}paragraph":
            b.block(_inline(child))
        elif tag == f"{_V3}list":
            _list(b, child)
        elif tag == f"{_V3}table":
            _table(b, child)
        elif tag not in _INLINE_SKIP:  # media are left out; a footnote is placed just below
            b.block(_inline(child))
        _footnotes(b, child)
        if child.tail and child.tail.strip():
            b.block(_WS.sub(" ", child.tail).strip())


def _sections(parent: ElementTree.Element) -> Iterator[ElementTree.Element]:
    for comp in parent.findall(f"{_V3}component"):
        sec = comp.find(f"{_V3}section")
        if sec is not None:
            yield sec


def _walk(b: _Builder, section: ElementTree.Element, level: int) -> None:
    code = _code_of(section)
    if code in _SKIP_CODES:
        return
    title_el = section.find(f"{_V3}title")
    title = _inline(title_el) if title_el is not None else ""
    if title:
        b.heading(title, level, code)
    text_el = section.find(f"{_V3}text")
    if text_el is not None:
        _text_blocks(b, text_el)
    for sub in _sections(section):
        _walk(b, sub, level + 1 if title else level)


def _subject(root: ElementTree.Element) -> tuple[str, ...]:
    """Brand names, then generic names, each once (case-insensitively, first spelling kept)."""
    brands: list[str] = []
    generics: list[str] = []
    for product in root.iter(f"{_V3}manufacturedProduct"):
        name = product.find(f"{_V3}name")
        if name is not None:
            brands.append(_inline(name))
        for generic in product.iter(f"{_V3}genericMedicine"):
            gname = generic.find(f"{_V3}name")
            if gname is not None:
                generics.append(_inline(gname))
    seen: set[str] = set()
    out = []
    for n in (*brands, *generics):
        if n and n.lower() not in seen:
            seen.add(n.lower())
            out.append(n)
    return tuple(out)


def _depth(root: ElementTree.Element, limit: int) -> int:
    """How deep elements nest under `root`, walked with a stack; stops counting just past `limit`
    (the walk that builds the text recurses per level, so depth is checked before it)."""
    deepest = 0
    stack = [(root, 1)]
    while stack:
        el, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            break
        stack.extend((child, d + 1) for child in el)
    return deepest


def parse_spl(data: bytes, filename: str) -> ParsedDocument:
    """Parse SPL XML bytes; `DocumentParseError` names the file and what is wrong."""
    if _DTD.search(data[:65536]):
        raise DocumentParseError(
            filename, "XML with a DTD or entity declarations is refused (SPL needs none)"
        )
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise DocumentParseError(filename, f"malformed XML: {exc}") from exc
    check_count(
        filename,
        "XML element nesting depth",
        _depth(root, DEFAULT_LIMITS.max_xml_depth),
        DEFAULT_LIMITS.max_xml_depth,
        "SPL labels nest about 20 elements deep",
    )
    if root.tag != f"{_V3}document":
        raise DocumentParseError(filename, "not an SPL document (root is not an HL7 v3 <document>)")
    body = root.find(f"{_V3}component/{_V3}structuredBody")
    if body is None:
        raise DocumentParseError(filename, "SPL document without a structuredBody")
    b = _Builder()
    for sec in _sections(body):
        _walk(b, sec, 1)
    text = b.text
    if not text.strip():
        raise DocumentParseError(filename, "empty document (no text in the SPL sections)")
    subject = _subject(root)
    if subject:
        # The document <title> is usually the Highlights disclaimer; the product names are what
        # every chunk's search text should carry.
        title = f"{subject[0]} ({', '.join(subject[1:])})" if len(subject) > 1 else subject[0]
    else:
        title_el = root.find(f"{_V3}title")
        title = _inline(title_el) if title_el is not None else ""
    heads = b.heads
    sections = tuple(
        Section(name=name, char_start=start, char_end=(heads[i + 1][0] if i + 1 < len(heads) else len(text)),
                level=level, code=code)
        for i, (start, level, name, code) in enumerate(heads)
    )  # fmt: skip
    # A section titled by a question ("What is Lipravex?", "Questions or comments?": a medication
    # guide's or a drug facts label's) stays a fact span over its text, as a Markdown or HTML
    # heading does. Imported here: at this module's import the parsers package, which imports it,
    # is not yet whole.
    from evidence.ingest.parsers.markdown import question_headings

    questions = question_headings(sections)
    return ParsedDocument(
        text=text, title=title, sections=sections, fmt="spl", subject=subject, fact_headings=questions
    )
