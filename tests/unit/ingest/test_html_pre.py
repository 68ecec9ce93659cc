"""HTML `<pre>` listings: a long run of lines is cut into pieces of at most 600 characters at
statement ends and top-level lines, a signature kept with the comment above it; short listings
stay whole (session 45, bench/data/session45/parse17.md)."""

from __future__ import annotations

import itertools
import random

from evidence.ingest import extract_spans, parse_bytes
from evidence.ingest.parsers.html import _cut_points

#: `parsers.html.LISTING_PIECE_CHARS` (a literal, so the behavioural tests run against any parser).
LISTING_PIECE_CHARS = 600


def _function(n: int) -> str:
    return (
        f"/* Scale the {n}th sample by the gain and clamp it to the range. */\n"
        f"int scale_sample_{n}(int sample, int gain)\n"
        "{\n"
        "    int value = sample * gain;\n"
        "    return value > LIMIT ? LIMIT : value;\n"
        "}\n"
    )


def _html(listing: str) -> bytes:
    return f"<html><body><p>The helpers:</p><pre>{listing}</pre><p>See above.</p></body></html>".encode()


def test_a_long_listing_is_cut_into_pieces_that_keep_each_signature_with_its_comment() -> None:
    listing = "".join(_function(n) for n in range(1, 9))  # one run of lines, ~1,300 characters
    assert len(listing) > 2 * LISTING_PIECE_CHARS
    doc = parse_bytes(_html(listing), filename="api.html")
    start = doc.text.index(listing)
    cuts = [e - start for e in doc.line_ends]
    assert len(cuts) >= 2
    bounds = [-1, *cuts, len(listing.rstrip("\n"))]
    pieces = [listing[a + 1 : b] for a, b in itertools.pairwise(bounds)]
    assert all(len(p) <= LISTING_PIECE_CHARS for p in pieces)
    # Each piece starts with a function's comment: a signature is never cut from the comment above.
    assert all(p.startswith("/* Scale the") for p in pieces), [p[:30] for p in pieces]
    spans = extract_spans(doc)
    assert all(len(s.text) <= LISTING_PIECE_CHARS for s in spans)
    assert all(doc.text[s.char_start : s.char_end] == s.text for s in spans)
    # A piece's end ends the span running through it.
    ends = {s.char_end for s in spans}
    assert all(start + c in ends for c in cuts)


def test_a_short_listing_is_not_cut() -> None:
    listing = _function(1) + _function(2)
    assert len(listing) < LISTING_PIECE_CHARS
    doc = parse_bytes(_html(listing), filename="api.html")
    assert doc.line_ends == ()


def test_a_run_without_an_allowed_break_is_not_cut_at_an_arbitrary_line() -> None:
    """Indented licence text under a field name: no statement ends, no second top-level line."""
    prose = "License: GPL-2+\n" + "\n".join(
        f" line {n} of a licence text that wraps over many lines and" for n in range(20)
    )
    from evidence.ingest.parsers.html import listing_cuts

    assert len(prose) > LISTING_PIECE_CHARS
    assert listing_cuts(prose) == []


def test_a_struct_is_cut_after_a_member_and_blank_lines_separate_runs() -> None:
    members = "".join(f"  const char *field_{n};          /* (S) */\n" for n in range(24))
    from evidence.ingest.parsers.html import listing_cuts

    block = "typedef struct record {\n" + members + "} record;\n\nshort();\n"
    cuts = listing_cuts(block)
    assert cuts, "a 1,000-character struct is cut"
    assert all(block[c - 1] == "/" and block[c] == "\n" for c in cuts)  # after "/* (S) */"
    pieces = [
        block[a + 1 if a else 0 : b] for a, b in zip([0, *cuts], [*cuts, block.index("\n\n")], strict=True)
    ]
    assert all(len(p) <= LISTING_PIECE_CHARS for p in pieces)


def _cut_points_by_scan(allowed: list[int], top: set[int], start: int, stop: int, limit: int) -> list[int]:
    """parse17's pass (each piece scanned every break; quadratic in a run's length): the reference
    `_cut_points` must agree with."""
    out: list[int] = []
    while stop - start > limit:
        window = [b for b in allowed if start < b <= start + limit]
        late_top = [b for b in window if b in top and b - start >= limit // 2]
        if late_top or window:
            cut = (late_top or window)[-1]
        else:
            cut = next((b for b in allowed if b > start + limit), -1)
            if cut < 0:
                break
        out.append(cut)
        start = cut + 1
    return out


def test_cut_points_by_bisection_are_those_of_the_scan() -> None:
    rng = random.Random(17)
    for _ in range(400):
        stop = rng.randrange(1, 5000)
        allowed = sorted(rng.sample(range(stop), k=rng.randrange(0, min(stop, 60))))
        top = {b for b in allowed if rng.random() < 0.4}
        limit = rng.choice([1, 7, 50, 120, 600])
        start = rng.randrange(0, stop)
        assert _cut_points(allowed, top, start, stop, limit) == _cut_points_by_scan(
            allowed, top, start, stop, limit
        )


def test_a_listing_set_in_a_table_only_to_indent_it_keeps_its_lines() -> None:
    """`<table><tr><td>&nbsp;</td><td><pre>…</pre></td></tr></table>` (texi2html's examples) is
    a listing with its lines (a short one stays one span, as any listing), not a table row of
    its lines run together; a real table's cell holding a `<pre>` after a cell with text stays a
    row."""
    html = (
        "<h1>Brewing</h1><p>A pot file holds entries like this one:</p>"
        '<table><tr><td>&nbsp;</td><td><pre class="example">#: pot.c:12\n'
        'msgid "Steep for four minutes"\n'
        'msgstr "Ziehen lassen"\n</pre></td></tr></table>'
        "<p>Entries are a blank line apart.</p>"
        "<table><tr><td>steep</td><td><pre>4 min</pre></td></tr></table>"
    )
    spans = [s.text for s in extract_spans(parse_bytes(html.encode(), filename="pot.html"))]
    assert '#: pot.c:12\nmsgid "Steep for four minutes"\nmsgstr "Ziehen lassen"' in spans
    assert "| steep | 4 min |" in spans
