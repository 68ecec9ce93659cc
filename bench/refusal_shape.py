"""Candidate refusal readings of the rankings' shape and of where concepts meet (session 45, ref17).

Usage: python bench/refusal_shape.py rows.json [--json]

Reads rows recorded by `bench/refusal_rows.py` (with the agreement's two passage rankings,
`judged.rankings`) and, per candidate, prints its AUC (answerable vs unanswerable questions,
each profile's rows), per family and pooled, and its Pearson correlation with the shipped
features (`refusal_fit.features`). The candidates (bench/data/session45/ref17.md):

- `dense_margin`: in the dense passage ranking within the evidence's documents, the first
  passage's cosine minus the mean of passages 2-10;
- `lexical_margin`: the same for the BM25 ranking, relative to the first score;
- `pair_sentence`: the question's two subject concepts the index uses least meet in one
  sentence of one evidence text (1 with fewer than two);
- `wh_shape`: the first evidence text holds something of the shape the question's wh-form asks
  for (1 when it asks none).

`candidates(row)` is what `refusal_fit.py` reads for these names.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from evidence.verbatim.answer_types import answer_types  # noqa: E402
from evidence.verbatim.grounding import (  # noqa: E402
    _WORD,
    concept_weights,
    index_rarity,
    unique_concepts,
)

SHIPPED = ("grounding", "cosine", "typed_key", "agreement", "typed_rarest")
CANDIDATES = ("dense_margin", "lexical_margin", "pair_sentence", "wh_shape", "pair_index")
#: `pair_index` per family and "question|profile" (`bench/refusal_pairs.py`; `--pairs`).
PAIRS: dict[str, dict[str, float]] = {}
#: How many passages after the first the margins read.
MARGIN_DEPTH = 10

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def margin(scores: Sequence[float], relative: bool) -> float | None:
    """The first score minus the mean of the next `MARGIN_DEPTH - 1` (relative: over the first)."""
    if len(scores) < 2:
        return None
    rest = float(np.mean(scores[1:MARGIN_DEPTH]))
    d = float(scores[0]) - rest
    if relative:
        return d / float(scores[0]) if scores[0] else 0.0
    return d


def subject_pair(question: str, groups: Sequence[Sequence[str]], df: Any) -> list[tuple[str, ...]]:
    """The question's two subject concepts the index uses least (ties: the rarer in English)."""
    from evidence.verbatim.scoring import terms

    concepts = unique_concepts(groups)
    weights = concept_weights(question, groups)
    types = answer_types().expected(question)
    asking = {
        t for w in _WORD.findall(question) if any(a.asked_by(w, hints=False) for a in types) for t in terms(w)
    }
    subject = [c for c in concepts if not asking & set(c)]
    subject.sort(
        key=lambda c: (
            -(index_rarity(c, df) if df is not None else 0.0),
            -max(weights.get(t, 1.0) for t in c),
        )
    )
    return subject[:2]


def pair_sentence(question: str, groups: Any, texts: Sequence[str], given: Sequence[str], df: Any) -> float:
    from evidence.verbatim.scoring import grounding

    pair = subject_pair(question, groups, df)
    if len(pair) < 2:
        return 1.0
    for t in texts:
        for s in _SENTENCE.split(t):
            if not s.strip():
                continue
            if all(grounding([c], [s, *given])[0] > 0 for c in pair):
                return 1.0
    return 0.0


_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b", re.I)
_WH = (
    ("how_many", re.compile(r"\bhow\s+(?:many|much)\b", re.I)),
    ("when", re.compile(r"\b(?:when|what\s+(?:year|date))\b", re.I)),
    ("who", re.compile(r"\b(?:who|whom|whose)\b", re.I)),
    ("where", re.compile(r"\bwhere\b", re.I)),
    ("which", re.compile(r"\bwhich\b", re.I)),
)
_CAPITAL = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w-]+")
_QUOTED = re.compile(r"[\"“'`][^\"”'`]{2,40}[\"”'`]")


def wh_form(question: str) -> str | None:
    """The question's first wh-form among `_WH` (by position), None without one."""
    found = [(m.start(), name) for name, rx in _WH if (m := rx.search(question))]
    return min(found)[1] if found else None


