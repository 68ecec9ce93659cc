"""Helpers of the hybrid span ranking of `HYBRID_FACTSPAN` (the scorer itself: `span_rank`).

Seed 002's cascade answers what its rules recognise (a section, an attribute); everything else is
a paraphrase of something the document says in other words. `verbatim.sentences` showed on
SciFact's rationales that passages are ranked far better than sentences, so a span's first
feature is its **passage** score: the cosine of the best passage holding it, min-max over the
scope's passages (`passage_scores`), so a span whose passage is the right one ranks high with few
shared words. Its words are read with its **section heading** (`SpanStats.with_headings`: "The
default value of this macro is 1 billion" under "Maximum length of a string or BLOB"). The same
text twice (a guideline's boxed summary repeating its body) is returned once (`same_text`).

Linear in the spans of the scope (a few thousand for a long standard): no pairwise loops.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

from evidence.records import Chunk


def passage_scores(spans: Sequence[Chunk], passages: Sequence[tuple[Chunk, float]]) -> list[float]:
    """Per span, the min-max normalised score of the best passage holding it (0 when none does:
    a passage not among those scored)."""
    if not passages:
        return [0.0] * len(spans)
    lo = min(s for _, s in passages)
    hi = max(s for _, s in passages)
    by_doc: dict[str, list[tuple[int, int, float]]] = {}
    for p, s in passages:
        norm = (s - lo) / (hi - lo) if hi > lo else 1.0
        by_doc.setdefault(p.document_id, []).append((p.char_start, p.char_end, norm))
    starts: dict[str, list[int]] = {}
    longest: dict[str, int] = {}
    for doc, listed in by_doc.items():
        listed.sort()
        starts[doc] = [a for a, _, _ in listed]
        longest[doc] = max(b - a for a, b, _ in listed)
    out = []
    for c in spans:
        items = by_doc.get(c.document_id)
        best = 0.0
        if items:
            # Passages starting at or before the span, latest first; windows overlap by a few
            # dozen tokens, so only the last few can still reach past the span's end. A passage
            # starting further back than the document's longest scored passage is long ends
            # before the span starts, and so does every one before it: none of them can hold it.
            j = bisect_right(starts[c.document_id], c.char_start) - 1
            reach = longest[c.document_id]
            while j >= 0:
                a, b, n = items[j]
                if c.char_start - a > reach:
                    break
                if b >= c.char_end and n > best:
                    best = n
                j -= 1
        out.append(best)
    return out


_BULLET_MARK = re.compile(r"^[\s\-*+\u2022\u25cf\u25aa\u2013]+")
_SPACES = re.compile(r"\s+")


def same_text(text: str) -> str:
    """A span's text as compared for repeats (a guideline's boxed summary repeats its body):
    bullet marks, case and whitespace runs aside."""
    return _SPACES.sub(" ", _BULLET_MARK.sub("", text)).strip().lower()
