"""The answer-type lexicon: what kind of answer a question asks for, and how a span that states
such an answer reads (docs/verbatim.md#answer-types). One lexicon, kept as data
(`data/answer_types.json`), read by the span scorer (`verbatim.span_rank`: does a span state the
kind asked) and by the refusal signal (`verbatim.grounding`: does the evidence hold an answer of
the kind expected). It is the union of two lexicons written from general knowledge of clinical,
legal and technical questions; no entry names a document.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ANSWER_TYPES_FILE = Path(__file__).parent / "data" / "answer_types.json"


@dataclass(frozen=True, slots=True)
class AnswerType:
    """One kind of answer. `asks`: question cues that name the kind; `hints`: looser cues that
    suggest it but may ask for something else ("how much" may ask for a dose or an amount of
    anything; "pay" may ask whether, not how much), enough to raise a span, not to demand one.
    `quantity`: the answer is a figure (a duration, a dose, a price…), which table rows hold.
    `form`: the kind is a form of answer (a definition, a reason, a condition, a procedure, a
    moment relative to an event) marked by function words ("means", "because", "if", "before")
    that most spans carry, so it can rank spans but cannot show that evidence holds the fact."""

    name: str
    quantity: bool
    form: bool
    asks: tuple[re.Pattern[str], ...]
    states: tuple[re.Pattern[str], ...]
    hints: tuple[re.Pattern[str], ...] = ()
    #: `reads_in`'s answers by text: this kind's own memory (not compared, hashed or shown).
    _reads: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def asked_by(self, question: str, *, hints: bool = True) -> bool:
        return any(p.search(question) for p in self.asks) or (
            hints and any(p.search(question) for p in self.hints)
        )

    def reads_in(self, text: str) -> bool:
        """Whether one of the kind's `states` patterns is found in `text`; remembered per text by
        the kind itself (`_reads`, at most `KEPT_READS`): the span scorer and focus ask it of the
        same spans question after question. Keyed by the text alone, so no pattern is hashed."""
        got = self._reads.get(text)
        if got is None:
            got = any(p.search(text) for p in self.states)
            if len(self._reads) >= KEPT_READS:
                self._reads.clear()
            self._reads[text] = got
        return got


#: How many texts' answers each `AnswerType` keeps for `reads_in` (all dropped at once when full).
#: (The 19 development families' `default` eval reads ~6,200 texts of one kind at most, 36,000 of
#: all 15; `verbatim` ~150,000, which emptied the single memory of 65,536 that this replaced twice.)
KEPT_READS = 8192


@dataclass(frozen=True, slots=True)
class AnswerTypes:
    """The lexicon: its kinds, and what marks a yes/no question (an auxiliary first, no wh-word),
    which expects no value whatever its words ("Are foreign keys enforced by default?")."""

    types: tuple[AnswerType, ...]
    yes_no: re.Pattern[str]

    @classmethod
    def load(cls, path: Path = ANSWER_TYPES_FILE) -> AnswerTypes:
        raw = json.loads(path.read_text(encoding="utf-8"))

        def compiled(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
            return tuple(re.compile(p, re.IGNORECASE) for p in patterns)

        types = tuple(
            AnswerType(
                name=str(t["name"]),
                quantity=bool(t.get("quantity", False)),
                form=bool(t.get("form", False)),
                asks=compiled(t["asks"]),
                states=compiled(t["states"]),
                hints=compiled(t.get("hints", ())),
            )
            for t in raw["types"]
        )
        names = [t.name for t in types]
        if len(set(names)) != len(names):
            raise ValueError(f"{path}: an answer type is listed twice: {names}")
        return cls(types, re.compile(raw["yes_no"], re.IGNORECASE))

    def asked(self, question: str) -> tuple[AnswerType, ...]:
        """Every kind `question` asks or hints at (none, one or several), forms included: what
        the span scorer matches spans against ("Can I sublicense?" is answered by a condition)."""
        return tuple(t for t in self.types if t.asked_by(question))

    def expected(self, question: str) -> tuple[AnswerType, ...]:
        """The values `question` expects the evidence to hold, for the refusal signal: the kinds
        its cues name (not hints) that are not forms, and none for a yes/no question."""
        if self.yes_no.search(question):
            return ()
        return tuple(t for t in self.types if not t.form and t.asked_by(question, hints=False))


@lru_cache(maxsize=4)
def answer_types(path: Path = ANSWER_TYPES_FILE) -> AnswerTypes:
    """The lexicon in `path` (by default the shipped one), read once."""
    return AnswerTypes.load(path)
