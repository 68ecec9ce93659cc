"""A development probe of answerable questions that say a thing in other words than their documents
(docs/verbatim.md#refusal-paraphrase): answerable questions of a QA folder (`make qa19`) with one
word replaced by a common English synonym, keeping their answers and documents. The companion of
`abbrev_probe.py` (abbreviations); this one asks whether the refusal signal's `absent_rare` reads
a paraphrase as something the documents do not talk about.

The rewrite, per question (no document named, no question picked by hand):

- the first word of the question (left to right) that `SYNONYMS` lists is replaced by the first of
  its synonyms that no document of the family uses (none of its analysed terms occurs in the
  family's parsed documents), case kept; a question with no such word is left out;
- at most `PER_FAMILY` rewritten questions per family (the first in file order), so that no family
  dominates the probe.

The synonym list is generic English (verbs, nouns and adjectives a user writes), written before
any measurement of the refusal change it probes, both ways where both are ordinary words.
Only the rewritten questions are written, one folder per family, `documents` linked to the
family's, so that `evidence eval --qa OUT --store DIR` reads the same indexes (`qa-<family>`).

    .venv/bin/python bench/qa/synonym_probe.py build/qa19 build/probe15
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.ingest.parsers import parse_bytes  # noqa: E402
from evidence.search.analysis import get_analyzer  # noqa: E402

PER_FAMILY = 2
SYNONYMS: dict[str, tuple[str, ...]] = {
    "allowed": ("permitted",), "permitted": ("allowed",), "allow": ("permit",), "permit": ("allow",),
    "buy": ("purchase",), "purchase": ("buy",), "cost": ("price",), "price": ("cost",),
    "fee": ("charge",), "fees": ("charges",), "begin": ("commence", "start"), "start": ("commence", "begin"),
    "stop": ("cease", "halt"), "end": ("conclude", "finish"), "use": ("utilize", "employ"),
    "get": ("obtain", "acquire"), "obtain": ("acquire", "get"), "give": ("provide", "grant"),
    "provide": ("supply", "furnish"), "show": ("display",), "display": ("show",),
    "need": ("require",), "required": ("mandatory", "obligatory"), "largest": ("biggest",),
    "big": ("large",), "large": ("big",), "small": ("little", "tiny"), "quickly": ("rapidly", "fast"),
    "often": ("frequently",), "frequently": ("often",), "doctor": ("physician",),
    "physician": ("doctor",), "medicine": ("medication", "drug"), "medication": ("medicine",),
    "illness": ("disease", "sickness"), "disease": ("illness", "sickness"), "children": ("kids",),
    "child": ("kid",), "harmful": ("dangerous",), "dangerous": ("hazardous", "harmful"),
    "risk": ("danger", "hazard"), "error": ("mistake", "fault"), "mistake": ("error",),
    "delete": ("erase", "remove"), "remove": ("delete", "eliminate"), "change": ("alter", "modify"),
    "modify": ("alter", "change"), "copy": ("duplicate", "replicate"), "send": ("transmit",),
    "company": ("firm", "business"), "customer": ("client",), "client": ("customer",),
    "contract": ("agreement",), "agreement": ("contract",), "law": ("legislation", "statute"),
    "rule": ("regulation",), "create": ("make", "generate"), "make": ("create", "produce"),
    "build": ("construct", "compile"), "run": ("execute",), "execute": ("run",),
    "warning": ("caution", "alert"), "pain": ("ache",), "yearly": ("annually",),
    "annual": ("yearly",), "terminate": ("end", "cancel"), "termination": ("cancellation", "ending"),
    "breach": ("violation",), "violate": ("breach", "infringe"), "software": ("program",),
    "program": ("software",), "happens": ("occurs",), "happen": ("occur",), "limit": ("cap", "ceiling"),
    "maximum": ("highest", "greatest"), "minimum": ("lowest", "smallest"), "fast": ("quick", "rapid"),
    "slow": ("sluggish",), "problem": ("issue", "trouble"), "problems": ("issues", "troubles"),
    "help": ("assist",), "check": ("verify",), "verify": ("check", "confirm"), "keep": ("retain",),
    "store": ("save", "keep"), "save": ("store",), "pay": ("remit",), "owe": ("pay",),
    "damage": ("harm",), "damages": ("compensation",), "sue": ("prosecute",), "court": ("tribunal",),
    "notify": ("inform", "tell"), "tell": ("inform",), "inform": ("notify", "tell"),
    "choose": ("select", "pick"), "select": ("choose", "pick"), "first": ("initial",),
    "last": ("final",), "final": ("last",), "wrong": ("incorrect",), "correct": ("right", "accurate"),
    "treat": ("manage",), "treatment": ("therapy",), "therapy": ("treatment",),
    "symptoms": ("signs",), "signs": ("symptoms",), "kidney": ("renal",), "liver": ("hepatic",),
    "pregnant": ("expecting",), "pregnancy": ("gestation",), "elderly": ("older", "aged"),
}  # fmt: skip
_WORD = re.compile(r"[A-Za-z]+")


def family_terms(documents: Path) -> set[str]:
    """The analysed terms of every document of a family (as the index's analyser reads them)."""
    out: set[str] = set()
    for p in sorted(documents.iterdir()):
        if p.is_file():
            try:
                doc = parse_bytes(p.read_bytes(), filename=p.name)
            except Exception as exc:  # a probe: a document it cannot read leaves its words out
                print(f"  {p.name}: not read ({exc})", file=sys.stderr)
                continue
            out.update(get_analyzer().analyze(doc.text))
    return out


def rewrite(question: str, used: set[str]) -> str | None:
    """`question` with its first listed word replaced by a synonym its documents never use."""
    for m in _WORD.finditer(question):
        word = m.group()
        for syn in SYNONYMS.get(word.lower(), ()):
            if set(get_analyzer().analyze(syn)) & used:
                continue
            new = syn.capitalize() if word[0].isupper() else syn
            return question[: m.start()] + new + question[m.end() :]
    return None


def main() -> None:
    from abbrev_probe import write_probe  # this script's folder is on sys.path when it runs

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("qa", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()

    def rewriter(family: Path) -> Callable[[str], str | None]:
        used = family_terms(family / "documents")
        return lambda q: rewrite(q, used)

    write_probe(args.qa, args.out, rewriter, per_family=PER_FAMILY)


if __name__ == "__main__":
    main()
