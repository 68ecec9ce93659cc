"""The initials of the names an index's passages spell out (docs/verbatim.md#refusal-abbreviations).

A question may name a thing by an acronym its documents never write ("EPL" where they write
"Eclipse Public License"). The refusal signal's `absent_rare` (`verbatim.grounding`) reads a rare
question word that no passage uses as something the documents do not talk about; an acronym
whose letters are the initials of a name the documents do write is not such a word. This module
reads those names: runs of consecutive capitalised words (a word beginning with a capital letter;
a hyphen separates words, so "Non-Steroidal Anti-Inflammatory Drugs" is five), with lower-case
connectors ("of", "for", "and", …) allowed between them, each connector's letter either kept or
dropped ("Department of Defense": "DD" and "DOD"). Every window of such a run that begins and ends
with a capitalised word and spells 2-`MAX_LETTERS` initials is kept, with the capitalised words it
abbreviates (at most `MAX_EXPANSIONS` per initials, the first seen).

Built from text only (no lexicon, no document named); `EmbeddedBackend.initialisms` builds it once
per index and store generation. The table is index-wide: a caller checks an expansion's words
against the passages its filters let it see (`term_counts`) before counting an acronym present.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from evidence.names import HYPHENS

#: Lower-case words a name may hold between its capitalised words.
CONNECTORS = frozenset({"of", "for", "and", "the", "to", "in", "on", "a", "an"})
#: Initials this long at most (a question's acronym: "EPL", "NSAID", "HIPAA").
MAX_LETTERS = 6
#: Expansions kept per initials (the caller needs one whose words it can see).
MAX_EXPANSIONS = 4
_TOKEN = re.compile(r"[^\W\d_][^\W_]*(?:['\u2019][^\W\d_]+)?")
#: What may stand between two words of one name: spaces, a line break, a hyphen or dash.
_GAP = re.compile(rf"[\s{HYPHENS}\u2012-\u2014]*")

Table = Mapping[str, tuple[tuple[str, ...], ...]]


def _runs(text: str) -> Iterable[list[str]]:
    """The runs of capitalised words and connectors in `text`, split at any other word or mark."""
    run: list[str] = []
    end = 0
    for m in _TOKEN.finditer(text):
        word = m.group()
        joined = _GAP.fullmatch(text, end, m.start()) is not None
        if not joined and run:
            yield run
            run = []
        if word[0].isupper() or (word in CONNECTORS and run):
            run.append(word)
        else:
            if run:
                yield run
            run = []
        end = m.end()
    if run:
        yield run


def add_text(table: dict[str, list[tuple[str, ...]]], text: str) -> None:
    """Add the initials of the names `text` spells out to `table` (see the module docstring)."""
    for run in _runs(text):
        caps = [i for i, w in enumerate(run) if w[0].isupper()]
        if len(caps) < 2:
            continue
        for a, i in enumerate(caps):
            for j in caps[a + 1 :]:
                window = run[i : j + 1]
                words = tuple(w for w in window if w[0].isupper())
                if len(words) > MAX_LETTERS:
                    break
                keys = {"".join(w[0] for w in words).lower(), "".join(w[0] for w in window).lower()}
                for key in keys:
                    if len(key) > MAX_LETTERS:
                        continue
                    found = table.setdefault(key, [])
                    if len(found) < MAX_EXPANSIONS and words not in found:
                        found.append(words)


def build(texts: Iterable[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """initials (lower case) → the capitalised words of up to `MAX_EXPANSIONS` names in `texts`
    that spell them."""
    table: dict[str, list[tuple[str, ...]]] = {}
    for text in texts:
        add_text(table, text)
    return {k: tuple(v) for k, v in table.items()}
