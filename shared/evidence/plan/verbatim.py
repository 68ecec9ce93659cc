"""The rule planner of the verbatim profile (seed 002): entity, query mode, attribute, sections, phrases.

Deterministic and instant; the LLM planner (`plan.llm`) falls back to it. It reads only the
question. Three tables drive it, each extensible:

- **attributes** (half_life, bioavailability, tmax, …): the words that ask for one (`t½`, "how
  long does it stay in the body"), the phrases to search for, the sections it lives in and a
  pattern a span must match to state it;
- **section cues**: the section vocabulary's aliases plus lay words ("side effects" →
  adverse_reactions, "kidney" → renal_impairment, "breastfeeding" → lactation);
- **modes**: "why …" across sections → MULTI_SECTION, an attribute → ATTRIBUTE, a section named
  → SECTION, "what is X" → GENERIC, else GLOBAL.

Entity: names the caller knows (the index's subjects) when given; otherwise the capitalised or
drug-like words of the question that are not question words.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from evidence.ingest.sections import SectionVocabulary, default_vocabulary, name_words, normalise_heading
from evidence.names import HYPHENS

QUERY_MODES = ("SECTION", "ATTRIBUTE", "MULTI_SECTION", "GENERIC", "GLOBAL")


@dataclass(frozen=True, slots=True)
class Attribute:
    """A fact clinicians ask for by name: how it is asked, searched for and recognised."""

    name: str
    triggers: tuple[str, ...]  # regexes over the lower-cased question
    phrases: tuple[str, ...]  # search phrases (synonyms as the label words them)
    sections: tuple[str, ...]  # canonical sections it usually lives in
    evidence: str  # regex a span must match (case-insensitive) to state the attribute


RULES_FILE = Path(__file__).parent / "data" / "verbatim_rules.json"


def _load_tables(data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a rules document: `attributes`, `section_cues`, `lay_terms`, `why_terms`."""
    try:
        attributes = tuple(
            Attribute(
                name=str(a["name"]),
                triggers=tuple(map(str, a["triggers"])),
                phrases=tuple(map(str, a["phrases"])),
                sections=tuple(map(str, a["sections"])),
                evidence=str(a["evidence"]),
            )
            for a in data.get("attributes", [])
        )
        cues = {str(k): tuple(map(str, v)) for k, v in data.get("section_cues", {}).items()}
        lay = {str(k): tuple(map(str, v)) for k, v in data.get("lay_terms", {}).items()}
        why = tuple(map(str, data.get("why_terms", [])))
        for pattern in [p for a in attributes for p in (*a.triggers, a.evidence)] + [
            *(p for v in cues.values() for p in v),
            *lay,
        ]:
            re.compile(pattern)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"verbatim rules: malformed entry ({exc})") from exc
    except re.error as exc:
        raise ValueError(f"verbatim rules: bad regular expression: {exc}") from exc
    return {"attributes": attributes, "section_cues": cues, "lay_terms": lay, "why_terms": why}


@lru_cache(maxsize=1)
def _default_tables() -> dict[str, Any]:
    return _load_tables(json.loads(RULES_FILE.read_text(encoding="utf-8")))


_WHY = re.compile(r"^\s*(?:how come|what is the reason|for what reason)\b|\bwhy\b|\breasons?\b")
_GENERIC = re.compile(
    r"^\s*(?:what (?:is|are)|tell me about|describe|overview of|information (?:on|about)|who makes)\s+"
    r"(?:the drug |the medicine |the medication )?(?P<rest>[^?]*)\??\s*$",
    re.IGNORECASE,
)
#: A question word; a compound is one word with any hyphen the analyser splits at (`HYPHENS`).
_WORD = re.compile(rf"[A-Za-z][A-Za-z0-9{HYPHENS}]*[A-Za-z0-9]|[A-Za-z]|\d+(?:\.\d+)?")
_QUESTION_WORDS = frozenset(
    """what which who whom whose when where why how is are was were do does did can could should would will
    may might must the a an of to in for on and or with by about tell me my i you your it its this that
    these those there be been being has have had any all some please describe explain list give show
    use used using take taking taken patients patient drug drugs medicine medication dose doses dosage
    during after before from into than then if not no yes much many long often section say says
    cause causes caused happen happens happened occur occurs get gets make makes give given need needs
    know mean means takes took""".split()
)


