"""English synonyms from Princeton WordNet 3.0 (docs/verbatim.md#refusal-wordnet).

A question may say a thing in a word its documents never write ("breach" where a licence writes
"violate", "employ" where a manual writes "use"). `synonyms` gives the single words WordNet puts in
a synset with a word or with one of its base forms ("permitted" -> "permit" -> "allow"), all parts
of speech, so that a reader can count such a word as said.

The data (`data/wordnet_synonyms.tsv.gz`, built by `bench/synonyms_build.py` from WordNet 3.0's
database files, every synset and exception as WordNet ships them; licence: `data/WORDNET_LICENSE`)
is read on the first call, never at import, and kept for the process.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA_FILE = Path(__file__).parent / "data" / "wordnet_synonyms.tsv.gz"

#: WordNet's regular detachment rules (morphy), per part of speech: (suffix, replacement). A
#: candidate base form counts only if WordNet holds it in that part of speech.
RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "n": (
        ("s", ""),
        ("ses", "s"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ),
    "v": (
        ("s", ""),
        ("ies", "y"),
        ("es", "e"),
        ("es", ""),
        ("ed", "e"),
        ("ed", ""),
        ("ing", "e"),
        ("ing", ""),
    ),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}


@dataclass(frozen=True)
class WordNet:
    """The synsets (single-word lemmas) and exception lists of the data file."""

    #: lemma -> indexes into `synsets` of the synsets holding it.
    member: dict[str, tuple[int, ...]]
    synsets: tuple[tuple[str, ...], ...]
    #: part of speech -> the lemmas WordNet holds in it.
    lemmas: dict[str, frozenset[str]]
    #: part of speech -> inflected form -> base forms (`*.exc`).
    exceptions: dict[str, dict[str, tuple[str, ...]]]

    @classmethod
    def load(cls, path: Path = DATA_FILE) -> WordNet:
        member: defaultdict[str, list[int]] = defaultdict(list)
        synsets: list[tuple[str, ...]] = []
        lemmas: defaultdict[str, set[str]] = defaultdict(set)
        exceptions: defaultdict[str, dict[str, tuple[str, ...]]] = defaultdict(dict)
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                kind, pos, *rest = line.rstrip("\n").split("\t")
                if kind == "S":
                    words = tuple(rest[0].split(" "))
                    lemmas[pos].update(words)
                    if len(words) > 1:  # a synset of one word names no synonym
                        for w in words:
                            member[w].append(len(synsets))
                        synsets.append(words)
                elif kind == "X":
                    exceptions[pos][rest[0]] = tuple(rest[1].split(" "))
        return cls(
            member={w: tuple(ix) for w, ix in member.items()},
            synsets=tuple(synsets),
            lemmas={pos: frozenset(ws) for pos, ws in lemmas.items()},
            exceptions=dict(exceptions),
        )

    def base_forms(self, word: str) -> set[str]:
        """WordNet's base forms of `word` (morphy): per part of speech, the exception list's
        bases if it lists the word, else the detachment rules' candidates WordNet holds."""
        out: set[str] = set()
        for pos, rules in RULES.items():
            listed = self.exceptions.get(pos, {}).get(word)
            if listed is not None:
                out.update(listed)
                continue
            held = self.lemmas.get(pos, frozenset())
            for suffix, ending in rules:
                if word.endswith(suffix) and (base := word[: len(word) - len(suffix)] + ending) in held:
                    out.add(base)
        return out

    def synonyms(self, word: str) -> frozenset[str]:
        out: set[str] = set()
        for form in {word, *self.base_forms(word)}:
            for i in self.member.get(form, ()):
                out.update(self.synsets[i])
        out.discard(word)
        return frozenset(out)


@lru_cache(maxsize=1)
def _wordnet() -> WordNet:
    return WordNet.load()


@lru_cache(maxsize=65536)
def synonyms(word: str) -> frozenset[str]:
    """The lowercase single-word synonyms of `word` and of its WordNet base forms, all parts of
    speech, without `word` itself (a base form, being in a synset with its synonyms, is one of
    them). Empty for a word WordNet does not hold."""
    return _wordnet().synonyms(word.lower())
