"""OpenSearch's `english` analyzer, reproduced so local BM25 rankings match the cloud's.

Chain (as OpenSearch builds it): standard tokenizer (Unicode word boundaries,
UAX #29) → english_possessive_stemmer → lowercase → english stop words →
porter_stem. The tokenizer here implements the UAX #29 rules that matter for
Latin-script text (letters and digits joined across `.`, `'`, `:` between
letters and `.`, `,`, `;`, `'` between digits; `_` joins; ideographs are
single tokens; tokens longer than 255 characters are split) — the same
segments Lucene's StandardTokenizer emits for such text.

Stemming is Lucene's own PorterStemmer (see `porter.py` for why not Snowball).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from evidence.names import HYPHENS
from evidence.search.porter import PorterStemmer

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET: what OpenSearch's `english` analyzer removes.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

_LETTER = r"[^\W\d_]"
#: What joins two letters into one token (UAX #29 MidLetter / MidNumLet: "don't", "x.y").
_MID_LETTER = ":.'\u2018\u2019\ufe52\uff07\uff0e"
_TOKEN = re.compile(
    rf"""
    \w+
    (?:
        (?: (?<={_LETTER}) [{_MID_LETTER}] (?={_LETTER})   # MidLetter / MidNumLet
          | (?<=\d) [.,;'\u2019\u066C\uFE50\uFE54\uFF0C\uFF1B] (?=\d)           # MidNum / MidNumLet
        )
        \w+
    )*
    """,
    re.VERBOSE,
)
# Ideographs and kana are emitted one character at a time by the standard tokenizer.
_IDEOGRAPHIC = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_MAX_TOKEN = 255
_POSSESSIVE = ("'s", "\u2019s", "\uff07s")
_APOSTROPHE = re.compile("['\u2019\uff07]")


@dataclass(frozen=True, slots=True)
class AnalyzerConfig:
    """The `english` analyzer's knobs; defaults are OpenSearch's."""

    stopwords: frozenset[str] = ENGLISH_STOP_WORDS
    stem: bool = True

    @property
    def name(self) -> str:
        """Recorded by each index so queries are always analysed as its documents were."""
        stop = (
            "stop"
            if self.stopwords == ENGLISH_STOP_WORDS
            else ("nostop" if not self.stopwords else "customstop")
        )
        return f"english:{stop}:{'porter' if self.stem else 'nostem'}"

    @classmethod
    def from_name(cls, name: str) -> AnalyzerConfig:
        parts = name.split(":")
        if (
            len(parts) != 3
            or parts[0] != "english"
            or parts[1] not in ("stop", "nostop")
            or parts[2]
            not in (
                "porter",
                "nostem",
            )
        ):
            raise ValueError(f"unknown analyzer {name!r}")
        return cls(
            stopwords=ENGLISH_STOP_WORDS if parts[1] == "stop" else frozenset(), stem=parts[2] == "porter"
        )


def standard_tokenize(text: str) -> list[str]:
    tokens: list[str] = _TOKEN.findall(text)
    # An over-long token is found by measuring the tokens: searching the text for a run of 256
    # token characters cost more than the tokenising itself (the search restarts at every position).

    if (text.isascii() or not _IDEOGRAPHIC.search(text)) and max(map(len, tokens), default=0) <= _MAX_TOKEN:
        return tokens
    out: list[str] = []
    for tok in tokens:
        if _IDEOGRAPHIC.search(tok):
            out.extend(_split_ideographic(tok))
        elif len(tok) > _MAX_TOKEN:
            out.extend(tok[i : i + _MAX_TOKEN] for i in range(0, len(tok), _MAX_TOKEN))
        else:
            out.append(tok)
    return out


def _split_ideographic(tok: str) -> Iterable[str]:
    buf = ""
    for ch in tok:
        if _IDEOGRAPHIC.match(ch):
            if buf:
                yield buf
                buf = ""
            yield ch
        else:
            buf += ch
    if buf:
        yield buf


class EnglishAnalyzer:
    def __init__(self, config: AnalyzerConfig | None = None, max_cache: int = 500_000) -> None:
        self.config = config or AnalyzerConfig()
        self._stemmer = PorterStemmer()
        #: Lowercased token → its term ("" for a stop word): one dict lookup per token instead of
        #: a stop-word test and a stemmer call (analysis was ~40% of BM25-only indexing).
        self._terms: dict[str, str] = {"": ""}
        self._max = max_cache

    def _term(self, word: str) -> str:
        if not word or word in self.config.stopwords:
            term = ""
        else:
            term = self._stemmer.stem(word) if self.config.stem else word
        if len(self._terms) < self._max:
            self._terms[word] = term
        return term

    def analyze(self, text: str) -> list[str]:
        # Lowercasing before tokenising changes no boundary (case is not a UAX #29 property)
        # and lets one C-level pass replace a per-token call.
        words = standard_tokenize(text.lower())
        if _APOSTROPHE.search(text):
            words = [tok[:-2] if tok.endswith(_POSSESSIVE) else tok for tok in words]
        terms: list[str | None] = list(map(self._terms.get, words))
        if None in terms:
            terms = [self._term(w) if t is None else t for w, t in zip(words, terms, strict=True)]
        return [t for t in terms if t]


#: `HYPHENS` (evidence.names): the analyser splits a word at each of them alike.
_HYPHEN = re.compile(f"[{HYPHENS}]")
#: A compound a query writes with hyphens, of letters only ("non-opioid", "co-administered",
#: "e-mail"; not "COVID-19", "p53-dependent" or "2-3"), whole: it neither starts nor ends next
#: to a word character or another hyphen, and each part is the analyser's token, letters joined
#: by an apostrophe or a full stop included ("don't-care" → "don'tcare", not "tcare"). A match
#: starts only where such a run starts (the lookbehinds), so a long run is read once; one that
#: fails at its end backtracks through it once.
_COMPOUND_PART = rf"{_LETTER}+(?:[{_MID_LETTER}]{_LETTER}+)*"
_HYPHENATED = re.compile(
    rf"(?<![\w{HYPHENS}])(?<!{_LETTER}[{_MID_LETTER}])"
    rf"{_COMPOUND_PART}(?:[{HYPHENS}]{_COMPOUND_PART})+(?![\w{HYPHENS}])"
)


def with_joined_compounds(text: str) -> str:
    """A query `text` with each hyphenated compound also written joined ("non-opioid" →
    "nonopioid"). The standard tokenizer splits a hyphenated word into its parts in the query
    and in the documents alike, so a document that writes the compound joined ("Nonopioid
    therapies") is found by neither part. Lucene's answer, a `word_delimiter_graph` filter with
    `catenate_words`, must not follow the standard tokenizer (OpenSearch's own docs), so it
    would change the `english` analyser both backends share; appending the joined form to the
    query text changes only the query, the same for both backends (docs/ranking.md#compounds)."""
    if not _HYPHEN.search(text):
        return text
    joined = [_HYPHEN.sub("", m) for m in _HYPHENATED.findall(text)]
    return " ".join([text, *joined]) if joined else text


@lru_cache(maxsize=4)
def get_analyzer(config: AnalyzerConfig | None = None) -> EnglishAnalyzer:
    return EnglishAnalyzer(config)
