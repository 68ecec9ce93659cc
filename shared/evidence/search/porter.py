"""Lucene's PorterStemmer (org.apache.lucene.analysis.en.PorterStemmer), ported.

Lucene ports Martin Porter's reference C implementation *with its departures*
from the published algorithm: words of one or two letters are left alone,
step 2 maps "bli" → "ble" (instead of "abli" → "able") and adds
"logi" → "log". Snowball's `porter` stemmer lacks those departures, which
changes common scientific words (biology → "biolog" here, "biologi" there),
so for OpenSearch parity we carry the port rather than use Snowball.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


class _Word:
    __slots__ = ("b", "j", "k")

    def __init__(self, word: str) -> None:
        self.b = list(word)
        self.k = len(word) - 1
        self.j = 0

    def cons(self, i: int) -> bool:
        ch = self.b[i]
        if ch in _VOWELS:
            return False
        if ch == "y":
            return True if i == 0 else not self.cons(i - 1)
        return True

    def m(self) -> int:
        """Number of consonant-vowel sequences in b[0..j]."""
        n = 0
        i = 0
        j = self.j
        while True:
            if i > j:
                return n
            if not self.cons(i):
                break
            i += 1
        i += 1
        while True:
            while True:
                if i > j:
                    return n
                if self.cons(i):
                    break
                i += 1
            i += 1
            n += 1
            while True:
                if i > j:
                    return n
                if not self.cons(i):
                    break
                i += 1
            i += 1

    def vowelinstem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def doublec(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self.cons(j)

    def cvc(self, i: int) -> bool:
        if i < 2 or not self.cons(i) or self.cons(i - 1) or not self.cons(i - 2):
            return False
        return self.b[i] not in ("w", "x", "y")

    def ends(self, s: str) -> bool:
        n = len(s)
        if n > self.k + 1:
            return False
        if "".join(self.b[self.k - n + 1 : self.k + 1]) != s:
            return False
        self.j = self.k - n
        return True

    def setto(self, s: str) -> None:
        self.b[self.j + 1 :] = list(s)
        self.k = self.j + len(s)

    def r(self, s: str) -> None:
        if self.m() > 0:
            self.setto(s)

    def step1ab(self) -> None:
        b = self.b
        if b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
            del b[self.k + 1 :]
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowelinstem():
            self.k = self.j
            del b[self.k + 1 :]
            if self.ends("at"):
                self.setto("ate")
            elif self.ends("bl"):
                self.setto("ble")
            elif self.ends("iz"):
                self.setto("ize")
            elif self.doublec(self.k):
                self.k -= 1
                if b[self.k] in ("l", "s", "z"):
                    self.k += 1
            elif self.m() == 1 and self.cvc(self.k):
                self.setto("e")
        del b[self.k + 1 :]

    def step1c(self) -> None:
        if self.ends("y") and self.vowelinstem():
            self.b[self.k] = "i"

    def _replace_first(self, rules: tuple[tuple[str, str], ...]) -> None:
        # The reference code stops at the first suffix that matches, whether or not
        # its measure condition lets the replacement happen.
        for suffix, repl in rules:
            if self.ends(suffix):
                self.r(repl)
                return

    _STEP2: dict[str, tuple[tuple[str, str], ...]] = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP3: dict[str, tuple[tuple[str, str], ...]] = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP4: dict[str, tuple[str, ...]] = {
        "a": ("al",),
        "c": ("ance", "ence"),
        "e": ("er",),
        "i": ("ic",),
        "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"),
        "s": ("ism",),
        "t": ("ate", "iti"),
        "u": ("ous",),
        "v": ("ive",),
        "z": ("ize",),
    }

    def step2(self) -> None:
        if self.k == 0:
            return
        rules = self._STEP2.get(self.b[self.k - 1])
        if rules:
            self._replace_first(rules)

    def step3(self) -> None:
        rules = self._STEP3.get(self.b[self.k])
        if rules:
            self._replace_first(rules)

    def step4(self) -> None:
        if self.k == 0:
            return
        ch = self.b[self.k - 1]
        if ch == "o":
            if self.ends("ion") and self.j >= 0 and self.b[self.j] in ("s", "t"):
                pass
            elif not self.ends("ou"):
                return
        else:
            suffixes = self._STEP4.get(ch)
            if not suffixes or not any(self.ends(s) for s in suffixes):
                return
        if self.m() > 1:
            self.k = self.j

    def step5(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            a = self.m()
            if a > 1 or (a == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.doublec(self.k) and self.m() > 1:
            self.k -= 1

    def result(self) -> str:
        return "".join(self.b[: self.k + 1])


def porter_stem(word: str) -> str:
    """Stem one lowercase word exactly as Lucene's PorterStemFilter does."""
    if len(word) < 3:
        return word
    w = _Word(word)
    w.step1ab()
    if w.k > 0:
        w.step1c()
        w.step2()
        w.step3()
        w.step4()
        w.step5()
    return w.result()


class PorterStemmer:
    """Memoising stemmer: corpora repeat words, so each distinct word is stemmed once."""

    def __init__(self, max_cache: int = 500_000) -> None:
        self._cache: dict[str, str] = {}
        self._max = max_cache

    def stem(self, word: str) -> str:
        hit = self._cache.get(word)
        if hit is None:
            hit = porter_stem(word)
            if len(self._cache) < self._max:
                self._cache[word] = hit
        return hit
