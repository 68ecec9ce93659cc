"""HTML API references: each documented object (Sphinx's object descriptions, any domain) heads a
subsection named by its signature's name, methods under their class."""

from __future__ import annotations

from evidence.ingest import extract_spans, parse_bytes


def _object(kind: str, name: str, *, params: str, body: str, domain: str = "py", prefix: str = "") -> str:
    """One object description as Sphinx >= 4 writes it (permalink and viewcode link included)."""
    anchor = f"{domain}.{name}"
    pre = (
        f'<span class="sig-prename descclassname"><span class="pre">{prefix}</span></span>' if prefix else ""
    )
    return (
        f'<dl class="{domain} {kind}"><dt class="sig sig-object {domain}" id="{anchor}">'
        f'<em class="property"><span class="pre">{kind}</span> </em>{pre}'
        f'<span class="sig-name descname"><span class="pre">{name}</span></span>'
        f'<span class="sig-paren">(</span>{params}<span class="sig-paren">)</span>'
        f'<a class="headerlink" href="#{anchor}" title="Permalink">¶</a></dt><dd>{body}</dd></dl>'
    )


def _page() -> str:
    brew = _object(
        "method",
        "brew",
        params="leaves, minutes=4",
        body='<p>Steeps the leaves.</p><dl class="field-list simple"><dt class="field-odd">Parameters'
        "</dt><dd><p><strong>minutes</strong> - how long to steep, four unless given.</p></dd></dl>",
    )
    pour = _object("method", "pour", params="cups", body="<p>Fills the cups in turn.</p>")
    kettle = _object(
        "class",
        "Kettle",
        prefix="teapot.",
        params="volume",
        body="<p>A kettle of a given volume.</p>" + brew + pour + "<p>Kettles are not thread safe.</p>",
    )
    boil = _object(
        "function", "kettle_boil", domain="c", params="int degrees", body="<p>Boils the water.</p>"
    )
    return (
        "<html><body><h1>Teapot API</h1><h2>Main interface</h2><p>All of it is here.</p>"
        + kettle
        + "<p>See also the C interface.</p>"
        + boil
        + "<h2>Changes</h2><p>None yet.</p></body></html>"
    )


def test_each_api_object_heads_a_subsection_named_by_its_signature() -> None:
    """A long API page ran as one section: a question about one method's parameter had no section
    to scope to. Each object description is a subsection (methods one level under their class);
    the signature line stays a fact span; the class's text after its methods is the class's again,
    and the section's text after the objects is the section's."""
    doc = parse_bytes(_page().encode(), filename="teapot.html")
    names = [(s.name, s.level) for s in doc.sections]
    assert names == [
        ("Teapot API", 1),
        ("Main interface", 2),
        ("teapot.Kettle", 3),
        ("brew", 4),
        ("pour", 4),
        ("teapot.Kettle", 3),
        ("Main interface", 2),
        ("kettle_boil", 3),
        ("Changes", 2),
    ]
    spans = {s.text: s.section for s in extract_spans(doc)}
    assert spans["method brew(leaves, minutes=4)"] == "brew"
    assert spans["minutes - how long to steep, four unless given."] == "brew"
    assert spans["Kettles are not thread safe."] == "teapot.Kettle"
    assert spans["See also the C interface."] == "Main interface"
    assert spans["function kettle_boil(int degrees)"] == "kettle_boil"


def test_a_term_with_an_anchor_but_no_signature_name_stays_text() -> None:
    """A glossary's terms carry anchors too; without a marked name they are no API object."""
    page = (
        '<html><body><h1>Glossary</h1><dl class="glossary"><dt id="term-steep">steep</dt>'
        '<dd><p>To soak leaves.</p></dd><dt id="term-pour">pour</dt><dd><p>To fill.</p></dd></dl>'
        "</body></html>"
    )
    doc = parse_bytes(page.encode(), filename="glossary.html")
    assert [s.name for s in doc.sections] == ["Glossary"]