@dataclass(frozen=True)
class VerbatimRules:
    """The rule planner's tables; `default_rules()` holds the clinical ones (data/verbatim_rules.json)."""

    attributes: tuple[Attribute, ...]
    section_cues: Mapping[str, tuple[str, ...]]
    lay_terms: Mapping[str, tuple[str, ...]]
    why_terms: tuple[str, ...] = ()
    vocabulary: SectionVocabulary = field(default_factory=default_vocabulary)

    def __post_init__(self) -> None:
        compiled = {
            a.name: (
                [re.compile(t, re.IGNORECASE) for t in a.triggers],
                re.compile(a.evidence, re.IGNORECASE),
            )
            for a in self.attributes
        }
        object.__setattr__(self, "_attr", compiled)
        cues = {
            name: [re.compile(c, re.IGNORECASE) for c in pats] for name, pats in self.section_cues.items()
        }
        object.__setattr__(self, "_cues", cues)

    @classmethod
    def from_config(
        cls, data: Mapping[str, Any], *, replace: bool = False, vocabulary: SectionVocabulary | None = None
    ) -> VerbatimRules:
        """A domain's rules: the same document as data/verbatim_rules.json, extending the
        defaults (attributes by name, cues and lay terms by key) unless `replace`."""
        tables = _load_tables(data)
        if not replace:
            base = _default_tables()
            named = {a.name: a for a in base["attributes"]}
            named.update({a.name: a for a in tables["attributes"]})
            tables = {
                "attributes": tuple(named.values()),
                "section_cues": {**base["section_cues"], **tables["section_cues"]},
                "lay_terms": {**base["lay_terms"], **tables["lay_terms"]},
                "why_terms": tables["why_terms"] or base["why_terms"],
            }
        return cls(**tables, vocabulary=vocabulary or default_vocabulary())

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)

    def evidence_pattern(self, name: str) -> re.Pattern[str] | None:
        found = object.__getattribute__(self, "_attr").get(name)
        return found[1] if found else None

    def find_attributes(self, question: str) -> list[tuple[int, str]]:
        """(position, name) of every attribute the question asks for, earliest first."""
        out = []
        for a in self.attributes:
            triggers, _ = object.__getattribute__(self, "_attr")[a.name]
            pos = min((m.start() for t in triggers if (m := t.search(question))), default=None)
            if pos is not None:
                out.append((pos, a.name))
        return sorted(out)

    def find_sections(self, question: str) -> list[str]:
        """Canonical sections the question names (vocabulary aliases) or hints at (cues), in order."""
        hits: list[tuple[int, int, str]] = []  # (position, -length, name): earliest, then longest
        norm = normalise_heading(question)
        table = self.vocabulary.alias_table()
        for m in self.vocabulary.alias_pattern().finditer(norm):
            alias = m.group()
            if len(alias) >= 5:  # "dose", "uses": too common as plain words; cues judge them in context
                hits.append((m.start(), -len(alias), table[alias]))
        low = " ".join(question.lower().split())
        for name, pats in object.__getattribute__(self, "_cues").items():
            found = [(m.start(), -len(m.group())) for p in pats if (m := p.search(low))]
            if found:
                pos, neg = min(found)
                hits.append((pos, neg, name))
        seen: dict[str, None] = {}
        for _, _, name in sorted(hits):
            seen.setdefault(name, None)
        return list(seen)

    def lay_groups(self, question: str) -> list[tuple[list[str], list[str]]]:
        """(question words a lay phrase covers, the label words for them), per lay phrase found:
        "stopped" → (["stopped"], ["discontinuation", "discontinue"]). The two are alternatives."""
        out = []
        for pat, words in self.lay_terms.items():
            for m in re.finditer(pat, question, re.IGNORECASE):
                out.append((content_words(m.group()), list(words)))
        return out

    def lay_expansions(self, question: str) -> list[str]:
        """Label words for the lay words of a question ("kidney" → "renal")."""
        out: dict[str, None] = {}
        for pat, words in self.lay_terms.items():
            if re.search(pat, question, re.IGNORECASE):
                for w in words:
                    out.setdefault(w, None)
        return list(out)


