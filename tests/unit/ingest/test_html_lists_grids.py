"""HTML definition lists and CSS grid tables (session 50, bench/data/session50/ingest22.md): a
`<dl>` entry is a span of its own (term with definition), a `div` grid's rows are table rows."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes
from evidence.records import SpanType


def _spans(html: str) -> list[tuple[str, SpanType]]:
    doc = parse_bytes(html.encode(), filename="page.html")
    return [(s.text, s.span_type) for s in extract_spans(doc)]


def test_each_definition_list_entry_is_a_span_with_its_term() -> None:
    """A man page set as `<DL><DT><DD>` without closing tags: the entries have no sentence ends,
    so all of them ran as one span; each term now heads a span with its definition."""
    html = (
        "<html><body><h2>Keys</h2><DL COMPACT>"
        "<DT><B>\\k</B><DD>kettle on"
        "<DT><B>\\t</B><DD>tea bag in"
        "<DT><B>\\m</B><DD>milk, then a stir</DL>"
        "<p>Serve warm.</p></body></html>"
    )
    texts = [t for t, _ in _spans(html)]
    assert texts == ["\\k\nkettle on", "\\t\ntea bag in", "\\m\nmilk, then a stir", "Serve warm."]


def test_definition_paragraphs_keep_their_own_spans() -> None:
    """A `<dd>` of paragraphs (Sphinx, DocBook) reads as before: its sentences split as prose."""
    html = (
        "<html><body><dl><dt>open(path)</dt><dd><p>Opens the jar. It must be shut.</p></dd>"
        "<dt>shut()</dt><dd><p>Shuts the jar.</p></dd></dl></body></html>"
    )
    texts = [t for t, _ in _spans(html)]
    assert texts == ["open(path)", "Opens the jar.", "It must be shut.", "shut()", "Shuts the jar."]


GRID = """<html><body><ul><li><section><h2>Method Summary</h2>
<div class="summary-table three-column-summary">
<div class="table-header col-first">Modifier and Type</div>
<div class="table-header col-second">Method</div>
<div class="table-header col-last">Description</div>
<div class="col-first even-row-color"><code>static int</code></div>
<div class="col-second even-row-color"><code><a href="#a">brew</a>(int cups)</code></div>
<div class="col-last even-row-color"><div class="block">Brews the given number of cups of tea
for the table</div></div>
<div class="col-first odd-row-color"><code>void</code></div>
<div class="col-second odd-row-color"><code>pour()</code></div>
<div class="col-last odd-row-color"><div class="block">Pours one cup without spilling any of it
on the floor</div></div>
</div>
</section></li></ul>
<div role="table" class="prices">
<div role="columnheader">Item</div><div role="columnheader">Price</div>
<div>Scone</div><div>2 pounds</div>
</div>
<p>After the grids.</p></body></html>"""


def test_a_div_grid_table_reads_as_table_rows() -> None:
    """javadoc's summary tables and ARIA tables are `div` grids: each row is a table row, not a
    run of text of every cell (inside a list item every `div` was a line of one paragraph)."""
    spans = _spans(GRID)
    rows = [t for t, k in spans if k is SpanType.TABLE_ROW]
    assert "| static int | brew(int cups) | Brews the given number of cups of tea for the table |" in rows
    assert "| void | pour() | Pours one cup without spilling any of it on the floor |" in rows
    assert "| Scone | 2 pounds |" in rows
    assert ("After the grids.", SpanType.SENTENCE) in spans
    assert not any("Brews" in t and "Pours" in t for t, _ in spans)


def _reference_page(entries: int, sentences: int) -> str:
    """A manual page whose `Settings` section is a definition list of `entries` settings (the first
    with two terms, one nested list inside a definition), each defined by `sentences` sentences,
    then a paragraph after the list."""
    body = " ".join(f"The kettle setting changes the brew in way number {k}." for k in range(sentences))
    items = [
        "<dt><code>kettle.size</code></dt><dt><code>kettle.volume</code></dt><dd><p>" + body + "</p></dd>"
    ]
    items.append(
        "<dt>kettle.mode</dt><dd><p>"
        + body
        + "</p><dl><dt>eco</dt><dd>Slow.</dd><dt>fast</dt><dd>Quick.</dd></dl></dd>"
    )
    items += [f"<dt>kettle.option{k}</dt><dd><p>{body}</p></dd>" for k in range(entries - 2)]
    return (
        "<html><body><h1>kettle(1)</h1><h2>Settings</h2><p>Settings are read at start.</p>"
        "<dl>" + "".join(items) + "</dl><p>Other tools read settings of their own.</p>"
        "<h2>Bugs</h2><p>None known.</p></body></html>"
    )


def test_a_long_definition_list_heads_a_subsection_at_each_term() -> None:
    """A manual's reference list of many settings under one heading made one section of most of
    the page: each term of an outermost list that long heads its entry's subsection (two terms in a
    row name one entry; a nested list's terms do not), the term stays in its span, and the text
    after the list is the section's again."""
    doc = parse_bytes(_reference_page(entries=12, sentences=40).encode(), filename="kettle.html")
    names = [(s.name, s.level) for s in doc.sections]
    assert names[:4] == [
        ("kettle(1)", 1),
        ("Settings", 2),
        ("kettle.size, kettle.volume", 3),
        ("kettle.mode", 3),
    ]
    assert ("eco", 3) not in names
    assert names[-2:] == [("Settings", 2), ("Bugs", 2)]
    assert len(names) == 2 + 12 + 2
    spans = {s.text: s.section for s in extract_spans(doc)}
    assert spans["kettle.mode"] == "kettle.mode"
    assert spans["Other tools read settings of their own."] == "Settings"
    assert max(s.char_end - s.char_start for s in doc.sections) < 5_000


