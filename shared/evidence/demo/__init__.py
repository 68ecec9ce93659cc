"""`evidence demo`: index a bundled vendor sample and run a request through every profile.

The sample: three vendor documents (Markdown, text, HTML), follow-up questionnaire responses
for one criterion in rounds 1-4 (plus one for another criterion), and a document uploaded in
a follow-up round (`type: followup_document`).
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
    "coach": {"query": "Explain how production access is controlled"},
}
GENERIC = {"query": "How long is customer data retained after the contract ends?"}


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
        fields = SAMPLES.get(name, GENERIC)
        request = RetrieveRequest(profile=name, **fields)
        print(f"\n== profile {name!r}: {request.query}")
        response = service.retrieve(INDEX, request)
        print_response(response, "text")
        if response.evidence_xml:
            print(f"\n-- evidence XML for the LLM (valid indexes {response.valid_indexes}):")
            print(response.evidence_xml)
    return 0
