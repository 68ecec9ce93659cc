"""Term statistics over a set of spans, for the cascade's in-memory paths.

The scan paths (section, attribute, global scan) rank the spans of one entity — a label has a few
hundred — so they are scored here with the index's own analyzer (stemmed, stop words removed),
BM25 over that set, and *coverage*: the share of the question's informative terms (IDF-weighted)
a span contains. Coverage is what the "minimum relevance" of the global scan is measured in: BM25
grows with any repeated term, coverage only with the question's own words.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain

from evidence.search.analysis import get_analyzer

#: An identifier the analyser keeps whole: a run of word characters that holds an underscore
#: ("ffi_call", "SQLITE_MAX_LENGTH", "FFI_DEFAULT__ABI", "__init__", "größe_max"; `\w` is
#: Unicode, as the analyser's tokens are). Its parts are what the underscores separate. A match
#: starts only at a run's first character (the lookbehind): else every later start in a long run
#: without an underscore (a hash, a base64 blob) is tried again to its end, quadratic in the
#: run's length (1.3 s for 10,000 characters), with the same matches.
_IDENTIFIER = re.compile(r"(?<!\w)\w*_\w*")


@lru_cache(maxsize=8192)
def terms(text: str) -> tuple[str, ...]:
    return tuple(get_analyzer().analyze(text))


@dataclass
class SpanStats:
    """Document frequencies over a set of texts (the entity's spans)."""

    texts: Sequence[str]
    df: Counter[str] = field(default_factory=Counter)
    lengths: list[int] = field(default_factory=list)
    bags: list[Counter[str]] = field(default_factory=list)
    _weights: dict[tuple[str, ...], dict[str, float]] = field(default_factory=dict, repr=False)
    _prefix_seen: dict[str, bool] = field(default_factory=dict, repr=False)
    #: Per query (`coverage`): each concept's weight and the words of the texts that cover it by
    #: prefix, and the total weight: what is per question is computed once, not once per span.
    _plans: dict[tuple[object, ...], tuple[list[tuple[float, tuple[str, ...], tuple[str, ...]]], float]] = (
        field(default_factory=dict, repr=False)
    )
    _by_stem: dict[str, list[str]] | None = field(default=None, repr=False)
    #: The bags are the texts' own analysis (`_counted`, shared and never modified), not given.
    _analysed: bool = field(default=False, init=False, repr=False)
    #: The mean length, once: `bm25` is called per span, and summing the lengths each time made
    #: scoring a scope quadratic in its spans.
    avg_length: float = field(default=1.0, init=False)

    def __post_init__(self) -> None:
        # Bags given (`with_headings`): the texts were analysed already, only counted here (their
        # lengths too when given with them).
        given = len(self.bags) == len(self.texts) and bool(self.bags)
        if not given:
            counted = [_counted(t) for t in self.texts]
            self.bags = [bag for bag, _ in counted]
            self.lengths = [n for _, n in counted]
            self._analysed = True
        elif len(self.lengths) != len(self.bags):
            self.lengths = [sum(bag.values()) for bag in self.bags]
        # One update over every bag's keys: the same counts, in the same key order, as one
        # update a bag.
        self.df.update(chain.from_iterable(self.bags))
        self.avg_length = (sum(self.lengths) / self.n) if self.n else 1.0

    def with_headings(self, headings: Sequence[str]) -> SpanStats:
        """The same texts each read with its section heading (`headings[i]` for text i), as one
        bag: BM25 and coverage of a span whose heading carries the question's words ("The default
        value of this macro is 1 billion" under "Maximum length of a string"). Each distinct
        heading is analysed once; a (text, heading) pair's bag is remembered (`_headed`) when
        these bags are the texts' own analysis."""
        texts = [f"{h} {t}" if h else t for t, h in zip(self.texts, headings, strict=True)]
        if self._analysed:
            read = [_headed(t, h) for t, h in zip(self.texts, headings, strict=True)]
            return SpanStats(texts, bags=[bag for bag, _ in read], lengths=[n for _, n in read])
        heads = {h: Counter(terms(h)) for h in dict.fromkeys(headings)}
        bags = [_plus(bag, heads[h]) for bag, h in zip(self.bags, headings, strict=True)]
        return SpanStats(texts, bags=bags)

    @property
    def n(self) -> int:
        return len(self.texts)

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def bm25(
        self,
        i: int,
        query: Iterable[str],
        k1: float = 1.2,
        b: float = 0.75,
        weights: Mapping[str, float] | None = None,
    ) -> float:
        bag = self.bags[i]
        norm = k1 * (1 - b + b * self.lengths[i] / (self.avg_length or 1.0))
        score = 0.0
        for t in set(query):
            tf = bag.get(t, 0)
            if tf:
                w = weights.get(t, 1.0) if weights else 1.0
                score += w * self.idf(t) * tf * (k1 + 1) / (tf + norm)
        return score

    def weights(self, query: Sequence[str]) -> dict[str, float]:
        """`weight` of each distinct query term, computed once per query."""
        key = tuple(dict.fromkeys(query))
        cached = self._weights.get(key)
        if cached is None:
            cached = {t: self.weight(t, key) for t in key}
            self._weights[key] = cached
        return cached

    def weight(self, term: str, query: Sequence[str]) -> float:
        """A term's IDF; a term in none of the texts weighs as much as the query's average present
        term (its IDF would be the largest of all, letting one odd word veto every span)."""
        if term in self.df or self._prefix_df(term):
            return self.idf(term)
        present = [self.idf(t) for t in query if t in self.df]
        return sum(present) / len(present) if present else 1.0

    def _prefix_df(self, term: str) -> bool:
        """Whether a word of the texts starts with `term`'s first five letters and is a prefix of
        it or it of the word (`_prefix_words` finds those words by their first five letters)."""
        return bool(self._prefix_words(term))

    def coverage(self, i: int, query: Sequence[str | Sequence[str]]) -> float:
        """IDF-weighted share of the query's concepts found in text i. A concept is a term or a
        group of alternatives (a lay word and its label words: covered by any of them); matching
        is prefix-tolerant, so "mutagen" covers "mutagenic"."""
        groups, total = self._coverage_plan(query)
        keys = self.bags[i].keys()
        got = 0.0
        for w, g, near in groups:
            if not (keys.isdisjoint(g) and keys.isdisjoint(near)):
                got += w
        return got / total if total else 0.0

    def coverages(self, query: Sequence[str | Sequence[str]]) -> list[float]:
        """`coverage(i, query)` of every text, in order."""
        groups, total = self._coverage_plan(query)
        # A concept is covered when its terms or their prefix words meet the text's words: one
        # set test of both (the same concepts, their weights added in the same order).
        words = [(w, g + near) for w, g, near in groups]
        out = []
        for bag in self.bags:
            keys = bag.keys()
            got = 0.0
            for w, covering in words:
                if not keys.isdisjoint(covering):
                    got += w
            out.append(got / total if total else 0.0)
        return out

    def concepts(self, query: Sequence[str | Sequence[str]]) -> list[tuple[float, frozenset[str]]]:
        """The query's concepts as `coverage` weighs them: each concept's weight and every word
        that covers it (its terms and the texts' words that extend them by prefix). A text covers
        the concept when one of its terms is among those words (`spans.best_sub_span`)."""
        groups, _ = self._coverage_plan(query)
        return [(w, frozenset((*g, *near))) for w, g, near in groups]

    def _coverage_plan(
        self, query: Sequence[str | Sequence[str]]
    ) -> tuple[list[tuple[float, tuple[str, ...], tuple[str, ...]]], float]:
        """`coverage`'s per-query part, once per query: the concepts (deduplicated, in order),
        each with its weight and the texts' words that cover it by prefix (`_prefix_hit`: a text
        holds such a word exactly when the prefix test over its words holds, as every word of a
        text is one of `df`), and the total weight."""
        key = tuple(g if isinstance(g, str) else tuple(g) for g in query)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        groups = [(g,) if isinstance(g, str) else tuple(g) for g in query]
        groups = [g for g in dict.fromkeys(groups) if g]
        flat = [t for g in groups for t in g]
        weights = self.weights(flat) if groups else {}
        out: list[tuple[float, tuple[str, ...], tuple[str, ...]]] = []
        total = 0.0
        for g in groups:
            present = [weights[t] for t in g if t in self.df]
            w = max(present) if present else weights[g[0]]
            total += w
            near = tuple(dict.fromkeys(x for t in g for x in self._prefix_words(t)))
            out.append((w, g, near))
        plan = (out, total)
        self._plans[key] = plan
        return plan

    def _prefix_words(self, term: str) -> list[str]:
        """The words of the texts `_prefix_hit` accepts for `term`."""
        if len(term) < 5:
            return []
        if self._by_stem is None:
            by_stem: dict[str, list[str]] = {}
            for w in self.df:
                if len(w) >= 5:
                    by_stem.setdefault(w[:5], []).append(w)
            self._by_stem = by_stem
        return [w for w in self._by_stem.get(term[:5], ()) if w.startswith(term) or term.startswith(w)]


#: Texts whose bag of terms (`_counted`) and headed bag (`_headed`) are remembered per process: a
#: question's spans are mostly the spans of the questions before it on the same documents.
KEPT_BAGS = 16384


@lru_cache(maxsize=KEPT_BAGS)
def _counted(text: str) -> tuple[Counter[str], int]:
    """`Counter(terms(text))` and its total, remembered. Shared between `SpanStats`: read only."""
    bag = Counter(terms(text))
    return bag, sum(bag.values())


@lru_cache(maxsize=KEPT_BAGS)
def _headed(text: str, heading: str) -> tuple[Counter[str], int]:
    """`text`'s bag with its heading's (`_plus`: the same counts and key order as `with_headings`
    computes them) and its total, remembered. Read only."""
    bag, n = _counted(text)
    head, m = _counted(heading) if heading else (Counter(), 0)
    return _plus(bag, head), n + m


def _plus(bag: Counter[str], more: Counter[str]) -> Counter[str]:
    """`bag + more` for counts that are all positive (the same counts, keys in the same order),
    without `Counter.__add__`'s Python loop over every key of `bag`."""
    out = Counter(bag)
    if more:
        out.update(more)
    return out


def _prefix_hit(term: str, bag: Counter[str]) -> bool:
    if len(term) < 5:
        return False
    stem = term[:5]
    return any(w.startswith(stem) and (w.startswith(term) or term.startswith(w)) for w in bag)


def grounding(
    groups: Sequence[Sequence[str]], evidence: Iterable[str], weights: Mapping[str, float] | None = None
) -> tuple[float, list[str]]:
    """How much of what the question asks the evidence carries: the (weighted) share of the
    question's concepts — a term or a group of alternatives — that some evidence text holds
    (prefix-tolerant, like `SpanStats.coverage`), and the concepts none holds ("cost", "fee",
    "dogs"). A question with no concept (only a name) is fully grounded. An identifier the
    analyser keeps whole ("ffi_call" → "ffi_cal") also carries its parts: the question's concepts
    are read word by word ("ffi", "call"), so without them the identifier the question names
    read as missing from every text that holds it."""
    bag: Counter[str] = Counter()
    for text in evidence:
        bag.update(terms(text))
        if "_" in text:
            bag.update(t for part in identifier_parts(text) for t in terms(part))
    total = got = 0.0
    missing: list[str] = []
    near: dict[str, list[str]] | None = None
    for g in dict.fromkeys(tuple(x) for x in groups if x):
        w = max((weights or {}).get(t, 1.0) for t in g)
        total += w
        if any(t in bag for t in g):
            got += w
            continue
        if near is None:
            near = _by_prefix(bag)
        if any(_extends(t, near.get(t[:3], ())) for t in g):
            got += w
        else:
            missing.append(g[0])
    return (got / total if total else 1.0), missing


def identifier_parts(text: str) -> list[str]:
    """The parts of the identifiers in `text` the analyser keeps whole (`_IDENTIFIER`): what
    their underscores separate, one or several ("__init__" → "init")."""
    return [part for ident in _IDENTIFIER.findall(text) for part in ident.split("_") if part]


def _by_prefix(bag: Iterable[str]) -> dict[str, list[str]]:
    """The words of `bag` by their first three letters: every word `_extends` can accept shares
    the term's (a prefix of four or more letters, or a spelling variant equal in its first
    three), so it reads those alone instead of the whole evidence's words per missing term
    (the largest cost of the refusal's reading under load: docs/scale.md#serving-cpu)."""
    out: dict[str, list[str]] = {}
    for w in bag:
        out.setdefault(w[:3], []).append(w)
    return out


def _extends(term: str, bag: Iterable[str]) -> bool:
    """A stricter prefix match for grounding: an evidence word that extends the question's term
    ("mutagen" → "mutagenic"), or one it extends by at most two letters; "whole" does not carry
    "wholesale"."""
    if len(term) < 4:
        return False
    return any(
        ((w.startswith(term) or (term.startswith(w) and len(term) - len(w) <= 2)) and len(w) >= 4)
        or spelling_variant(term, w)
        for w in bag
    )


def spelling_variant(a: str, b: str) -> bool:
    """One letter apart after the third, in words of six letters or more: British and American
    spellings as the stemmer leaves them ("licenc"/"licens", "organis"/"organiz")."""
    if len(a) != len(b) or len(a) < 6 or a[:3] != b[:3]:
        return False
    return sum(x != y for x, y in zip(a, b, strict=True)) == 1