def test_a_reference_list_of_half_the_old_bound_heads_subsections_too() -> None:
    """A manual's second reference list of 12 entries holding ~13,000 characters (under 20,000,
    the first bound) left one section of ~13 passages without a name inside: over 10,000
    characters its terms head subsections as a longer list's do."""
    doc = parse_bytes(_reference_page(entries=12, sentences=20).encode(), filename="kettle.html")
    names = [s.name for s in doc.sections]
    assert len(names) == 2 + 12 + 2
    assert "kettle.option9" in names


def test_a_short_definition_list_stays_in_its_section() -> None:
    """A list of a few entries, or of many short ones, is text of the section it stands in."""
    for entries, sentences in ((6, 40), (12, 2), (12, 12)):
        doc = parse_bytes(_reference_page(entries, sentences).encode(), filename="kettle.html")
        assert [s.name for s in doc.sections] == ["kettle(1)", "Settings", "Bugs"]


def _grouped_page(groups: int, options: int) -> str:
    def options_list(g: int) -> str:
        return (
            "<dl>"
            + "".join(
                f"<dt>brew-{g}-{i}</dt><dd><p>{'This setting changes how the kettle brews. ' * 30}</p></dd>"
                for i in range(options)
            )
            + "</dl>"
        )

    return (
        "<html><body><h1>kettle(1)</h1><h2>Options</h2><dl>"
        + "".join(
            f"<dt>Group {g}</dt><dd><p>Options of group {g}.</p>{options_list(g)}</dd>" for g in range(groups)
        )
        + "</dl><p>Other tools read options of their own.</p><h2>Bugs</h2><p>None known.</p></body></html>"
    )


def test_a_short_definition_list_over_long_nested_lists_heads_a_tree() -> None:
    """A short list of option groups whose definitions each hold a long list of options (>= 10
    entries over >= 10,000 characters) was one section of every option: each group heads a
    subsection and each option one under its group's, as in a plain-text term list; a list of
    one entry heads nothing and its nested list heads at its level."""
    doc = parse_bytes(_grouped_page(groups=3, options=12).encode(), filename="kettle.html")
    names = [(s.name, s.level) for s in doc.sections]
    assert names[:5] == [("kettle(1)", 1), ("Options", 2), ("Group 0", 3), ("brew-0-0", 4), ("brew-0-1", 4)]
    assert ("Group 2", 3) in names and ("brew-2-11", 4) in names
    assert len(names) == 2 + 3 * 13 + 2
    assert names[-2:] == [("Options", 2), ("Bugs", 2)]
    one = [(s.name, s.level) for s in parse_bytes(_grouped_page(1, 12).encode(), filename="k.html").sections]
    assert ("Group 0", 3) not in one and ("brew-0-0", 3) in one
    short = parse_bytes(_grouped_page(groups=3, options=4).encode(), filename="kettle.html")
    assert [s.name for s in short.sections] == ["kettle(1)", "Options", "Bugs"]


def test_a_layout_table_of_one_text_cell_per_row_reads_as_paragraphs() -> None:
    """A page that sets a paragraph beside an image (or a menu, or a one-cell box) in a table:
    no row has more than one cell of text, so the table is layout. Each row is that cell's text,
    a line of its own, sentence-split as prose; it was one `|  | … |` table-row span of a whole
    paragraph. A table with two cells of text in a row is data and stays rows."""
    html = (
        "<html><body><h2>Kettles</h2>"
        '<table><tr><td><img src="k.png"></td><td><p>A kettle boils water. It switches off by'
        " itself when the water boils.</p></td></tr>"
        '<tr><td><img src="t.png"></td><td>A teapot steeps the leaves.</td></tr></table>'
        "<table><tr><td><table><tr><td>Spout care</td></tr></table></td></tr></table>"
        "<table><tr><th>Model</th><th>Litres</th></tr><tr><td>Tall</td><td>1.7</td></tr></table>"
        "</body></html>"
    )
    spans = [text for text, _ in _spans(html)]
    assert "A kettle boils water." in spans
    assert "It switches off by itself when the water boils." in spans
    assert "A teapot steeps the leaves." in spans
    assert "Spout care" in spans
    assert not any(text.startswith("|") and "kettle" in text.lower() for text in spans)
    assert "| Tall | 1.7 |" in spans
