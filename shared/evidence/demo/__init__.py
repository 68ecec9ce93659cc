"""The samples `evidence demo` indexes and the requests it runs (data only: `evidence.cli.demo` runs them).

The sample: three vendor documents (Markdown, text, HTML), follow-up questionnaire responses
for one criterion in rounds 1-4 (plus one for another criterion), and a document uploaded in
a follow-up round (`type: followup_document`). Then the verbatim profile on a drug label written
for this project (`data/label/lipravex.md`, with 80 questions in `lipravex-qa.jsonl`), and the
coach profile on a knowledge graph written for this project (`data/coach/algebra-calculus.yaml`:
56 learning objectives, 126 content items; 92 labelled questions in `queries.jsonl`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
INDEX = "demo"
_VENDOR = DATA / "vendor"
#: The follow-up responses: one document per record, its `id` the document's.
FOLLOWUPS = DATA / "followups" / "followup-responses.jsonl"
#: What is indexed into INDEX, in order: (files, the `type` every one of them gets).
VENDOR_STEPS: tuple[tuple[tuple[Path, ...], str | None], ...] = (
    ((_VENDOR / "security-policy.md", _VENDOR / "privacy.html"), "tc_files"),
    ((_VENDOR / "soc2-summary.txt",), "soc2_summary:overview"),
    ((DATA / "followups" / "data-retention-policy.md",), "followup_document"),
    ((FOLLOWUPS,), None),
)
CRITERION = "Does the vendor encrypt customer data at rest?"

#: One sample request per profile; profiles registered later fall back to the generic one.
SAMPLES: dict[str, dict[str, Any]] = {
    "default": {"query": "How quickly are customers notified after a data breach?"},
    "vrm": {"query": CRITERION, "criterion_question": CRITERION},
    "verbatim": {"query": "What is the recovery time objective?"},
    "coach": {"query": "How do I solve a quadratic equation by factoring?"},
}
GENERIC = {"query": "How long is customer data retained after the contract ends?"}
LABEL_INDEX = "label"
LABEL = DATA / "label" / "lipravex.md"
#: One question per kind of cascade path: section, attribute (a synonym), several sections, none.
LABEL_QUESTIONS = (
    "What are the contraindications for Lipravex?",
    "What is the t½ of ferlostatin?",
    "Why is the Lipravex dose reduced in patients with severe renal impairment?",
    "How much does a month of Lipravex cost?",
)
COACH_INDEX = "tutor"
COACH_GRAPH = DATA / "coach" / "algebra-calculus.yaml"
#: Seed 004's playbooks: direct tutoring, a follow-up, an ambiguous question, out of scope.
COACH_REQUESTS: tuple[dict[str, Any], ...] = (
    {"query": "explain chain rule"},
    {
        "query": "can you explain that last step again?",
        "conversation_snippet": (
            "Coach: In EX-342 we moved the constant, added 9 to both sides and took square roots."
        ),
    },
    {"query": "do derivatives use limits?", "seek_clarification": True},
    {"query": "How do I bake sourdough bread?"},
)
