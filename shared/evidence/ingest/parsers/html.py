"""HTML: the visible text (stdlib `html.parser`), blocks as line breaks, lists as "- " items,
tables as pipe rows; site chrome (nav, scripts, hidden and landmark subtrees) dropped."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from html.parser import HTMLParser
from typing import Any

from evidence.errors import DocumentParseError
from evidence.ingest.limits import DEFAULT_LIMITS, check_count
from evidence.ingest.parsers.layout import WS, Heading, flat_sections, table_cell, table_row
from evidence.records import ParsedDocument

_SKIP_TAGS = frozenset(
    {
        "script",
        "style",
        "nav",
        "noscript",
        "template",
        "svg",
        "iframe",
        "object",
        "select",
        "button",
        "dialog",
    }
)
# Landmarks that hold site chrome rather than content.
_SKIP_ROLES = frozenset({"navigation", "search", "menu", "menubar", "toolbar", "banner", "dialog"})
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_PARA_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "main", "aside", "blockquote", "address",
        "figure", "figcaption", "form", "fieldset", "details", "summary", "table", "ul", "ol", "dl",
        "caption", "pre", "body", "html", "center", "hgroup", "legend",
    }
)  # fmt: skip
_LINE_BLOCKS = frozenset({"li", "tr", "dt", "dd", "option"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
#: A reference list: a definition list outside any other of at least this many entries holding at
#: least this many characters (~2,500 word pieces, ~10 passages) heads a subsection at each term.
#: Session 51's audit pages put their outermost lists of >= 10 entries either at <= 7,200 characters
#: (a module's directive flags, a few options) or at >= 11,000 (a manual's variables, builtins,
#: expressions); 10,000 sits in that gap, where 20,000 left reference lists of 11,000-19,000 whole.
REFERENCE_LIST_ENTRIES = 10
REFERENCE_LIST_CHARS = 10_000
#: Between the terms of one entry while they are read; a name holds terms up to this length.
_TERM_SEP = "\x00"
MAX_ENTRY_NAME_CHARS = 100


def _heads_subsections(dl: list[Any]) -> bool:
    """A definition list (no API objects' list) heads subsections when it has at least
    `REFERENCE_LIST_ENTRIES` entries holding `REFERENCE_LIST_CHARS` characters, or a list nested
    in one of its definitions does: a short list of option groups over long lists of options is
    cut at every group and every option, not left one section of all of them."""
    if dl[5]:
        return False
    if len(dl[2]) >= REFERENCE_LIST_ENTRIES and dl[6] - dl[1] >= REFERENCE_LIST_CHARS:
        return True
    return any(_heads_subsections(inner) for entry in dl[2] for inner in entry[2])


def _entry_name(joined: str) -> str:
    """A reference list entry's name: its terms (`fit_names`)."""
    return fit_names([t for t in (WS.sub(" ", part).strip() for part in joined.split(_TERM_SEP)) if t])


def fit_names(terms: list[str]) -> str:
    """An entry's terms, comma-separated, as many as fit `MAX_ENTRY_NAME_CHARS` (a row of fifteen
    synonyms names its entry by the first few, then "…"); a single term is left whole."""
    names = list(terms)
    name = ", ".join(names)
    while len(names) > 1 and len(name) > MAX_ENTRY_NAME_CHARS:
        names.pop()
        name = ", ".join(names) + ", …"
    return name


#: The classes of the name in an API object's signature line: Sphinx's `sig-prename`/`sig-name`
#: (Sphinx >= 4, every domain: py, c, cpp, js …) and `descclassname`/`descname` (older Sphinx).
#: The module or class prefix and the name itself, read together, name the object's subsection.
_SIG_NAME_CLASSES = frozenset({"sig-name", "descname", "sig-prename", "descclassname"})
#: A texinfo definition line (`@deftypefn` and kin, makeinfo / texi2any / texi2html): "Category:
#: [type] name (args)" with no name class; its name is the first bold element after the category
#: label ("Function:", "Data type:", "Macro:"), which ends in a colon.
_DEF_CATEGORY = re.compile(r"^\s*[^\W\d][\w -]{0,40}:\s")
#: A C function's definition line whose source left the type and the name in one field: makeinfo
#: makes the return type bold ("Function: **void** *closure_alloc (size_t size)"); the word right
#: before the argument list is the name then.
_DEF_NAME_BEFORE_ARGS = re.compile(r"^\s*\**\s*([^\W\d]\w*)\s*\(")


_BOLD = frozenset({"b", "strong"})
#: Tags that stay inside a line of text: a paragraph holding only these is still one line.
_INLINE = frozenset(
    {"a", "b", "strong", "i", "em", "code", "span", "tt", "kbd", "var", "sup", "sub", "small", "u", "br"}
)
_MAX_BOLD_HEADING_WORDS = 10
# A bold paragraph that is a numbered clause's title may end on its full stop ("1. Definitions.",
# "2.1 Grant of Rights.": how licences title their clauses); one with a sentence inside is text.
_NUMBERED_CLAUSE = re.compile(r"^\d{1,3}(?:\.\d{1,3})*\.?\s+[^.!?;:]+\.$")
_LISTS = frozenset({"ul", "ol", "menu"})
# Navigation bars and permalink marks by class: Sphinx and MkDocs (`headerlink`), texinfo
# (`nav-panel`, `copiable-anchor`/`copiable-link`), DocBook (`navheader`/`navfooter`), rustdoc and
# GitHub (`anchor`). They repeat on every page of a manual and say nothing about its content.
_SKIP_CLASSES = frozenset(
    {
        "headerlink", "copiable-anchor", "copiable-link", "anchor", "anchorjs-link", "permalink",
        "nav-panel", "navheader", "navfooter", "navbar", "breadcrumb", "breadcrumbs", "skip-link",
        "method-click-advice", "method-source-code",
    }
)  # fmt: skip
#: RDoc (Ruby's darkfish pages): each method or attribute is a `<div class="method-heading">`
#: holding `<span class="method-name">` and its arguments, then its description.
_RDOC_HEADING = "method-heading"
_RDOC_NAME = "method-name"
# texinfo's `<div class="header">` is its "Next: … Previous: … Up: … [Index]" bar; elsewhere a
# "header" class may hold the page's title, so it is skipped only in makeinfo's output.
_TEXINFO_SKIP_CLASSES = frozenset({"header"})
# rustdoc's controls: the right-hand column before every item's signature ("1.0.0 · Source":
# `<span class="rightside">`, fell into the section of the item before, ~150 times on a type's
# page), the page's own "Source" link (`<a class="src">`), the "Expand description" / "Show 12
# methods" toggles (`<summary class="hideme">`) and its skip link; such class names are common
# elsewhere, so only in rustdoc's pages.
_RUSTDOC_SKIP_CLASSES = frozenset({"rightside", "src", "hideme", "skip-main-content"})
# List items indent by two spaces per level up to this depth only: the indentation shows nesting,
# and a file of 1,000 nested lists would otherwise write ~1,000 spaces per item (quadratic text).
_MAX_INDENT_LEVELS = 8
# html.parser, at close(), re-reads the rest of the document from each tag or comment that never
# ends (one scan to the end of the file each: 20 KB of "<a " took 9 s). A few happen in a
# truncated file; past this many the document is refused instead of scanned again and again.
_MAX_UNTERMINATED = 8
# What a permalink shows: an `<a href="#…">` holding only one of these is a mark, not text (ⓘ:
# rustdoc's "notable traits" tooltip, `<a href="#" class="tooltip">ⓘ</a>`, after a signature).
_PERMALINK_MARKS = frozenset({"¶", "§", "#", "🔗", "⚓", "⁋", "ⓘ"})
# The `_SKIP_CLASSES` that mark permalinks: on an `<a href="#…">` only its marks are dropped.
_PERMALINK_CLASSES = frozenset(
    {"headerlink", "copiable-anchor", "copiable-link", "anchor", "anchorjs-link", "permalink"}
)


#: CSS grid tables built of `div`s: javadoc's summary tables (`summary-table`, with a
#: `two-column-summary` … class giving the column count); the header cells' and a row's last
#: cell's classes.
_GRID_CLASSES = frozenset({"summary-table", "details-table", "div-table", "css-table"})
_GRID_HEADER = frozenset({"table-header", "th"})
_GRID_LAST = frozenset({"col-last"})
_COLUMN_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _permalink_mark(text: str) -> bool:
    """A permalink's mark: one of `_PERMALINK_MARKS`, or an icon font's glyph (private-use code
    points only: MkDocs' `headerlink` shows Font Awesome's U+F0C1)."""
    return text in _PERMALINK_MARKS or (bool(text) and all(unicodedata.category(c) == "Co" for c in text))


def _classes(attrs: list[tuple[str, str | None]]) -> set[str]:
    return {c for key, value in attrs if key == "class" and value for c in value.lower().split()}


# Pop-ups a page's script shows on demand, by id: mdBook's keyboard-shortcuts help ("Press ? to
# show this help"), on every page of a book before its text, its `<h2>` heading the page.
_SKIP_IDS = frozenset({"mdbook-help-container"})


def _hidden(attrs: list[tuple[str, str | None]]) -> bool:
    for key, value in attrs:
        if key == "id" and value in _SKIP_IDS:
            return True
        if key == "hidden" or (key == "aria-hidden" and value == "true"):
            return True
        if key == "role" and value and value.strip().lower() in _SKIP_ROLES:
            return True
        if key == "style" and value and "display:none" in value.replace(" ", "").lower():
            return True
    return False


class HtmlText(HTMLParser):
    """Streams visible text into lines; tracks headings as sections and tables as pipe rows."""

    def __init__(
        self,
        filename: str = "",
        max_list_depth: int = DEFAULT_LIMITS.max_list_depth,
        *,
        texinfo_names: bool = True,
    ) -> None:
        super().__init__(convert_charrefs=True)
        self.filename = filename
        self.max_list_depth = max_list_depth
        self.closing = False  # in close(): constructs still open now run to the end of the input
        self.unterminated = 0
        self.out: list[str] = []
        self.length = 0
        self.pending_break = 0  # newlines owed before the next text (1 line, 2 paragraph)
        self.trailing_newlines = 0  # newlines already at the end of the output
        self.after_prefix = False  # just wrote a list marker: breaks wait for the item's text
        self.space_pending = False
        self.br_pending = False  # the owed line break is a <br>'s
        # Offsets of the "\n" of <br> line breaks (`listing_breaks` keeps those that end a line of
        # a listing or an address, not a wrapped sentence). A <pre> block's lines are not marked
        # (one span per line of code cost 3 answers of 839, bench/data/session41/ingest13.md); only
        # its long runs are cut into pieces (`listing_cuts`), kept in `pre_ends`.
        self.br_ends: list[int] = []
        self.pre_ends: list[int] = []
        # A definition list's entries (`<dt>` term, `<dd>` definition): the line break before each
        # new term ends a span, so a list of short entries without sentence ends (a man page's
        # `\a` / "alert (bell)", `\b` / "backspace" …) is one span per entry, each term with its
        # definition, not one run of them all.
        self.dt_ends: list[int] = []
        self.dt_pending = False
        # Open `<dl>`s, outermost first: [level of the heading before it, start offset, entries as
        # [term start, term parts], a term open, a definition since the last term]. An outermost
        # list long enough is a reference list (`_end_definition_list`).
        self.dls: list[list[Any]] = []
        self.fact_heads: list[int] = []
        # API object descriptions (Sphinx's `<dl class="py function">` / `<dt class="sig-object"
        # id=…>`, any domain): each documented object heads a subsection named by its signature's
        # name, methods under their class. Open objects: [depth in `dls` of its list, level, name].
        # The signature `<dt>` being read: [text start, name parts, name tag, its open count].
        self.objects: list[list[Any]] = []
        self.sig: list[Any] | None = None
        # An open RDoc method heading: [text start, name parts, its div depth, open name spans].
        self.rdoc: list[Any] | None = None
        self.last_head: tuple[int, str] = (1, "")  # the last heading's level and name, terms aside
        self.bold_head: tuple[int, int, str] | None = None  # the last bold paragraph's heading
        # After a reference list, the section it interrupted, until the next heading: its text
        # there is no part of the list's last entry.
        self.resume: tuple[int, str] | None = None
        # Open CSS grid tables made of `div`s (`_grid_start`): per grid [div depth at its start,
        # column count or 0 (rows end at a last-column cell), header cells still counting].
        self.grids: list[list[int]] = []
        self.div_depth = 0
        self.grid_last = False  # the open grid cell is a row's last (`col-last`)
        self.pre_start = (0, 0)  # (index in `out`, offset) where the outermost open <pre> began
        # Skipped subtree: its tag and nesting depth of that same tag. Counting only that tag keeps
        # unclosed <p>/<li> inside a <nav> from swallowing the rest of the page.
        self.skip_tag = ""
        self.skip_depth = 0
        self.pre_depth = 0
        self.lists: list[list[int]] = []  # per open list: [ordered, counter]
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        # The open `<table>` (nested ones inside it counted in its region): [nesting depth, out
        # index and offset where it starts, the recorded offsets' counts then, its rows as (out
        # index, text cells)]. A table of at most one text cell per row is layout (`_end_table`).
        self.table: list[Any] | None = None
        self.layout_ends: list[int] = []
        self.heading: tuple[int, int, list[str]] | None = None  # (level, start, parts)
        self.heads: list[Heading] = []
        self.title_parts: list[str] | None = None
        self.title = ""
        self.first_h1 = ""
        self.texinfo = False  # made by makeinfo / texi2any (its <meta name="Generator">)
        self.rustdoc = False  # made by rustdoc (likewise)
        # Made by a texinfo converter, texi2html included: its `<dt>`s may be definition lines
        # (unless `texinfo_names` is off: a page of few of them is read as if it had none).
        self.texinfo_names = texinfo_names
        self.texinfo_defs = False
        self.texinfo_entries = 0  # definition lines named
        self.in_fragment_link = False  # inside <a href="#…">: a lone ¶ there is a permalink
        # The open <p>: [text start, its text, all of it bold so far, open <b>/<strong>, how many
        # of its text parts its first line holds when that line is all bold and a <br> ends it].
        # A short paragraph that is nothing but bold text, or whose first line is, is a heading
        # (`_end_paragraph`).
        self.para: list[Any] | None = None

    # Each construct parser returns -1 when its construct runs to the end of the input: count them.
    def _counted(self, result: int) -> int:
        if result < 0 and self.closing:
            self.unterminated += 1
            check_count(
                self.filename,
                "malformed HTML: tags or comments that never end",
                self.unterminated,
                _MAX_UNTERMINATED,
                "close them (each one is re-read to the end of the file)",
            )
        return result

    def parse_starttag(self, i: int) -> int:
        return self._counted(super().parse_starttag(i))

    def parse_endtag(self, i: int) -> int:
        return self._counted(super().parse_endtag(i))

    def parse_comment(self, i: int, report: bool = True) -> int:
        return self._counted(super().parse_comment(i, report))

    def parse_pi(self, i: int) -> int:
        return self._counted(super().parse_pi(i))

    def parse_html_declaration(self, i: int) -> int:
        return self._counted(super().parse_html_declaration(i))

    # output helpers
    def _emit(self, s: str) -> None:
        self.out.append(s)
        self.length += len(s)
        body = s.rstrip("\n")
        self.trailing_newlines = (self.trailing_newlines + len(s)) if not body else len(s) - len(body)

    @property
    def _mid_line(self) -> bool:
        return self.length > 0 and self.trailing_newlines == 0 and not self.after_prefix

    def _break(self, n: int) -> None:
        if self.lists:
            n = 1  # a <p> or <div> inside a list item must not put a blank line inside the list
        if self.length and not self.after_prefix:
            self.pending_break = max(self.pending_break, n)
        self.space_pending = False
        self.br_pending = False

    def _line_break(self) -> None:
        """<br>: each one adds a line, so two make a blank line."""
        if self.length and not self.after_prefix:
            self.pending_break = min(self.pending_break + 1, 2)
            self.br_pending = True
        self.space_pending = False

    def _start_text(self) -> None:
        need = self.pending_break - self.trailing_newlines
        if self.pending_break and self.length and need > 0:
            if self.br_pending and self.pending_break == 1:
                self.br_ends.append(self.length)
            if self.dt_pending and self.pending_break == 1:
                self.dt_ends.append(self.length)
            self._emit("\n" * need)
        self.pending_break = 0
        self.br_pending = False
        self.dt_pending = False
        if self.resume is not None and self.heading is None:
            self.heads.append((self.length, self.resume[0], self.resume[1]))
            self.fact_heads.append(self.length)  # no heading line: the section's text resumes
            self.resume = None

    def _text_start(self) -> int:
        """Where the next text written starts: the owed line breaks are written first, and a
        pending space mid-line comes before it (`_write`)."""
        self._start_text()
        return self.length + (1 if self.space_pending and self._mid_line else 0)

    def _write(self, text: str) -> None:
        if not text:
            return
        self._start_text()
        if self.space_pending and self._mid_line:
            self._emit(" ")
        self.space_pending = False
        self._emit(text)
        self.after_prefix = False

    def _write_prefix(self, prefix: str) -> None:
        self._start_text()
        self._emit(prefix)
        self.after_prefix = True
        self.pending_break = 0
        self.space_pending = False

    # parser callbacks
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._starts_outside_text(tag, attrs) or (tag == "div" and self._grid_div(attrs)):
            return
        self._note_rdoc_tag(tag, attrs)
        if tag == "p" and self.cell is None and self.row is None and not self.pre_depth:
            self._start_paragraph()
        elif tag in _BOLD and self.para is not None:
            self.para[3] += 1
        elif tag not in _INLINE:
            self.para = None  # a block inside the paragraph: not a one-line bold heading
        if (self.cell is not None or self.row is not None) and not self._leaves_layout_table(tag):
            self._start_in_table(tag)
        elif tag == "br":
            self._note_line_break()
            if self.pre_depth:
                self._write_raw_pre("\n")
            else:
                self._line_break()
        elif tag == "hr":
            self._break(2)
        elif tag in _HEADINGS:
            self._break(2)
            self.heading = (_HEADINGS[tag], -1, [])
            self.resume = None
        elif tag in _LISTS:
            self._break(2 if not self.lists else 1)
            self.lists.append([1 if tag == "ol" else 0, 0])
            check_count(
                self.filename,
                "list nesting depth",
                len(self.lists),
                self.max_list_depth,
                "flatten the lists or close their tags",
            )
        elif tag == "li":
            self._start_item()
        elif tag == "tr":
            self._break(1)
            self.row = []
        elif tag == "pre":
            self._break(2)
            if not self.pre_depth:
                self.pre_start = (len(self.out), self.length)
            self.pre_depth += 1
        else:
            self._start_block(tag, attrs)

    def _grid_div(self, attrs: list[tuple[str, str | None]]) -> bool:
        """A `div` that opens a CSS grid table (javadoc's `summary-table`, an ARIA `table`/`grid`)
        or one of its cells (a child `div` of such a grid): read as a table's cell, so each row is
        a `| a | b |` line, not one run of text (inside a list item every `div` is a line of one
        paragraph). False for any other `div`."""
        self.div_depth += 1
        classes = _classes(attrs)
        role = (dict(attrs).get("role") or "").strip().lower()
        if self.grids and self.div_depth == self.grids[-1][0] + 1 and self.row is not None:
            grid = self.grids[-1]
            self._flush_cell()
            header = bool(classes & _GRID_HEADER) or role == "columnheader"
            if grid[2] and not header:
                grid[2] = 0  # the header cells are over: they were the columns, when not given
                grid[1] = grid[1] or len(self.row)
                self._next_row()
            elif not grid[2] and grid[1] and len(self.row) >= grid[1]:
                self._next_row()
            self.cell = []
            self.grid_last = bool(classes & _GRID_LAST)
            return True
        if self.row is None and (classes & _GRID_CLASSES or role in ("table", "grid")):
            words = (c.split("-", 1) for c in classes)
            cols = next(
                (_COLUMN_WORDS.get(w[0], 0) for w in words if len(w) == 2 and w[1].startswith("column")), 0
            )
            self._break(2)
            self.grids.append([self.div_depth, cols, 1])
            self.row = []
            return True
        return False

    def _next_row(self) -> None:
        if self.row:
            self._flush_row()
        self.row = []

    def _grid_div_end(self) -> bool:
        """The end of a grid's cell (a row ends after its last column) or of the grid itself."""
        grid = self.grids[-1]
        depth = self.div_depth
        self.div_depth -= 1
        if depth == grid[0] + 1 and self.row is not None:
            self._flush_cell()
            if not grid[2] and ((grid[1] and len(self.row) >= grid[1]) or (not grid[1] and self.grid_last)):
                self._next_row()
            return True
        if depth == grid[0]:
            self._flush_row()
            self.grids.pop()
            self.row = [] if self.grids else None
            self._break(2)
            return True
        return False

    def _starts_outside_text(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        """True when the tag writes no text: inside a skipped subtree, <title>, or a skipped tag."""
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return True
        if tag == "title" and self.title_parts is None and not self.title:
            self.title_parts = []
            return True
        if tag == "meta":
            self._note_generator(attrs)
        if tag == "a":
            self.in_fragment_link = any(k == "href" and (v or "").startswith("#") for k, v in attrs)
        if tag in _SKIP_TAGS or _hidden(attrs) or self._chrome(tag, attrs):
            if tag not in _VOID:
                self.skip_tag, self.skip_depth = tag, 1
            return True
        return False

    def _note_generator(self, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if (values.get("name") or "").lower() == "generator":
            content = (values.get("content") or "").lower()
            self.texinfo = self.texinfo or "makeinfo" in content or "texi2any" in content
            self.rustdoc = self.rustdoc or content == "rustdoc"
            self.texinfo_defs = self.texinfo_names and (self.texinfo or "texi2html" in content)

    def _chrome(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        """Navigation bars and permalinks, by their class."""
        classes = _classes(attrs)
        if not classes:
            return False
        if tag == "a" and self.in_fragment_link and classes & _PERMALINK_CLASSES:
            # A permalink may wrap the text it links to (mandoc: `<h1><a class="permalink"
            # href="#NAME">NAME</a></h1>`, each option's `<dt>` too): not skipped, but as any
            # `<a href="#…">` its lone mark (¶, §, an icon font's glyph) is dropped in `handle_data`.
            return False
        return (
            bool(classes & _SKIP_CLASSES)
            or (self.texinfo and bool(classes & _TEXINFO_SKIP_CLASSES))
            or (self.rustdoc and bool(classes & _RUSTDOC_SKIP_CLASSES))
        )

    def _start_item(self) -> None:
        self._break(1)
        depth = min(max(len(self.lists) - 1, 0), _MAX_INDENT_LEVELS)
        marker = "- "
        if self.lists and self.lists[-1][0]:
            self.lists[-1][1] += 1
            marker = f"{self.lists[-1][1]}. "
        self._write_prefix("  " * depth + marker)

    def _start_block(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.sig is not None and tag in ("dt", "dd"):
            # `</dt>` may be left out (HTML implies it at the next `<dd>` or `<dt>`): the term
            # ends there, or a signature left open would swallow the rest of the page.
            self._end_signature(self.sig)
        if self.sig is not None or tag == "dt":
            self._note_signature_tag(tag, attrs)
        self._block_break(tag)
        if tag == "table" and not self.grids and not self.pre_depth:
            self._start_table()
        if tag == "dt" and not self.pre_depth:
            self.dt_pending = True
        if tag == "dl" and not self.pre_depth:
            self.dls.append([self.last_head, self.length, [], False, True, False])
        elif tag in ("dt", "dd") and self.dls:
            top = self.dls[-1]
            if tag == "dt" and top[4]:
                top[2].append([-1, [], []])
            elif tag == "dt" and top[2] and top[2][-1][1]:
                top[2][-1][1].append(_TERM_SEP)  # terms one after another name one entry
            top[3] = tag == "dt"
            top[4] = tag == "dd"

    def _block_break(self, tag: str) -> None:
        if tag in _PARA_BLOCKS:
            self._break(2)
        elif tag in _LINE_BLOCKS:
            self._break(1)

    def _leaves_layout_table(self, tag: str) -> bool:
        """A listing set in a table only to indent it (texi2html: `<td>&nbsp;</td><td><pre>`, the
        `<pre>` the first text of its row) is read as the listing it is, its lines kept, not
        flattened into one table-row span: the row is dropped and the `<pre>` read as text."""
        layout = (
            tag == "pre"
            and self.cell is not None
            and self.row is not None
            and not self.grids
            and not "".join(self.cell).strip()
            and not any(self.row)
        )
        if layout:
            self.row = self.cell = None
        return layout

    def _start_in_table(self, tag: str) -> None:
        if tag == "table" and self.table is not None:
            self.table[0] += 1  # a table nested in a cell: part of the outer one's region
        if tag in ("td", "th"):
            if self.row is None:
                self.row = []
            self._flush_cell()
            self.cell = []
        elif tag == "tr":
            self._flush_row()
            self.row = []
        elif tag == "br" and self.cell is not None:
            self.cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "br":
            # "</br>" breaks the line as "<br>" does: HTML's parsing rules read it so, as every
            # browser does ("<b>Apache License</b></br>Version 2.0": a Word page's title block).
            self.handle_starttag(tag, [])
        else:
            self._end_tag(tag)

    def _end_tag(self, tag: str) -> None:
        if tag == "a":
            self.in_fragment_link = False
        self._end_rdoc_tag(tag)
        if self.sig is not None and not self.skip_depth:
            if tag == "dt":
                self._end_signature(self.sig)
            elif self.sig[3] and tag == self.sig[2]:
                self.sig[3] -= 1
                if not self.sig[3]:
                    self.sig[5] = len(self.sig[4])
        if tag == "title" and self.title_parts is not None:
            self.title = WS.sub(" ", "".join(self.title_parts)).strip()
            self.title_parts = None
        elif self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth -= 1
        elif tag == "div" and self.grids and self._grid_div_end():
            return
        elif tag == "div" and not self.grids:
            self.div_depth = max(self.div_depth - 1, 0)
            self._block_break(tag)
        elif self.row is not None:
            self._end_in_table(tag)
        elif tag == "p" and self.para is not None:
            self._end_paragraph(*self.para)
            self._block_break(tag)
        elif tag in _BOLD and self.para is not None:
            self.para[3] = max(self.para[3] - 1, 0)
        elif tag in _HEADINGS and self.heading is not None:
            self._end_heading(*self.heading)
        else:
            self._end_block(tag)

    def _end_block(self, tag: str) -> None:
        if tag in _LISTS:
            if self.lists:
                self.lists.pop()
            self._break(2 if not self.lists else 1)
        elif tag in ("dl", "dt") and self.dls:
            if tag == "dt":
                self.dls[-1][3] = False
            elif tag == "dl":
                if self.sig is not None:
                    self._end_signature(self.sig)
                dl = self.dls.pop()
                if dl[5]:
                    self._end_object()
                else:
                    self._end_definition_list(dl)
            self._block_break(tag)
        elif tag == "pre":
            if self.pre_depth == 1:
                index, offset = self.pre_start
                block = "".join(self.out[index:])
                self.pre_ends.extend(offset + k for k in listing_cuts(block))
            self.pre_depth = max(self.pre_depth - 1, 0)
            self._break(2)
        else:
            if tag == "table" and not self.grids and not self.pre_depth:
                self._end_table()  # as its start was counted (`_start_block`)
            self._block_break(tag)

    def _end_in_table(self, tag: str) -> None:
        """Inside a table only cells, rows and the table itself end anything."""
        if tag in ("td", "th"):
            self._flush_cell()
        elif tag == "tr":
            self._flush_row()
        elif tag == "table":
            self._flush_row()
            self._end_table()
            self._break(2)

    def _start_paragraph(self) -> None:
        if self.para is not None:
            # `</p>` left out: a `<p>` ends the open paragraph (as HTML implies), which may be a
            # bold heading ("<p><b>3. Grant of Patent License.</b><p>").
            self._end_paragraph(*self.para)
        self.para = [-1, [], True, 0, None]

    def _note_paragraph(self, data: str, para: list[Any]) -> None:
        """The open paragraph's text, where it starts, and whether all of it is bold."""
        if data.strip():
            if not para[3]:
                para[2] = False
            if para[0] < 0:
                para[0] = self._text_start()
        para[1].append(data)

    def _note_line_break(self) -> None:
        """A `<br>` in the open paragraph: the first one after all-bold text closes a bold first line."""
        para = self.para
        if para is not None and para[4] is None and para[2] and para[0] >= 0:
            para[4] = len(para[1])

    def _end_paragraph(
        self, start: int, parts: list[str], bold: bool, _open: int, first_line: int | None
    ) -> None:
        """A paragraph of nothing but bold text, short and without a sentence's closing mark, is
        a heading one level under the last one ("<p><b>Maximum Number Of Columns</b></p>": how
        many manuals title the items of a list). So is a paragraph's bold first line that a
        `<br>` ends over lines that are not bold, on the same terms: a title block ("<p><b>Apache
        License</b><br>Version 2.0, January 2004<br>…</p>")."""
        self.para = None
        if not bold and first_line is not None:
            parts, bold = parts[:first_line], True
        name = WS.sub(" ", "".join(parts)).strip()
        if not bold or start < 0 or not name or len(name.split()) > _MAX_BOLD_HEADING_WORDS:
            return
        if (name[-1] in ".:;,!?" and not _NUMBERED_CLAUSE.match(name)) or not any(c.isalpha() for c in name):
            return
        if self.heads and self.heads[-1] is self.bold_head:
            # The next bold heading in a row is its sibling ("1. DEFINITIONS", "2. GRANT OF
            # RIGHTS", …), not a subsection of it: each one level deeper named the previous
            # clause as every later clause's parent, and ran them all down to level 6.
            level = self.bold_head[1]
        else:
            level = min((self.heads[-1][1] + 1) if self.heads else 2, 6)
        self.bold_head = (start, level, name)
        self.heads.append(self.bold_head)
        self.last_head = (level, name)

    def _end_definition_list(self, dl: list[Any]) -> None:
        """A definition list of many entries and much text (a manual's variables or options:
        `git config`'s hundreds) would leave one section holding most of the page: each of its
        terms heads a subsection of its entry instead, the term line staying in its span. Lists
        nest (a manual's option groups, each a `<dd>` holding its options' `<dl>`): read when the
        outermost one ends, as a tree (`_head_entries`)."""
        dl.append(self.length)  # dl[6]: where the list ends
        if self.dls:
            outer = self.dls[-1][2]
            if outer:
                outer[-1][2].append(dl)  # nested in the definition of the enclosing list's entry
            return
        parent = dl[0]
        if _heads_subsections(dl):
            self._head_entries(dl, min(parent[0] + 1, 6))
            self.resume = parent if parent[1] else None

    def _head_entries(self, dl: list[Any], level: int) -> None:
        """Each term of `dl` heads a subsection at `level`; a nested list that heads subsections
        itself does so one level under its entry; a list of one entry heads nothing and its nested
        lists head at its level (as the plain-text term lists, `plaintext.reference_lists`)."""
        entries = dl[2]
        for at, parts, nested in entries:
            name = _entry_name("".join(parts))
            own = len(entries) > 1 and at >= 0 and bool(name)
            if own:
                self.heads.append((at, level, name))
                self.fact_heads.append(at)
            for inner in nested:
                if _heads_subsections(inner):
                    self._head_entries(inner, min(level + 1, 6) if own else level)

    def _note_signature_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """A `<dt>` with an `id` (or Sphinx's `sig-object` class), the first term of its list, may
        be an API object's signature; inside it, the elements whose class marks the name."""
        classes = _classes(attrs)
        if self.sig is None:
            if self.pre_depth or self.row is not None or not self.dls or self.dls[-1][5]:
                return
            if "sig-object" in classes or self.texinfo_defs or any(k == "id" and v for k, v in attrs):
                self.sig = [-1, [], "", 0, [], -1]
                self.resume = None  # the signature line opens the object's section, not the last one's
        elif self.sig[3]:
            if tag == self.sig[2]:
                self.sig[3] += 1
        elif (classes & _SIG_NAME_CLASSES and tag not in _VOID) or self._texinfo_name(tag):
            self.sig[2], self.sig[3] = tag, 1

    def _note_rdoc_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """An RDoc method heading opens (outside listings, tables and headings), or its name."""
        if self.rdoc is not None:
            if tag == "span" and (self.rdoc[3] or _RDOC_NAME in _classes(attrs)):
                self.rdoc[3] += 1
        elif (
            tag == "div"
            and _RDOC_HEADING in _classes(attrs)
            and not self.pre_depth
            and self.row is None
            and self.heading is None
            and self.sig is None
        ):
            self.rdoc = [-1, [], self.div_depth, 0]

    def _note_rdoc(self, data: str) -> None:
        """An RDoc method heading's text: where it starts, and its name."""
        rdoc = self.rdoc
        if rdoc is None or not data.strip():
            return
        if rdoc[0] < 0:
            rdoc[0] = self._text_start()
        if rdoc[3]:
            rdoc[1].append(data)

    def _end_rdoc_tag(self, tag: str) -> None:
        """The end of an RDoc method heading's name span, or of the heading's own `div`."""
        rdoc = self.rdoc
        if rdoc is None or self.skip_depth or self.grids:
            return
        if tag == "span" and rdoc[3]:
            rdoc[3] -= 1
        elif tag == "div" and self.div_depth == rdoc[2]:
            self._end_rdoc_heading(rdoc)

    def _end_rdoc_heading(self, rdoc: list[Any]) -> None:
        """An RDoc method or attribute heads a subsection named by its name, one level under the
        page's last heading ("Public Instance Methods"), as a Sphinx object's signature does
        (`_end_signature`): a page of forty methods was one section. Its line (name and
        arguments) stays a fact span."""
        self.rdoc = None
        name = WS.sub(" ", "".join(rdoc[1])).strip()[:MAX_ENTRY_NAME_CHARS]
        if rdoc[0] < 0 or not name:
            return
        self.heads.append((rdoc[0], min(self.last_head[0] + 1, 6), name))
        self.fact_heads.append(rdoc[0])

    def _texinfo_name(self, tag: str) -> bool:
        """A texinfo definition line's name: its first bold element after the category label."""
        sig = self.sig
        return (
            sig is not None
            and self.texinfo_defs
            and tag in _BOLD
            and not sig[1]
            and bool(_DEF_CATEGORY.match("".join(sig[4])))
        )

    def _note_signature(self, data: str, sig: list[Any]) -> None:
        """A signature's text: where it starts, and the parts of it that name the object."""
        if not data.strip():
            return
        if sig[0] < 0:
            sig[0] = self._text_start()
        sig[4].append(data)
        if sig[3]:
            sig[1].append(data)

    def _end_signature(self, sig: list[Any]) -> None:
        """A signature whose name was marked heads a subsection at its line (the line stays a
        fact span: a question about a parameter's default is answered by it), one level under the
        object it is documented in, or under the last heading."""
        self.sig = None
        name = WS.sub(" ", "".join(sig[1])).strip()[:MAX_ENTRY_NAME_CHARS]
        after = (
            _DEF_NAME_BEFORE_ARGS.match("".join(sig[4][sig[5] :]))
            if self.texinfo_defs and sig[5] >= 0
            else None
        )
        if after:
            name = after.group(1)[:MAX_ENTRY_NAME_CHARS]
        if sig[0] < 0 or not name or not self.dls:
            return
        level = min((self.objects[-1][1] if self.objects else self.last_head[0]) + 1, 6)
        self.heads.append((sig[0], level, name))
        self.fact_heads.append(sig[0])
        self.objects.append([len(self.dls), level, name])
        self.texinfo_entries += self.texinfo_defs
        self.dls[-1][5] = True

    def _end_object(self) -> None:
        """An object's list ends: what follows until the next heading is the enclosing object's
        text (a class's text after a method), or the section's the objects interrupted."""
        depth = len(self.dls) + 1
        while self.objects and self.objects[-1][0] >= depth:
            self.objects.pop()
        parent = (self.objects[-1][1], self.objects[-1][2]) if self.objects else self.last_head
        self.resume = parent if parent[1] else None

    def _end_heading(self, level: int, start: int, parts: list[str]) -> None:
        name = WS.sub(" ", "".join(parts)).strip()
        if start >= 0 and name:
            self.heads.append((start, level, name))
            self.last_head = (level, name)
            if level == 1 and not self.first_h1:
                self.first_h1 = name
        self.heading = None
        self._break(2)

    def close(self) -> None:
        self.closing = True
        super().close()
        if self.row is not None:
            self._flush_row()  # a table still open at the end of the document

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        if self.title_parts is not None:
            self.title_parts.append(data)
            return
        if self.skip_depth or (self.in_fragment_link and _permalink_mark(data.strip())):
            return
        if self.cell is not None:
            self.cell.append(data)
            return
        if self.row is not None:
            return  # stray text between cells
        if self.pre_depth:
            self._write_raw_pre(data)
            return
        if self.para is not None:
            self._note_paragraph(data, self.para)
        if self.heading is not None and self.heading[1] < 0 and data.strip():
            start = self._text_start()
            self.heading = (self.heading[0], start, self.heading[2])
        if self.heading is not None:
            self.heading[2].append(data)
        if self.dls and self.dls[-1][3] and self.dls[-1][2]:
            self._note_term(data, self.dls[-1][2][-1])
        if self.sig is not None:
            self._note_signature(data, self.sig)
        self._note_rdoc(data)
        # str.split() also breaks on no-break and thin spaces: they render as one space.
        words = data.split()
        if data[:1].isspace():
            self.space_pending = True
        for n, word in enumerate(words):
            if n:
                self.space_pending = True
            self._write(word)
        if data[-1:].isspace():
            self.space_pending = True

    def _note_term(self, data: str, entry: list[Any]) -> None:
        """A definition list's term text, and where its entry's first term starts."""
        if entry[0] < 0 and data.strip():
            entry[0] = self._text_start()
        if entry[0] >= 0:
            entry[1].append(data)

    def _write_raw_pre(self, data: str) -> None:
        lines = data.replace("\r\n", "\n").split("\n")
        for i, line in enumerate(lines):
            if i:
                self._start_text()
                self._emit("\n")
            if line:
                self._start_text()
                self._emit(line)
                self.after_prefix = False

    def _flush_cell(self) -> None:
        if self.cell is not None and self.row is not None:
            self.row.append(table_cell("".join(self.cell)))
        self.cell = None

    def _flush_row(self) -> None:
        self._flush_cell()
        if self.row is not None and any(c for c in self.row):
            self._break(1)
            self._start_text()
            if self.table is not None and not self.grids:
                self.table[4].append((len(self.out), [c for c in self.row if c]))
            self._write(table_row(self.row))
            self._break(1)
        self.row = None

    def line_ends(self, text: str) -> set[int]:
        """The line breaks of `text` (this parser's output) that end a span: a listing's or an
        address's `<br>` lines, a long `<pre>` run's cuts, definition terms, layout table rows."""
        return (
            set(listing_breaks(text, self.br_ends))
            | set(self.pre_ends)
            | set(self.dt_ends)
            | {e for e in self.layout_ends if e < len(text)}
        )

    def _recorded(self) -> tuple[int, ...]:
        return (
            len(self.heads), len(self.fact_heads), len(self.br_ends), len(self.pre_ends),
            len(self.dt_ends), len(self.layout_ends),
        )  # fmt: skip

    def _start_table(self) -> None:
        if self.table is not None:
            self.table[0] += 1
        else:
            self.table = [1, len(self.out), self.length, self._recorded(), []]

    def _end_table(self) -> None:
        """A table whose every row has at most one cell of text (an image beside a paragraph, a
        one-cell box) is layout, not data: each row is rewritten as that cell's text, its line
        ending a span, so its paragraph is sentence-split as prose, not one table-row span of a
        whole paragraph (as `markdown_html` does for Markdown's HTML tables). Only when nothing
        but its rows was written or recorded since it started: no offset has to move."""
        table = self.table
        if table is None:
            return
        table[0] -= 1
        if table[0] > 0:
            return
        self.table = None
        _, first, start, recorded, rows = table
        if not rows or any(len(cells) > 1 for _, cells in rows) or self._recorded() != recorded:
            return
        row_at = {index for index, _ in rows}
        if any(k not in row_at and self.out[k].strip("\n") for k in range(first, len(self.out))):
            return
        for index, cells in rows:
            self.out[index] = cells[0].replace("\\|", "|")
        offset = start
        for k in range(first, len(self.out)):
            offset += len(self.out[k])
            if k in row_at:
                self.layout_ends.append(offset)  # the "\n" after the row, when text follows
        self.length = offset


def parse_html(
    html: str, filename: str, *, max_list_depth: int = DEFAULT_LIMITS.max_list_depth
) -> ParsedDocument:
    parser = read_html(html, filename, max_list_depth, texinfo_names=True)
    if 0 < parser.texinfo_entries < REFERENCE_LIST_ENTRIES:
        # A page of a few texinfo definitions stays whole, as a short `<dl>` does: cut into
        # subsections, a short page's passages lost the context that ranks their answers
        # (bench/data/session52/ingest29.md, variant 1: -5 answers on development).
        parser = read_html(html, filename, max_list_depth, texinfo_names=False)
    text = "".join(parser.out)
    if not text.strip():
        raise DocumentParseError(filename, "empty document (no visible text in the HTML)")
    sections = flat_sections(sorted(parser.heads), len(text))
    ends = sorted(parser.line_ends(text))
    return ParsedDocument(
        text=text,
        title=parser.title or parser.first_h1,
        sections=sections,
        fmt="html",
        line_ends=tuple(ends),
        fact_headings=tuple(sorted(parser.fact_heads)),
    )


def read_html(html: str, filename: str, max_list_depth: int, *, texinfo_names: bool) -> HtmlText:
    parser = HtmlText(filename, max_list_depth, texinfo_names=texinfo_names)
    try:
        parser.feed(html)
        parser.close()
    except DocumentParseError:
        raise
    except Exception as exc:  # html.parser is lenient; anything raised is a real defect of the input
        raise DocumentParseError(filename, f"malformed HTML: {exc}") from exc
    return parser


#: A line ending on an article, a preposition, a conjunction or a hyphen: a sentence wrapped
#: with <br>, not a line of its own (so is a line the next one continues in lower case).
_WRAPPED_END = re.compile(
    r"(?:\s(?:the|a|an|this|these|its|their|of|with|by|from|into|to|in|on|for|at|and|or|nor)"
    r"|[-\u2010])[ \t]*$",
    re.IGNORECASE,
)


def listing_breaks(text: str, breaks: list[int]) -> list[int]:
    """The <br> breaks that end a line of a listing, an address or a changelog ("Acme Corp" /
    "1 Main Street", "- fixed the parser" / "- new option"): each such line is its own fact span.
    A paragraph wrapped with <br> ("… taken with" / "food.") keeps its sentences whole."""
    out: list[int] = []
    for k in breaks:
        line_start = text.rfind("\n", 0, k) + 1
        nxt = text[k + 1 : k + 2]
        if not nxt or nxt.islower() or _WRAPPED_END.search(text, line_start, k):
            continue
        out.append(k)
    return out


#: A `<pre>` listing's run of lines (between blank lines) longer than this is cut into pieces of
#: at most this many characters where it can be: the verbatim profile's evidence budget is 600
#: characters, and one span of a whole listing fills it (session 45, bench/data/session45/parse17.md).
LISTING_PIECE_CHARS = 600
_COMMENT_LINE = re.compile(r"^(?:/\*|\*|//|--|#(?=\s|$)|;)")
_STATEMENT_END = re.compile(r"(?:[;{}]|\*/)$")


def listing_cuts(block: str, limit: int = LISTING_PIECE_CHARS) -> list[int]:
    """Offsets (into `block`, a `<pre>` block's text) of the line breaks that end a piece of a long
    run of lines. A run of at most `limit` characters is left whole. A longer one is cut at line
    breaks into pieces of at most `limit` characters where it can be; each piece ends at the last
    allowed break within `limit` of its start (one before a line at the run's smallest indentation
    when there is one in the second half of the window, else any): before a line at the run's
    smallest indentation, unless the lines before it are a whole-line comment that starts at that
    indentation (a signature or macro stays with the comment above it); or after a line of code
    that ends a statement (`;`, `{`, `}`, `*/`; a macro's trailing `\\` set aside). With no
    allowed break within `limit`, the piece runs to the first allowed break after it: a listing is
    never cut at an arbitrary line."""
    lines = block.split("\n")
    cuts: list[int] = []
    pos = 0
    run: list[tuple[int, str]] = []  # (start offset, line) of the current run of non-blank lines
    for line in [*lines, ""]:
        if line.strip():
            run.append((pos, line))
        else:
            if run and run[-1][0] + len(run[-1][1]) - run[0][0] > limit:
                cuts.extend(_run_cuts(run, limit))
            run = []
        pos += len(line) + 1
    return cuts


def _run_cuts(run: list[tuple[int, str]], limit: int) -> list[int]:
    indents = [len(line) - len(line.lstrip()) for _, line in run]
    base = min(indents)
    comment = [bool(_COMMENT_LINE.match(line.strip())) for _, line in run]
    # Indentation of the first line of the comment block each comment line belongs to.
    block_indent: list[int | None] = []
    for k in range(len(run)):
        if not comment[k]:
            block_indent.append(None)
        else:
            prev = block_indent[k - 1] if k else None
            block_indent.append(prev if prev is not None else indents[k])
    top: set[int] = set()  # breaks (the "\n" after line k-1) before a line at the base indentation
    ends: set[int] = set()  # breaks after a line that ends a statement
    for k in range(1, len(run)):
        brk = run[k - 1][0] + len(run[k - 1][1])
        if indents[k] == base and block_indent[k - 1] != base:
            top.add(brk)
        code = run[k - 1][1].rstrip().removesuffix("\\").rstrip()
        if not comment[k - 1] and _STATEMENT_END.search(code):
            ends.add(brk)
    return _cut_points(sorted(top | ends), top, run[0][0], run[-1][0] + len(run[-1][1]), limit)


def _cut_points(allowed: list[int], top: set[int], start: int, stop: int, limit: int) -> list[int]:
    """The breaks (of `allowed`, sorted; `top` those before a line at the base indentation) that
    cut the run from `start` to `stop` into pieces, as `listing_cuts` says."""
    out: list[int] = []
    while stop - start > limit:
        # The allowed breaks within `limit` of the start, found by bisection: a scan of every
        # break per piece was quadratic in a run's length (a 0.9 MB run of lines took 2.9 s, not
        # 0.09; the parser reads up to 16 MB; bench/data/session45/review17.md).
        lo = bisect_right(allowed, start)
        hi = bisect_right(allowed, start + limit, lo)
        mid = bisect_left(allowed, start + limit // 2, lo, hi)
        late_top = [b for b in allowed[mid:hi] if b in top]
        if late_top:
            cut = late_top[-1]
        elif hi > lo:
            cut = allowed[hi - 1]
        elif hi < len(allowed):
            cut = allowed[hi]  # none within `limit`: the first one after it
        else:
            break
        out.append(cut)
        start = cut + 1
    return out
