"""The development QA suite in bench/qa (issue 22, item 1) stays checkable.

`bench/qa/check.py` parses every document with the repository's parser and requires each answer
string to be in its document's parsed text, with ≥ 30 answerable and ≥ 5 unanswerable questions
per family. The suite test fails when a parser change drops or rewrites text an answer needs;
the other tests feed the checker small broken families, so a checker that passes everything fails.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.benchkit import load_bench

ROOT = Path(__file__).resolve().parents[2]
QA = ROOT / "bench" / "qa"
#: Documents of the RFC checks (bench/rfc-check): no blind set may reuse them either.
RFC_CHECK = ROOT / "bench" / "rfc-check"
#: The blind sets, never tuned on, each with the families it must hold (naming them makes a blind
#: folder that disappears, or is moved into the suite, fail rather than pass empty). The first blind
#: set (libffi, four licences) was retired into the suite once design choices had read it.
BLIND_SETS = {
    # two SPL drug labels, two RFCs, three PostgreSQL manual pages (bench/qa-blind/README.md)
    "qa-blind": {"drug-labels-spl", "standard-rfc-plain-text", "technical-manual-postgresql"},
    # a label PDF as FDA published it, RFC 6749 as paginated plain text, two GitHub agreements in
    # Markdown with numbered clauses
    "qa-blind3": {"drug-label-pdf", "standard-paginated-text", "terms-of-service"},
    # PEP 440 as reStructuredText (sections nested by underline level), the Eclipse Public License
    # 2.0 as plain text with numbered clauses
    "qa-blind4": {"standard-nested", "contract-plain-text"},
    # four chapters of NIST SP 800-63B as Markdown (numbered headings nested four deep), the Lua 5.4
    # reference manual as one HTML page
    "qa-blind5": {"standard-numbered-markdown", "api-reference-html"},
    # the Creative Commons BY 4.0 and BY-SA 4.0 legal code as plain text (numbered sections, clauses
    # nested four deep), the Expat XML parser's reference as one XHTML page
    "qa-blind6": {"licence-legalcode-text", "c-library-reference-html"},
    # not measured yet: an old-format SPL drug label, a US-government policy as nine Markdown pages
    # (sections nested four deep), two licences as plain text with numbered clauses
    "qa-blind7": {"drug-label-spl-old-format", "policy-numbered-markdown", "licence-numbered-clauses-text"},
    # a Boehringer Ingelheim label converted from its SPL to Markdown (script kept with it), the CDC
    # doxycycline PEP guideline (MMWR 2024) as Markdown
    "qa-blind8": {"drug-label-markdown", "clinical-guideline-markdown"},
    # two DailyMed label PDFs (a Dr. Reddy's prescription label in the old format, an OTC Drug Facts
    # label) as one family, five Varnish Cache manual pages in HTML, an FDA guidance (bioavailability
    # studies, 2022) as a PDF with nested numbered sections
    "qa-blind9": {
        "drug-labels-dailymed-pdf",
        "technical-manual-varnish-html",
        "scientific-guideline-fda-pdf",
    },
    # two generic-drug label PDFs (Taro warfarin, Evaric lisinopril) as one family, three licences as
    # plain text with numbered clauses (LPPL 1.3c, Vim, Info-ZIP), three Postfix README pages in HTML
    "qa-blind10": {
        "drug-labels-warfarin-lisinopril-pdf",
        "licences-lppl-vim-infozip-text",
        "technical-manual-postfix-html",
    },
    # two generic-drug label PDFs (USAntibiotics amoxicillin, Laurus metformin) as one family, three
    # OpenSSH protocol specifications as plain text with numbered sections, three Docutils pages in HTML
    "qa-blind11": {
        "drug-labels-amoxicillin-metformin-pdf",
        "specification-openssh-protocol-text",
        "technical-manual-docutils-html",
    },
}


def families_of(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "documents").is_dir()) if root.is_dir() else []


def documents_of(root: Path) -> list[Path]:
    return [p for p in root.glob("*/documents/*") if p.is_file()]


def digests_of(root: Path) -> set[str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in documents_of(root)}


check: Any = load_bench("qa/check.py", "qa_check")
FAMILIES = families_of(QA)
BLIND_FAMILIES = [
    # A label PDF takes seconds to parse (slow tier, like the suite's PDF family); SPL XML, HTML,
    # Markdown and plain text are cheap enough to run outside it.
    pytest.param(name, family, marks=pytest.mark.slow)
    if any((ROOT / "bench" / name).glob(f"{family}/documents/*.pdf"))
    else pytest.param(name, family)
    for name in BLIND_SETS
    for family in families_of(ROOT / "bench" / name)
]

MD = b"# Widget\n\n## Storage\n\nStore at 20 to 25 C.\n\n## Dose\n\nTake 2 tablets\ndaily.\n"


def _family(root: Path, lines: list[dict[str, Any]], *, name: str = "fam", sources: bool = True) -> Path:
    folder = root / name
    (folder / "documents").mkdir(parents=True)
    (folder / "documents" / "widget.md").write_bytes(MD)
    if sources:
        (folder / "SOURCES.md").write_text("written for this test\n", encoding="utf-8")
    (folder / "questions.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )
    return folder


def _q(
    question: str, answers: list[str], mode: str = "ATTRIBUTE", document: str | None = "widget.md"
) -> dict[str, Any]:
    return {"question": question, "answers": answers, "mode": mode, "document": document}


GOOD = [
    _q("how to store the widget?", ["Store at 20 to 25 C."], "SECTION"),
    _q("widget dose", ["Take 2 tablets daily."]),  # a line break in the document compares as a space
    _q("widget price?", [], "NO_RESULT", None),
]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_of_the_suite_passes_the_check(family: str) -> None:
    (report,) = check.check(QA, [family])
    assert report.problems == [], "\n".join(report.problems)
    assert report.answerable >= 30 and report.unanswerable >= 5
    assert report.documents >= 1


@pytest.mark.parametrize(("blind_set", "family"), BLIND_FAMILIES)
def test_every_blind_family_passes_the_check(blind_set: str, family: str) -> None:
    (report,) = check.check(ROOT / "bench" / blind_set, [family])
    assert report.problems == [], "\n".join(report.problems)
    assert report.answerable >= 30 and report.unanswerable >= 5
    assert report.documents >= 1


@pytest.mark.parametrize("blind_set", sorted(BLIND_SETS))
def test_a_blind_set_is_apart_from_every_other_set(blind_set: str) -> None:
    # The fits read bench/qa; a blind family or document anywhere else would be tuned on, or
    # measured twice.
    root = ROOT / "bench" / blind_set
    assert set(families_of(root)) == BLIND_SETS[blind_set]
    others = [p for p in (ROOT / "bench").glob("qa*") if p.is_dir() and p != root] + [RFC_CHECK]
    assert not set(families_of(root)) & set().union(*(families_of(other) for other in others))

    # By content, not only by name: a document renamed into another set is still the same document.
    names = {p.name for p in documents_of(root)}
    assert names, f"{blind_set} has no documents"
    assert not names & {p.name for other in others for p in documents_of(other)}
    assert not digests_of(root) & set().union(*(digests_of(other) for other in others))


def test_the_suite_has_families() -> None:
    assert {"drug-labels", "clinical-guideline", "technical-manual-libffi", "licence-plain-text"} <= set(
        FAMILIES
    )


def test_a_clean_family_passes(tmp_path: Path) -> None:
    _family(tmp_path, GOOD)
    (report,) = check.check(tmp_path, min_answerable=2, min_unanswerable=1)
    assert report.problems == []
    assert (report.answerable, report.unanswerable, report.answers) == (2, 1, 2)
    assert report.by_mode == {"ATTRIBUTE": 1, "SECTION": 1, "NO_RESULT": 1}


def test_an_answer_missing_from_the_parsed_document_is_reported(tmp_path: Path) -> None:
    _family(tmp_path, [*GOOD, _q("widget expiry", ["Discard after 30 days."])])
    (report,) = check.check(tmp_path, min_answerable=2, min_unanswerable=1)
    assert report.problems == [
        "questions.jsonl:4: answer not in widget.md as parsed: 'Discard after 30 days.'"
    ]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (_q("widget colour?", ["blue"], "NO_RESULT", None), 'a NO_RESULT line has "answers": []'),
        (_q("widget size?", [], "ATTRIBUTE"), "needs at least one answer"),
        (_q("widget maker?", ["Store at 20 to 25 C."], "ATTRIBUTE", "gadget.md"), "'document' 'gadget.md'"),
        (_q("widget shape?", ["Store at 20 to 25 C."], "FACT"), "'mode' must be one of"),
        (_q("How to store the widget?", ["Store at 20 to 25 C."], "SECTION"), "duplicate question"),
    ],
)
def test_malformed_lines_are_reported(tmp_path: Path, line: dict[str, Any], needle: str) -> None:
    _family(tmp_path, [*GOOD, line])
    (report,) = check.check(tmp_path, min_answerable=1, min_unanswerable=1)
    assert len(report.problems) == 1 and needle in report.problems[0], report.problems


def test_too_few_questions_missing_sources_and_unparseable_documents_are_reported(tmp_path: Path) -> None:
    folder = _family(tmp_path, GOOD, sources=False)
    (folder / "documents" / "label.xml").write_bytes(b"<?xml version='1.0'?><catalog><item/></catalog>")
    (report,) = check.check(tmp_path)
    text = "\n".join(report.problems)
    assert "SOURCES.md is missing" in text
    assert "documents/label.xml: the parser refuses it" in text
    assert "2 answerable questions; at least 30 are needed" in text
    assert "1 unanswerable (NO_RESULT) questions; at least 5 are needed" in text


def test_main_exits_nonzero_on_a_problem_and_zero_when_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _family(tmp_path, GOOD)
    assert check.main([str(tmp_path), "--min-answerable", "2", "--min-unanswerable", "1"]) == 0
    assert check.main([str(tmp_path), "--json"]) == 1
    out = capsys.readouterr().out
    assert '"family": "fam"' in out and "at least 30 are needed" in out