@lru_cache(maxsize=1)
def default_rules() -> VerbatimRules:
    return VerbatimRules(**_default_tables())


def content_words(question: str, *, drop: Iterable[str] = ()) -> list[str]:
    """The question's words that carry meaning, in order, without question words or `drop`."""
    dropped = {w.lower() for d in drop for w in _WORD.findall(d)}
    seen: dict[str, None] = {}
    for m in _WORD.finditer(question):
        w = m.group()
        lw = w.lower()
        if lw in _QUESTION_WORDS or lw in dropped or (len(lw) < 2 and not lw.isdigit()):
            continue
        seen.setdefault(w, None)
    return list(seen)


_NUMBER = re.compile(r"\d+(?:\.\d+)*")
#: A word as `name_words` reads one (lower-cased: `[a-z][a-z0-9]*`), with its place.
_NAME_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def says_name(asked: Sequence[str], question: str, name: str) -> bool:
    """Whether the question says a subject `name` once both are read as names are elsewhere
    (`name_words`: lower-cased, punctuation and quotes out, a final "s" dropped, filler words out):
    the name's words are a run of consecutive question words (`asked`, the question's `name_words`),
    and every number of the name ("2.0" in "license version 2.0") is one of the question's.
    So 'Lipitor®' and 'the "Artistic License"' are said by "lipitor" and "artistic license".
    A name with no such words is never said this way."""
    return _said_at(asked, question, name) is not None


def _said_at(asked: Sequence[str], question: str, name: str) -> int | None:
    """The position in `asked` of the run of the name's words (`says_name`), or None."""
    words = name_words(name)
    if not words:
        return None
    numbers = set(_NUMBER.findall(question))
    if any(n not in numbers for n in _NUMBER.findall(name)):
        return None
    return run_at(asked, words)


def run_at(
    asked: Sequence[str], words: Sequence[str], says: Callable[[str, str], bool] = operator.eq
) -> int | None:
    """The first position in `asked` from which consecutive words say `words` one by one
    (`says(asked word, word)`: equal unless told), or None; empty `words` are never said. The
    one loop of `says_name` and the cascade's `abbreviates` (which also takes clipped words)."""
    if not words:
        return None
    n = len(words)
    return next(
        (
            i
            for i in range(len(asked) - n + 1)
            if all(says(q, w) for q, w in zip(asked[i : i + n], words, strict=True))
        ),
        None,
    )


def said_span(question: str, name: str) -> tuple[int, int] | None:
    """Where `question` says `name` read as a name (`says_name`): from the start of its first
    word to the end of its last (filler words between them included); None when it does not."""
    placed = [(m, w) for m in _NAME_TOKEN.finditer(question) for w in name_words(m.group())]
    at = _said_at([w for _, w in placed], question, name)
    if at is None:
        return None
    last = at + len(name_words(name)) - 1
    return placed[at][0].start(), placed[last][0].end()


def find_entity(question: str, known: Sequence[str] = ()) -> str | None:
    """A known name the question mentions (longest first), as written, or else read as a name
    (`says_name`: 'the "Artistic License"' by "the Artistic License", "Lipitor®" by "Lipitor",
    as the cascade reads the passages' subjects); with no names known, a capitalised non-initial
    word (a guess the cascade checks against the index)."""
    low = question.lower()
    ordered = sorted(known, key=len, reverse=True)
    for name in ordered:
        if name and re.search(r"(?<![0-9a-z])" + re.escape(name.lower()) + r"(?![0-9a-z])", low):
            return name
    if known:
        asked = name_words(question)
        return next((n for n in ordered if n and says_name(asked, question, n)), None)
    words = list(_WORD.finditer(question))
    for i, m in enumerate(words):
        w = m.group()
        if w.lower() in _QUESTION_WORDS or len(w) < 4:
            continue
        if (i > 0 and w[0].isupper()) or (w.isupper() and len(w) > 3):
            return w
    return None


@dataclass(frozen=True, slots=True)
class RulePlan:
    """The seed's plan, as the rules produce it (converted to the API's `Plan` by the caller)."""

    entity: str | None
    query_mode: str
    attribute: str | None
    candidate_sections: tuple[str, ...]
    search_phrases: tuple[str, ...]
    extraction_level: str