def _filler(n: int) -> list[str]:
    """Entries enough for a reference page (texinfo pages of fewer stay whole)."""
    return [
        f'<dl class="def"><dt id="index-rinse{i}"><span class="category">Macro: </span><span>'
        f"<strong>RINSE_{i}</strong></span></dt><dd><p>Rinse step {i}.</p></dd></dl>"
        for i in range(n)
    ]


def _texinfo_page(generator: str, entries: list[str]) -> bytes:
    return (
        f'<html><head><meta name="Generator" content="{generator}"></head><body><h1>Kettle library</h1>'
        "<h2>Boiling</h2><p>The calls below boil water.</p>" + "".join(entries) + "<p>That is all of it.</p>"
        "<dl><dt><b>steep</b></dt><dd><p>A table item, not a definition.</p></dd></dl>"
        "</body></html>"
    ).encode()


def test_a_texinfo_definition_line_heads_a_subsection_named_by_its_bold_name() -> None:
    """texinfo's `@deftypefn` lines ("Function: int name (args)") mark the name only as bold text
    (texi2html's `<b>`, makeinfo's `<strong>`): each entry is a subsection named by it, the line a
    fact span; a table item's bold term, with no "Category:" before it, stays text."""
    old = (
        "<dl><dt><u>Function:</u> int <b>kettle_boil</b><i> (int&nbsp;<var>degrees</var>)</i>"
        '<a name="IDX1"></a></dt><dd><p>Boils the water to <var>degrees</var>.</p></dd></dl>'
    )
    new = (
        '<dl class="def"><dt id="index-kettle_005fpour"><span class="category">Function: </span>'
        "<span><code>void</code> <strong>kettle_pour</strong> <em>(int <var>cups</var>)</em></span></dt>"
        "<dd><p>Fills <var>cups</var> cups.</p></dd></dl>"
    )
    for generator in ("texi2html 1.78a", "makeinfo"):
        doc = parse_bytes(_texinfo_page(generator, [old, new, *_filler(8)]), filename="kettle.html")
        names = [(s.name, s.level) for s in doc.sections]
        assert names == [
            ("Kettle library", 1),
            ("Boiling", 2),
            ("kettle_boil", 3),
            ("kettle_pour", 3),
            *((f"RINSE_{i}", 3) for i in range(8)),
            ("Boiling", 2),
        ], generator
        spans = {s.text: s.section for s in extract_spans(doc)}
        assert spans["Function: int kettle_boil (int degrees)"] == "kettle_boil"
        assert spans["Boils the water to degrees."] == "kettle_boil"
        assert spans["Function: void kettle_pour (int cups)"] == "kettle_pour"


def test_a_texinfo_line_with_its_type_in_bold_is_named_by_the_word_before_its_arguments() -> None:
    """A source that left type and name in one field makes makeinfo bold the return type
    ("Function: **void** *kettle_alloc (size_t size)"): the word before the arguments names it."""
    entry = (
        '<dl class="def"><dt id="index-void"><span class="category">Function: </span><span>'
        "<strong>void</strong> <em>*kettle_alloc (size_t <var>size</var>)</em></span></dt>"
        "<dd><p>Allocates a kettle.</p></dd></dl>"
    )
    doc = parse_bytes(_texinfo_page("makeinfo", [entry, *_filler(9)]), filename="kettle.html")
    assert [s.name for s in doc.sections][:3] == ["Kettle library", "Boiling", "kettle_alloc"]


def test_a_page_of_a_few_texinfo_definitions_stays_whole() -> None:
    """Cut into subsections, a short page's passages lost the context that ranks their answers:
    a page of fewer definition lines than a reference list's entries keeps its sections."""
    doc = parse_bytes(_texinfo_page("makeinfo", _filler(3)), filename="kettle.html")
    assert [s.name for s in doc.sections] == ["Kettle library", "Boiling"]