def wh_shape(question: str, body: str) -> float:
    form = wh_form(question)
    if form is None:
        return 1.0
    qwords = {w.lower() for w in _WORD.findall(question)}
    capitals = [w for w in _CAPITAL.findall(body) if w.lower() not in qwords]
    if form == "how_many":
        ok = bool(_NUMBER.search(body))
    elif form == "when":
        ok = bool(re.search(r"\d", body) or re.search(rf"\b{_MONTH}\b", body, re.I))
    elif form in ("who", "where"):
        ok = bool(capitals)
    else:
        ok = bool(capitals or _QUOTED.search(body) or re.search(r"\d", body))
    return 1.0 if ok else 0.0


def candidates(row: dict[str, Any]) -> dict[str, float | None]:
    """The four candidates of `row` (None: not read, no ranking or no evidence)."""
    j = row.get("judged")
    if not j or not j.get("texts"):
        return dict.fromkeys(CANDIDATES)
    rk = j.get("rankings") or {}
    dense = [r[3] for r in rk.get("dense") or []]
    lexical = [r[3] for r in rk.get("lexical") or []]
    groups = [tuple(g) for g in j["groups"]]
    bodies = j.get("bodies") or j["texts"]
    return {
        "dense_margin": margin(dense, relative=False),
        "lexical_margin": margin(lexical, relative=True),
        "pair_sentence": pair_sentence(
            row["question"], groups, j["texts"], j.get("given") or [], j.get("df")
        ),
        "wh_shape": wh_shape(row["question"], bodies[0]),
        "pair_index": PAIRS.get(row["family"], {}).get(f"{row['question']}|{row['profile']}"),
    }


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    if not pos or not neg:
        return None
    p, n = np.asarray(pos, float), np.asarray(neg, float)
    gt = (p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()
    return float(gt / (len(p) * len(n)))


def main() -> int:
    from refusal_fit import features

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pairs", type=Path, default=None, help="`pair_index` (bench/refusal_pairs.py)")
    args = ap.parse_args()
    rows = json.loads(args.rows.read_text())
    if args.pairs is not None:
        PAIRS.update(json.loads(args.pairs.read_text()))
    out: dict[str, Any] = {}
    for prof in ("verbatim", "default"):
        rs = [r for r in rows if r["profile"] == prof]
        cand = [candidates(r) for r in rs]
        shipped = [features(r) for r in rs]
        res: dict[str, Any] = {}
        for c in (*CANDIDATES, *SHIPPED):
            vals = [
                (r["family"], r["answerable"], (cd.get(c) if c in CANDIDATES else sh.get(c)))
                for r, cd, sh in zip(rs, cand, shipped, strict=True)
            ]
            vals = [v for v in vals if v[2] is not None]
            pooled = auc([v for _, a, v in vals if a], [v for _, a, v in vals if not a])
            fams = {}
            for f in sorted({v[0] for v in vals}):
                fams[f] = auc(
                    [v for g, a, v in vals if g == f and a], [v for g, a, v in vals if g == f and not a]
                )
            corr = {}
            if c in CANDIDATES:
                both = [(cd[c], sh) for cd, sh in zip(cand, shipped, strict=True) if cd[c] is not None and sh]
                x = np.array([b[0] for b in both], float)
                for s in SHIPPED:
                    y = np.array([b[1].get(s, 0.0) for b in both], float)
                    corr[s] = round(float(np.corrcoef(x, y)[0, 1]), 3) if x.std() and y.std() else None
            res[c] = {
                "pooled": None if pooled is None else round(pooled, 3),
                "n": len(vals),
                "families": {f: None if v is None else round(v, 2) for f, v in fams.items()},
                "corr": corr,
            }
        out[prof] = res
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for prof, res in out.items():
        print(f"== {prof}")
        for c, r in res.items():
            print(f"{c:<15} AUC {r['pooled']} (n {r['n']}) corr {r['corr']}")
        fams = sorted(next(iter(res.values()))["families"])
        print("family".ljust(28) + " ".join(f"{c[:12]:>12}" for c in res))
        for f in fams:
            print(f[:27].ljust(28) + " ".join(f"{res[c]['families'].get(f)!s:>12}" for c in res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
