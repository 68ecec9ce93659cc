"""A development probe of answerable questions that name a thing the way its documents do not
(docs/verbatim.md#refusal-abbreviations): each answerable question of a QA folder (`make qa19`)
rewritten automatically, keeping its answers and document, where

- a spelled-out name of two or more capitalised words ("Eclipse Public License", "Transport Layer
  Security"; lower-case "of", "for", "and", "the", "to", "in", "on" allowed between, dropped from
  the initials) becomes its initials ("EPL", "TLS");
- "version N" becomes "vN", joined to the name before it when that is an acronym ("GPL version 2"
  → "GPLv2"); a name's version "N.0" becomes "N" ("EPL-2.0" → "EPL-2").

Only the questions a rule changed are written, one folder per family, `documents` linked to the
family's, so that `evidence eval --qa OUT --store DIR` reads the same indexes (`qa-<family>`).

    .venv/bin/python bench/qa/abbrev_probe.py build/qa19 build/probe14
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path

CONNECTORS = {"of", "for", "and", "the", "to", "in", "on"}
QUESTION_WORDS = {
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "does",
    "do", "did", "can", "could", "should", "would", "will", "may", "must", "under", "if", "in",
    "for", "according", "per", "during", "after", "before", "at", "on", "by", "with", "a", "an",
    "the", "list", "name", "give", "describe", "explain", "i", "my", "we", "our", "has", "have", "max",
    "maximum", "min", "minimum",
}  # fmt: skip


def _capital(w: str) -> bool:
    return w[:1].isupper() and w.lower() not in QUESTION_WORDS and not w.isupper()


def initials(question: str) -> str:
    """Runs of >= 2 capitalised words (connectors between) replaced by their initials."""
    words = question.split(" ")
    out: list[str] = []
    i = 0
    while i < len(words):
        j, caps, last = i, [], i
        while j < len(words):
            core = words[j].strip(",.;:?!()\"'“”")
            if core and _capital(core) and core.isalpha() and core == words[j].rstrip(",.;:?!)\"'”"):
                caps.append(core)
                last = j
                if words[j] != words[j].rstrip(",.;:?!)\"'”"):
                    break  # punctuation ends the name
            elif core.lower() in CONNECTORS and caps and core == words[j]:
                pass
            else:
                break
            j += 1
        if len(caps) >= 2:
            tail = words[last][len(words[last].rstrip(",.;:?!)\"'”")) :]
            out.append("".join(c[0].upper() for c in caps) + tail)
            i = last + 1
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def versions(question: str) -> str:
    q = re.sub(r"\b([A-Z]{2,})\s+[Vv]ersion\s+(\d+)(?:\.0)?\b", r"\1v\2", question)
    q = re.sub(r"\b[Vv]ersion\s+(\d+(?:\.\d+)*)\b", r"v\1", q)
    # Only a name's version ("EPL 2.0", "MPL-2.0"): a number asked about stays as written.
    return re.sub(r"\b([A-Za-z]{2,}[ -])(\d+)\.0\b(?![.\d+-])", r"\1\2", q)


def write_probe(
    qa: Path,
    out: Path,
    rewriter: Callable[[Path], Callable[[str], str | None]],
    *,
    per_family: int | None = None,
) -> None:
    """For each family of `qa`, its answerable questions `rewriter(family)` changes (at most
    `per_family`, in file order), written to `out/<family>/questions.jsonl` with the original
    kept, `documents` linked to the family's. Shared with `synonym_probe.py`."""
    total = 0
    for qfile in sorted(qa.glob("*/questions.jsonl")):
        family = qfile.parent
        rewrite = rewriter(family)
        rows = []
        for line in qfile.read_text(encoding="utf-8").splitlines():
            if per_family is not None and len(rows) >= per_family:
                break
            if not line.strip():
                continue
            row = json.loads(line)
            if not row.get("answers"):
                continue
            new = rewrite(row["question"])
            if new is not None and new != row["question"]:
                rows.append({**row, "question": new, "original": row["question"]})
        if not rows:
            continue
        dest = out / family.name
        dest.mkdir(parents=True, exist_ok=True)
        link = dest / "documents"
        if not link.exists():
            link.symlink_to((family / "documents").resolve())
        (dest / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        total += len(rows)
        print(f"{family.name}: {len(rows)}")
    print(f"total: {total}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("qa", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    write_probe(args.qa, args.out, lambda _family: lambda q: versions(initials(q)))


if __name__ == "__main__":
    main()
