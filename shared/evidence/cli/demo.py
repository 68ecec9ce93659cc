"""`evidence demo`: index the bundled samples and run a request through every profile.

The samples and their requests live in `evidence.demo` (data only); this module prints them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from evidence.cli import common
from evidence.cli.common import EXIT_FAILED, EXIT_OK, Command
from evidence.cli.output import print_coach, print_response

if TYPE_CHECKING:
    from evidence.service import EvidenceService


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`--store` only (the common option)."""


def run(args: argparse.Namespace) -> int:
    service = common.service_from_args(args)
    try:
        code = run_demo(service)
    finally:
        service.close()
    if code == EXIT_OK:
        print_workbench(service.settings.store_dir)
    return code


def print_workbench(store: object) -> None:
    """Where to see the same evidence in the workbench (docs/workbench.md)."""
    from evidence.demo import CRITERION, INDEX

    print(f"\n== workbench: {WORKBENCH_URL}")
    print(f"   serve this store first: make workbench  (or: evidence serve --store {store})")
    print(f"   then Ask, index {INDEX!r}, profile 'vrm', question and criterion: {CRITERION}")


#: `evidence serve`'s default address: what `make workbench` listens on.
WORKBENCH_URL = "http://127.0.0.1:8080/"


def _stopped_by(failed: Sequence[tuple[str, str]]) -> bool:
    """The demo stops at a sample that did not index: the first (source, reason) is printed."""
    for source, reason in failed[:1]:
        print(f"error: {source}: {reason}")
    return bool(failed)


def own_index(service: EvidenceService, index: str) -> None:
    """The demo's own `index` made writable under the running indexing settings: when it records
    other ones (`search.written`: another header rule, window, ...) and holds nothing but the
    demo's samples, it is deleted (its cached vectors with it) and stderr says why, so the demo
    indexes it again under this run's settings, as `evidence eval` does for its own indexes
    (docs/ingest.md#indexing-settings-of-an-index). An index holding a document the demo did not
    write (not one of `sample_documents`: an upload in the workbench) is kept: the store then refuses
    the write and the demo exits 2 with its message."""
    from evidence.errors import EvidenceError, IndexNotFoundError
    from evidence.search.written import other_than

    try:
        info = service.backend.get_index(index)
    except IndexNotFoundError:
        return
    differs = other_than(info, service.settings)
    if differs is None:
        return
    setting, recorded, running = differs
    said = f"index {index!r} was written with {setting}={recorded!r}, but this run has {setting}={running!r}"
    ours = sample_documents()
    try:
        foreign = [d.document_id for d in service.list_documents(index) if not ours(d.document_id)]
    except EvidenceError:  # a backend that cannot list documents: nothing is deleted unseen
        foreign = ["(documents not listed)"]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        _say(f"{said}, and it holds documents the demo did not write ({foreign[0]}{more}): keeping it")
        return
    _say(f"{said}: deleting the demo's index and indexing its samples again")
    service.delete_index(index)


def sample_documents() -> Callable[[str], bool]:
    """Whether a document id is one `evidence demo` writes: one of its sample files (a graph's
    node ids extend the file's path) or a record of its follow-up responses (their `id`s, read
    once here, not once a document)."""
    import json

    from evidence.demo import DATA, FOLLOWUPS

    records = (json.loads(line) for line in FOLLOWUPS.read_text().splitlines() if line.strip())
    followups = {r.get("id") for r in records}
    data = str(DATA)
    return lambda document_id: document_id.startswith(data) or document_id in followups


def _say(message: str) -> None:
    print(f"evidence demo: {message}", file=sys.stderr, flush=True)


def run_demo(service: EvidenceService) -> int:
    from evidence.demo import GENERIC, INDEX, SAMPLES, VENDOR_STEPS
    from evidence.model import RetrieveRequest
    from evidence.profiles import profile_names

    own_index(service, INDEX)
    print(f"== indexing the sample into index {INDEX!r} (store: {service.settings.store_dir})")
    for paths, doc_type in VENDOR_STEPS:
        report = service.index_paths(INDEX, list(paths), doc_type=doc_type)
        if _stopped_by(report.failed):
            return EXIT_FAILED
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
    return label_demo(service)


def label_demo(service: EvidenceService) -> int:
    from evidence.demo import LABEL, LABEL_INDEX, LABEL_QUESTIONS
    from evidence.model import RetrieveRequest

    own_index(service, LABEL_INDEX)
    print(f"\n== verbatim answers from a drug label: indexing {LABEL.name} into index {LABEL_INDEX!r}")
    report = service.index_paths(LABEL_INDEX, [LABEL])
    if _stopped_by(report.failed):
        return EXIT_FAILED
    for question in LABEL_QUESTIONS:
        response = service.retrieve(LABEL_INDEX, RetrieveRequest(query=question, profile="verbatim"))
        plan = response.plan
        print(f"\n== verbatim: {question}")
        print(
            f"   plan: {plan.query_mode}, entity {plan.entity}, attribute {plan.attribute}, "
            f"sections {plan.candidate_sections}; path {response.telemetry.path_used}"
        )
        print(response.evidence_xml)
    return coach_demo(service)


def coach_demo(service: EvidenceService) -> int:
    from evidence.coach.contract import CoachRequest
    from evidence.demo import COACH_GRAPH, COACH_INDEX, COACH_REQUESTS, SAMPLES
    from evidence.model import RetrieveRequest

    own_index(service, COACH_INDEX)
    print(f"\n== coach: indexing the knowledge graph {COACH_GRAPH.name} into index {COACH_INDEX!r}")
    report = service.index_graph_paths(COACH_INDEX, [COACH_GRAPH])
    if _stopped_by(report.failed):
        return EXIT_FAILED
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
    return EXIT_OK


COMMAND = Command("demo", "index a bundled sample and run every profile", add_arguments, run)
