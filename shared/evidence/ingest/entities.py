"""A document's subject names (an entity, e.g. a drug): from its title or the names it is given.

Shared by ingestion (which records them on every chunk) and the verbatim planner (which
recognises them in questions), so it sits below both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Salt and form words that follow a generic name ("ferlostatin calcium", "metformin hydrochloride").
SALT_WORDS = frozenset(
    """calcium sodium potassium magnesium hydrochloride hcl hydrobromide maleate mesylate besylate tartrate
    succinate citrate sulfate sulphate phosphate acetate bromide fumarate lactate nitrate monohydrate
    dihydrate trihydrate anhydrous""".split()
)
#: A strength after a product name: "Quenzaril 25 mg film-coated tablets", "X 100 units/mL".
#: It starts only at the first space of a run and never gives back what it matched (possessive
#: quantifiers), so a title of 60,000 spaces is one pass, not one scan from every space.
_STRENGTH = re.compile(
    r"(?<!\s)\s++\d[\d.,]*+\s*+(?:mg|mcg|µg|g|ml|l|%|units?|iu|mmol)\b(?:\s*+/\s*+\w++)?(?=\s|$|,)",
    re.IGNORECASE,
)
_FORM_WORDS = re.compile(
    r"\b(?:tablets?|capsules?|injection|injectable|solution|suspension|cream|ointment|film[- ]coated|"
    r"delayed[- ]release|extended[- ]release|oral|for oral use|for injection|powder|syrup|drops|patch)\b.*$",
    re.IGNORECASE,
)


def subject_names(title: str) -> list[str]:
    """Entity names from a document title: "LIPRAVEX (ferlostatin calcium) tablets, for oral use" →
    ["LIPRAVEX", "ferlostatin calcium", "ferlostatin"]; a plain title → itself without form words."""
    t = re.sub(r"[*_`#]+", "", title).strip()
    t = _STRENGTH.sub("", t).strip()
    out: list[str] = []
    named = _name_and_generic(t)
    if named:
        out.extend(named)
    else:
        head = _FORM_WORDS.sub("", t).strip(" ,;:-")
        if head:
            out.append(head)
    return entity_aliases(out)


def _name_and_generic(title: str) -> list[str] | None:
    """ "NAME (generic name)" → [NAME, generic name]: the text before the first "(" and inside it.

    Found with `str.find`, not a lazy regex, which would rescan a run of spaces from each of them."""
    i = title.find("(")
    j = title.find(")", i + 1)
    if i <= 0 or j <= i + 1 or "(" in title[i + 1 : j] or not title[:i].strip():
        return None
    return [title[:i].strip().strip(" ,;:-"), title[i + 1 : j].strip()]


def entity_aliases(names: Iterable[str]) -> list[str]:
    """The names plus each generic name without its salt word, de-duplicated case-insensitively."""
    seen: dict[str, str] = {}
    for raw in names:
        n = " ".join(raw.split())
        if not n or len(n) > 120:
            continue
        seen.setdefault(n.lower(), n)
        words = n.split()
        if len(words) > 1 and words[-1].lower() in SALT_WORDS:
            base = " ".join(words[:-1])
            seen.setdefault(base.lower(), base)
    return list(seen.values())