def test_a_term_whose_end_tag_is_left_out_does_not_hide_the_objects_after_it() -> None:
    """HTML lets `</dt>` be left out (the next `<dd>` implies it): an anchored term so written,
    a constant's name in a list before the API objects, once held its signature open to the end
    of the page, and no object after it got its subsection."""
    page = (
        "<html><body><h1>Teapot API</h1><h2>Constants</h2>"
        '<dl><dt id="SIZE">SIZE<dd><p>Cups a pot holds.</p><dt id="HEAT">HEAT<dd></dl>'
        "<h2>Functions</h2>"
        + _object("function", "kettle_boil", domain="c", params="int degrees", body="<p>Boils it.</p>")
        + "</body></html>"
    )
    names = [s.name for s in parse_bytes(page.encode(), filename="teapot.html").sections]
    assert names == ["Teapot API", "Constants", "Functions", "kettle_boil"]


def _rdoc_method(name: str, args: str, body: str, kind: str = "method") -> str:
    """One method (or attribute) as RDoc's darkfish template writes it."""
    heading = "method-heading attribute-method-heading" if kind == "attribute" else "method-heading"
    advice = '<span class="method-click-advice">click to toggle source</span>'
    extra = (
        f'<span class="method-args">{args}</span>{advice}'
        if kind == "method"
        else f'<span class="attribute-access-type">{args}</span>'
    )
    return (
        f'<div id="{kind}-i-{name}" class="method-detail"><div class="{heading}">'
        f'<span class="method-name">{name}</span>{extra}</div>'
        f'<div class="method-description">{body}</div>'
        f'<div class="method-source-code"><pre>def {name}\n  nil\nend</pre></div></div>'
    )


def test_each_rdoc_method_heads_a_subsection_named_by_its_name() -> None:
    """A Ruby class page (RDoc) lists its attributes and methods under one `<h3>` each: forty
    methods ran as one section. Each method or attribute is a subsection under its `<h3>`, its
    line (name and arguments) a fact span; the "click to toggle source" advice is no text."""
    page = (
        "<html><body><h2>class Teapot::Kettle</h2><p>A kettle.</p>"
        '<section class="method-section"><header><h3>Attributes</h3></header>'
        + _rdoc_method("volume", "[R]", "<p>Litres it holds.</p>", kind="attribute")
        + '</section><section class="method-section"><header><h3>Public Instance Methods</h3></header>'
        + _rdoc_method("brew", "(leaves, minutes = 4)", "<p>Steeps the leaves for minutes.</p>")
        + _rdoc_method("pour", "(cups)", "<p>Fills the cups in turn.</p>")
        + "</section></body></html>"
    )
    doc = parse_bytes(page.encode(), filename="kettle.html")
    assert [(s.name, s.level) for s in doc.sections] == [
        ("class Teapot::Kettle", 2),
        ("Attributes", 3),
        ("volume", 4),
        ("Public Instance Methods", 3),
        ("brew", 4),
        ("pour", 4),
    ]
    spans = {s.text: s.section for s in extract_spans(doc)}
    assert spans["brew(leaves, minutes = 4)"] == "brew"
    assert spans["Steeps the leaves for minutes."] == "brew"
    assert "click to toggle source" not in doc.text


def test_an_rdoc_method_source_listing_is_no_text() -> None:
    """RDoc writes each method's source under its description, hidden until "click to toggle
    source": the reader sees the description only, and the listing's lines (`def pour`, `nil`,
    `end` …) were indexed as the method's text (four spans over 600 characters on one page)."""
    page = (
        "<html><body><h2>class Teapot::Kettle</h2>"
        '<section class="method-section"><header><h3>Public Instance Methods</h3></header>'
        + _rdoc_method("pour", "(cups)", "<p>Fills the cups in turn.</p>")
        + "</section></body></html>"
    )
    doc = parse_bytes(page.encode(), filename="kettle.html")
    assert "Fills the cups in turn." in doc.text
    assert "def pour" not in doc.text
    assert "nil" not in doc.text.split()
