"""`evidence demo`: index a bundled vendor sample and run a request through every profile.

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

from evidence.cli import print_response
from evidence.model import RetrieveRequest

DATA = Path(__file__).parent / "data"
INDEX = "demo"
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


def run_demo(service: Any) -> int:
    from evidence.rank.profiles import profile_names

    vendor = DATA / "vendor"
    steps = [
        ([vendor / "security-policy.md", vendor / "privacy.html"], "tc_files"),
        ([vendor / "soc2-summary.txt"], "soc2_summary:overview"),
        ([DATA / "followups" / "data-retention-policy.md"], "followup_document"),
        ([DATA / "followups" / "followup-responses.jsonl"], None),
    ]
    print(f"== indexing the sample into index {INDEX!r} (store: {service.settings.store_dir})")
    for paths, doc_type in steps:
        report = service.index_paths(INDEX, paths, doc_type=doc_type)
        for source, reason in report.failed:
            print(f"error: {source}: {reason}")
            return 1
        for r in report.indexed:
            label = doc_type or "follow-up responses"
            print(f"   {r.document_id:<45} {label:<24} {r.status:<9} {r.chunks} passages, {r.spans} spans")
    for name in profile_names():
        if name == "coach":
            continue  # shown on its knowledge graph, below
        fields = SAMPLES.get(name, GENERIC)
        request = RetrieveRequest(profile=name, **fields)
        print(f"\n== profile {name!r}: {request.query}")
        response = service.retrieve(INDEX, request)
        print_response(response, "text")
        if response.evidence_xml:
            print(f"\n-- evidence XML for the LLM (valid indexes {response.valid_indexes}):")
            print(response.evidence_xml)
    return _label_demo(service)


def _label_demo(service: Any) -> int:
    label = DATA / "label" / "lipravex.md"
    print(f"\n== verbatim answers from a drug label: indexing {label.name} into index {LABEL_INDEX!r}")
    report = service.index_paths(LABEL_INDEX, [label])
    for source, reason in report.failed:
        print(f"error: {source}: {reason}")
        return 1
    for question in LABEL_QUESTIONS:
        response = service.retrieve(LABEL_INDEX, RetrieveRequest(query=question, profile="verbatim"))
        plan = response.plan
        print(f"\n== verbatim: {question}")
        print(
            f"   plan: {plan.query_mode}, entity {plan.entity}, attribute {plan.attribute}, "
            f"sections {plan.candidate_sections}; path {response.telemetry.path_used}"
        )
        print(response.evidence_xml)
    return _coach_demo(service)


def _coach_demo(service: Any) -> int:
    from evidence.coach.contract import CoachRequest
    from evidence.coach_cli import print_coach

    print(f"\n== coach: indexing the knowledge graph {COACH_GRAPH.name} into index {COACH_INDEX!r}")
    report = service.index_graph_paths(COACH_INDEX, [COACH_GRAPH])
    for source, reason in report.failed:
        print(f"error: {source}: {reason}")
        return 1
    for r in report.indexed:
        print(f"   {r.document_id}: {r.status}, {r.chunks} nodes, {r.spans} sentences")
    request = RetrieveRequest(profile="coach", **SAMPLES["coach"])
    print(f"\n== profile 'coach' (retrieve over graph nodes): {request.query}")
    print_response(service.retrieve(COACH_INDEX, request), "text")
    for fields in COACH_REQUESTS:
        coach_request = CoachRequest.model_validate(fields)
        context = (
            f"  [conversation: {coach_request.conversation_snippet}]"
            if coach_request.conversation_snippet
            else ""
        )
        print(f"\n== coach: {coach_request.query}{context}")
        print_coach(service.coach(COACH_INDEX, coach_request))
    return 0
