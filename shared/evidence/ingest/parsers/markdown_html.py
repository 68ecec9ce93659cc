"""HTML inside Markdown: an HTML block holding a table, a list or a definition list is read as the
HTML parser reads a page (rows as `| a | b |` lines, items as `- ` lines), and the `<br>` tags that
end a Markdown line are dropped, the line ending a span where it is a line of an address or a
listing (`read_html_blocks`).

Markdown keeps its source verbatim, but a block of HTML in it is not text a reader sees: GitHub
and every CommonMark renderer draw it as HTML. Left as source, a `<table>` of a privacy notice was
one run of tags and cells: no row was a span, the cells of different rows ran into one sentence.
"""

from __future__ import annotations

import re
from dataclasses import replace

from evidence.errors import DocumentParseError
from evidence.ingest.limits import DEFAULT_LIMITS
from evidence.ingest.offsets import SourceOffsets, line_starts

# The HTML parser's reader and its <br> rule, shared so that a table reads the same in a Markdown
# file as in a page (html.py holds no public entry point for a fragment).
from evidence.ingest.parsers.html import listing_breaks, read_html
from evidence.ingest.parsers.invisible import edit_document
from evidence.ingest.parsers.markdown import FENCE, atx_heading, code_ranges, inside_any
from evidence.records import ParsedDocument

#: CommonMark's HTML blocks of type 6: a line opening (up to three spaces in) with one of these
#: tags, open or closing, starts a block that runs to the next blank line.
_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|"
    "dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|"
    "header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|"
    "param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
_BLOCK_START = re.compile(rf"^ {{0,3}}</?(?:{_BLOCK_TAGS})(?=[ \t/>]|$)", re.IGNORECASE)
#: A block is read as HTML only when it holds structure the source hides: a table, a list, a
#: definition list or a collapsible section (a `<div>` of badges or a centred title is left as
#: written, as before).
_STRUCTURE = re.compile(r"</?(?:table|dl|ul|ol|details)(?=[\s/>])", re.IGNORECASE)
#: A `<br>` tag; those ending a line (a postal address written with them) are dropped.
_BR = re.compile(r"<br[ \t]*/?>", re.IGNORECASE)
#: A block tag's closing tag: a cell's `</td>` left at the end of its last paragraph when a blank
#: line split the table (the Markdown between the HTML pieces stays Markdown, CommonMark's
#: reading) is markup the renderer draws, not words: dropped where it ends a line, as a `<br>` is.
_END_TAG = re.compile(rf"</(?:{_BLOCK_TAGS})[ \t]*>", re.IGNORECASE)

#: (start, end, replacement, line ends inside the replacement) of one edit of the text.
_Edit = tuple[int, int, str, tuple[int, ...]]


def _blocks(text: str) -> tuple[list[_Edit], list[int]]:
    """The HTML blocks to read (each with its rendered text and line ends) and the line breaks
    after a line whose `<br>` tags are dropped (their edits among the first)."""
    lines = text.split("\n")
    starts = line_starts(lines)
    code = code_ranges(text)
    edits: list[_Edit] = []
    breaks: list[int] = []
    i = 0
    while i < len(lines):
        line, start = lines[i], starts[i]
        if code and inside_any(code, start):
            i += 1
            continue
        if _BLOCK_START.match(line):
            j = i + 1
            # The block ends at a blank line (CommonMark); a heading or a fence right under it
            # stays Markdown, so no section or code block is read into the HTML.
            while j < len(lines) and _continues_block(lines[j]):
                j += 1
            end = starts[j - 1] + len(lines[j - 1])
            block = text[start:end]
            if _STRUCTURE.search(block):
                rendered = _render(block)
                if rendered is not None:
                    edits.append((start, end, *rendered))
            i = j
            continue
        cut = _trailing_tags(line, _BR)
        if cut < len(line):
            edits.append((start + cut, start + len(line), "", ()))
            if i + 1 < len(lines):
                breaks.append(start + len(line))
        else:
            cut = _trailing_tags(line, _END_TAG)
            if cut < len(line) and line[:cut].strip():
                edits.append((start + cut, start + len(line), "", ()))
        i += 1
    return edits, breaks


