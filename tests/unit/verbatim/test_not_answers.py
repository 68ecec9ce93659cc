"""Spans that are never an answer on their own: a table of contents' entries and, unless asked
for, a bibliography's. Both share the question's words and state nothing; in a 600-character
budget they take the room of the spans that answer."""

from __future__ import annotations

import pytest

from evidence.config import Settings
from evidence.plan.verbatim import plan_question
from evidence.records import Chunk
from evidence.service import EvidenceService
from evidence.verbatim.cascade import HYBRID_FACTSPAN, NO_RESULT, VerbatimCascade
from evidence.verbatim.spans import heading_echoes
from tests.unit.verbatim.verbatimkit import doc_span

HANDBOOK = """# Widget Handbook

- 1. Installing the widget filter
- 2. Replacing the widget filter

## 1. Installing the widget filter

Install the widget filter on a level floor, away from heat.

## 2. Replacing the widget filter

The widget filter must be replaced every 6 months, or sooner in dusty rooms.

## References

- Smith AB, Jones CD. Replacing a widget filter: how often? J Widgets 2020;3:1-9.
- Brown EF. The widget filter in dusty rooms. Widget Rev 2019;7:22-30.
"""

INDEX = "handbook"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    root = tmp_path_factory.mktemp("handbook")
    (root / "handbook.md").write_text(HANDBOOK)
    svc = EvidenceService(Settings(store_dir=root / "store"))
    assert not svc.index_paths(INDEX, [root / "handbook.md"], embed=False).failed
    return svc


def ask(service: EvidenceService, question: str) -> tuple[str, list[Chunk]]:
    res = VerbatimCascade().run(service.backend, INDEX, question, plan_question(question, known_entities=[]))
    return res.path_used, [h.chunk for h in res.hits]


def test_a_span_repeating_a_heading_of_its_document_is_a_heading_echo() -> None:
    spans = [
        doc_span("* 3.4. The description of a package", "Debian Policy Manual"),
        doc_span("3.4. The description of a package", "Contents"),
        doc_span("Scope ........ 4", "Contents"),
        doc_span("Every package must have a description.", "3.4. The description of a package"),
        doc_span("Scope", "Scope"),
        doc_span("The description of a package", "Other document's heading", doc="e"),
        doc_span("3.4. The description of a package", "Elsewhere", doc="e"),
    ]
    # Bullet marks, case, spacing and a page reference aside; only a heading of the same document.
    assert heading_echoes(spans) == {0, 1, 2, 4}


def test_the_span_scorer_skips_contents_entries_and_the_bibliography(service: EvidenceService) -> None:
    path, hits = ask(service, "How often must the widget filter be replaced?")
    assert path == HYBRID_FACTSPAN
    assert hits[0].text.startswith("The widget filter must be replaced every 6 months")
    assert all(c.section != "References" for c in hits)
    assert all(not c.text.startswith("- ") for c in hits)  # no contents entry, no citation


def test_a_question_asking_for_the_references_gets_them(service: EvidenceService) -> None:
    path, hits = ask(service, "Which references does the handbook list?")
    assert path != NO_RESULT
    assert any(c.text.startswith("- Smith AB") for c in hits)