def plan_question(
    question: str, *, known_entities: Sequence[str] = (), rules: VerbatimRules | None = None
) -> RulePlan:
    r = rules or default_rules()
    q = " ".join(question.split())
    entity = find_entity(q, known_entities)
    # Drop every alias of the entity from the words we search and classify with.
    entity_words: list[str] = list(known_entities) if entity and entity in known_entities else []
    if entity:
        entity_words.append(entity)
    rest = q
    for name in sorted(entity_words, key=len, reverse=True):
        rest = re.sub(re.escape(name), " ", rest, flags=re.IGNORECASE)
    if entity and not re.search(re.escape(entity), q, flags=re.IGNORECASE):
        # An entity said only as a name ("Lipitor" for "lipitor®") leaves the question too.
        said = said_span(rest, entity)
        if said is not None:
            rest = f"{rest[: said[0]]} {rest[said[1] :]}"
    attrs = r.find_attributes(rest)
    attribute = attrs[0][1] if attrs else None
    sections = r.find_sections(rest)
    why = bool(_WHY.search(rest.lower()))
    words = content_words(rest)
    generic = _GENERIC.match(q)
    generic_rest = content_words(generic.group("rest"), drop=entity_words) if generic else None
    leftover = [w for w in words if not _section_word(w, r)]
    mode = _query_mode(
        why=why,
        sections=sections,
        attribute=attribute,
        generic=generic is not None and bool(entity) and not generic_rest,
        leftover=bool(leftover),
    )
    candidate = _candidate_sections(r, mode, sections, attribute)
    phrases = _search_phrases(r, rest, words, attribute, why=why, entity=entity)
    # A section asked for by name alone comes back whole; with more words, its sentences that match them.
    level = (
        "block"
        if mode in ("GENERIC", "MULTI_SECTION") or (mode == "SECTION" and not leftover)
        else "sentence"
    )
    return RulePlan(entity, mode, attribute, tuple(candidate), tuple(phrases), level)


def _query_mode(
    *, why: bool, sections: Sequence[str], attribute: str | None, generic: bool, leftover: bool
) -> str:
    """`generic`: "what is X?" about a known entity with nothing else asked; `leftover`: words
    besides the section names."""
    if why and (sections or attribute):
        return "MULTI_SECTION"
    if attribute is not None:
        return "ATTRIBUTE"
    if generic:
        return "GENERIC"
    if len(sections) >= 2 and not leftover:
        return "MULTI_SECTION"
    if sections:
        return "SECTION"
    return "GLOBAL"


def _candidate_sections(
    r: VerbatimRules, mode: str, sections: Sequence[str], attribute: str | None
) -> list[str]:
    """The sections named, an attribute's own sections first; a generic question's fixed three."""
    if mode == "GENERIC":
        return ["indications", "composition", "mechanism_of_action"]
    candidate = list(sections)
    if attribute is not None:
        a = r.attribute(attribute)
        if a is not None:
            candidate = [*a.sections, *(s for s in sections if s not in a.sections)]
    return candidate


def _search_phrases(
    r: VerbatimRules,
    rest: str,
    words: Sequence[str],
    attribute: str | None,
    *,
    why: bool,
    entity: str | None,
) -> list[str]:
    """The question's content words, then the attribute's phrases, lay expansions and why-terms."""
    phrases: list[str] = []
    core = " ".join(words)
    if core:
        phrases.append(core)
    if attribute is not None:
        a = r.attribute(attribute)
        if a is not None:
            phrases.extend(p for p in a.phrases if p not in phrases)
    phrases.extend(p for p in r.lay_expansions(rest) if p not in phrases)
    if why:
        phrases.extend(p for p in r.why_terms if p not in phrases)
    if not phrases and entity:
        phrases.append(entity)
    return phrases


def _section_word(word: str, rules: VerbatimRules) -> bool:
    """A word that only names a section ("contraindications", "side", "effects", "section")."""
    lw = word.lower()
    if lw in _SECTION_FILLER or any(lw in alias.split() for alias in rules.vocabulary.alias_table()):
        return True
    return any(
        p.fullmatch(lw) or p.match(lw)
        for pats in object.__getattribute__(rules, "_cues").values()
        for p in pats
    )


_SECTION_FILLER = frozenset(
    {"section", "information", "info", "label", "labeling", "summarize", "summary", "list", "effects"}
)