def _trailing_tags(line: str, tag: re.Pattern[str]) -> int:
    """Where the run of `tag` matches (`<br>` tags, closing block tags) and the blanks around them
    ending `line` starts, or the line's length. Read from the end, tag by tag: a regex search for
    the run from each position rescanned every later tag (20 KB of `<br>` before a word took 3 s)."""
    pos = len(line)
    cut = pos
    while True:
        while pos and line[pos - 1] in " \t":
            pos -= 1
        if not pos or line[pos - 1] != ">":
            return cut
        lt = line.rfind("<", 0, pos)
        if lt < 0 or tag.fullmatch(line, lt, pos) is None:
            return cut
        pos = lt
        while pos and line[pos - 1] in " \t":
            pos -= 1
        cut = pos


def _continues_block(line: str) -> bool:
    return bool(line.strip()) and atx_heading(line) is None and FENCE.match(line) is None


def _render(block: str) -> tuple[str, tuple[int, ...]] | None:
    """An HTML block's text and line ends as the HTML parser writes them (None: unreadable)."""
    try:
        parser = read_html(block, "", DEFAULT_LIMITS.max_list_depth, texinfo_names=False)
    except DocumentParseError:
        return None
    text = "".join(parser.out).rstrip("\n")
    # A whole layout `<table>` is unlaid by the HTML parser itself (its `layout_ends`).
    return _unlayout(text, {e for e in parser.line_ends(text) if e < len(text)})


#: A table row as the HTML parser writes it, and the separator between its cells.
_ROW = re.compile(r"^\| .* \|$")
_CELL_SEP = re.compile(r"(?<!\\) \| ")


def _unlayout(text: str, ends: set[int]) -> tuple[str, tuple[int, ...]]:
    """A table whose every row has at most one cell of text (an image beside a paragraph, set
    side by side with a table) is layout, not data: each row is written as that cell's text, a
    line ending a span, so its paragraph is sentence-split as prose, not one table-row span of
    a whole paragraph."""
    lines = text.split("\n")
    rows = [_ROW.match(line) is not None for line in lines]
    out = list(lines)
    layout: set[int] = set()
    i = 0
    while i < len(lines):
        if not rows[i]:
            i += 1
            continue
        j = i
        while j < len(lines) and rows[j]:
            j += 1
        cells = [[c for c in _CELL_SEP.split(lines[k][2:-2]) if c.strip()] for k in range(i, j)]
        if all(len(c) <= 1 for c in cells):
            for k, c in zip(range(i, j), cells, strict=True):
                out[k] = c[0].replace("\\|", "|") if c else ""
                layout.add(k)
        i = j
    if not layout:
        return text, tuple(sorted(ends))
    old, new = line_starts(lines), line_starts(out)
    moved = {old[k] + len(lines[k]): new[k] + len(out[k]) for k in range(len(lines))}
    kept = {moved[e] for e in ends if e in moved}
    kept |= {new[k] + len(out[k]) for k in layout if k + 1 < len(out)}
    return "\n".join(out), tuple(sorted(kept))


def read_html_blocks(doc: ParsedDocument) -> ParsedDocument:
    """A Markdown document with its HTML blocks of tables and lists read as HTML and its line-end
    `<br>` tags dropped; sections, line ends and the CRLF source text follow the edits."""
    if "<" not in doc.text:
        return doc
    edits, breaks = _blocks(doc.text)
    if not edits:
        return doc
    plain = [(a, b, r) for a, b, r, _ in edits]
    source = doc.source_text
    at = SourceOffsets(source) if source is not None else None
    out = edit_document(
        doc,
        plain,
        source_edits=[(at(a), at(b), r) for a, b, r in plain] if at is not None else None,
    )
    shift = 0
    ends: list[int] = []
    mapped_breaks: list[int] = []
    k = 0
    for a, b, r, inner in edits:
        while k < len(breaks) and breaks[k] < a:
            mapped_breaks.append(breaks[k] + shift)
            k += 1
        ends.extend(a + shift + e for e in inner)
        shift += len(r) - (b - a)
    mapped_breaks.extend(x + shift for x in breaks[k:])
    ends.extend(listing_breaks(out.text, mapped_breaks))
    return replace(out, line_ends=tuple(sorted({*out.line_ends, *ends})))
