"""Check the development QA suite: every answer is in its document as the indexer parses it.

Usage: python bench/qa/check.py [ROOT] [--family NAME ...] [--json]
                                [--min-answerable N] [--min-unanswerable N]

ROOT (default: this folder) holds one folder per family: `documents/` (the files, in their real
formats), `questions.jsonl` and `SOURCES.md`. Each question line is
`{"question": str, "answers": [str, ...], "mode": "ATTRIBUTE"|"SECTION"|"NO_RESULT",
"document": "<file name under documents/>" | null}`; a `NO_RESULT` line has `"answers": []` and
`"document": null`, every other line names the document that holds its answers.

Each document is parsed with the repository's own parser (`evidence.ingest.parse_bytes`, what
`evidence index` stores), and each answer must occur in that text. Runs of whitespace compare
as one space, as `evidence eval --qa` compares an answer with the evidence (a PDF line break
inside a sentence is a space there too). A family needs at least `--min-answerable` answerable
and `--min-unanswerable` unanswerable questions. Exit status 1 lists every problem found.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.errors import DocumentParseError  # noqa: E402
from evidence.ingest import parse_bytes  # noqa: E402

MODES = frozenset({"ATTRIBUTE", "SECTION", "NO_RESULT"})
MIN_ANSWERABLE = 30
MIN_UNANSWERABLE = 5
_WS = re.compile(r"\s+")


def squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


@dataclass
class FamilyReport:
    name: str
    documents: int = 0
    answerable: int = 0
    unanswerable: int = 0
    answers: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    by_document: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.name,
            "documents": self.documents,
            "answerable": self.answerable,
            "unanswerable": self.unanswerable,
            "answers": self.answers,
            "by_mode": dict(sorted(self.by_mode.items())),
            "by_document": dict(sorted(self.by_document.items())),
            "problems": self.problems,
        }


def parsed_texts(documents: Path, report: FamilyReport) -> dict[str, str]:
    """File name → squashed parsed text; a file the parser refuses is a problem, not a crash."""
    texts: dict[str, str] = {}
    for path in sorted(p for p in documents.iterdir() if p.is_file()):
        try:
            doc = parse_bytes(path.read_bytes(), filename=path.name)
        except DocumentParseError as exc:
            report.problems.append(f"documents/{path.name}: the parser refuses it ({exc})")
            continue
        texts[path.name] = squash(doc.text)
    return texts


def check_line(n: int, rec: Any, texts: dict[str, str], report: FamilyReport, seen: set[str]) -> None:
    where = f"questions.jsonl:{n}"
    if not isinstance(rec, dict):
        report.problems.append(f"{where}: not a JSON object")
        return
    question, answers, mode = rec.get("question"), rec.get("answers"), rec.get("mode")
    document = rec.get("document")
    if not isinstance(question, str) or not question.strip():
        report.problems.append(f"{where}: 'question' must be a non-empty string")
        return
    key = squash(question).lower()
    if key in seen:
        report.problems.append(f"{where}: duplicate question {question!r}")
    seen.add(key)
    if mode not in MODES:
        report.problems.append(f"{where}: 'mode' must be one of {sorted(MODES)}, not {mode!r}")
        return
    report.by_mode[mode] = report.by_mode.get(mode, 0) + 1
    if not isinstance(answers, list) or not all(isinstance(a, str) and a.strip() for a in answers):
        report.problems.append(f"{where}: 'answers' must be a list of non-empty strings")
        return
    if mode == "NO_RESULT":
        report.unanswerable += 1
        if answers or document is not None:
            report.problems.append(f'{where}: a NO_RESULT line has "answers": [] and "document": null')
        return
    report.answerable += 1
    if not answers:
        report.problems.append(f"{where}: an {mode} line needs at least one answer (or mode NO_RESULT)")
        return
    if not isinstance(document, str) or document not in texts:
        report.problems.append(f"{where}: 'document' {document!r} is not a parsed file under documents/")
        return
    report.by_document[document] = report.by_document.get(document, 0) + 1
    text = texts[document]
    for answer in answers:
        report.answers += 1
        if squash(answer) not in text:
            report.problems.append(f"{where}: answer not in {document} as parsed: {answer!r}")


def check_family(folder: Path, min_answerable: int, min_unanswerable: int) -> FamilyReport:
    report = FamilyReport(folder.name)
    documents, questions = folder / "documents", folder / "questions.jsonl"
    if not (folder / "SOURCES.md").is_file():
        report.problems.append("SOURCES.md is missing (where each document comes from and its licence)")
    if not documents.is_dir():
        report.problems.append("documents/ is missing")
        return report
    texts = parsed_texts(documents, report)
    report.documents = len(texts)
    if not questions.is_file():
        report.problems.append("questions.jsonl is missing")
        return report
    seen: set[str] = set()
    with questions.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                report.problems.append(f"questions.jsonl:{n}: not JSON ({exc.msg})")
                continue
            check_line(n, rec, texts, report, seen)
    if report.answerable < min_answerable:
        report.problems.append(
            f"{report.answerable} answerable questions; at least {min_answerable} are needed"
        )
    if report.unanswerable < min_unanswerable:
        report.problems.append(
            f"{report.unanswerable} unanswerable (NO_RESULT) questions; "
            f"at least {min_unanswerable} are needed"
        )
    unused = sorted(set(texts) - set(report.by_document))
    if unused:
        report.problems.append(f"no answerable question uses {', '.join(unused)}")
    return report


def families(root: Path, names: Sequence[str] = ()) -> list[Path]:
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / "documents").is_dir())
    if names:
        wanted = set(names)
        missing = wanted - {p.name for p in found}
        if missing:
            raise SystemExit(f"no family {', '.join(sorted(missing))} under {root}")
        found = [p for p in found if p.name in wanted]
    return found


def check(
    root: Path = HERE,
    names: Sequence[str] = (),
    min_answerable: int = MIN_ANSWERABLE,
    min_unanswerable: int = MIN_UNANSWERABLE,
) -> list[FamilyReport]:
    return [check_family(f, min_answerable, min_unanswerable) for f in families(root, names)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("root", nargs="?", type=Path, default=HERE)
    ap.add_argument("--family", action="append", default=[], help="check only this family (repeatable)")
    ap.add_argument("--min-answerable", type=int, default=MIN_ANSWERABLE)
    ap.add_argument("--min-unanswerable", type=int, default=MIN_UNANSWERABLE)
    ap.add_argument("--json", action="store_true", help="print the reports as JSON")
    args = ap.parse_args(argv)
    reports = check(args.root, args.family, args.min_answerable, args.min_unanswerable)
    if not reports:
        print(f"no families (folders with documents/) under {args.root}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2, ensure_ascii=False))
    else:
        for r in reports:
            status = "ok" if not r.problems else f"{len(r.problems)} problem(s)"
            print(
                f"{r.name}: {r.documents} documents, {r.answerable} answerable, "
                f"{r.unanswerable} unanswerable, {r.answers} answer strings — {status}"
            )
            for p in r.problems:
                print(f"  {p}")
    return 1 if any(r.problems for r in reports) else 0


if __name__ == "__main__":
    raise SystemExit(main())
