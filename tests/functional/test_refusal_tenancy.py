"""The refusal's index counts read only the caller's documents (`verbatim.grounding.index_df`
within the request's filters): a tenant sharing an index under a metadata filter cannot learn
whether another tenant's documents use a word by watching its own refusal flip."""

from __future__ import annotations

from typing import Any

from evidence.model import IndexDocumentRequest, RetrieveRequest
from evidence.profiles.base import ProfileEnv, index_counter
from evidence.service import EvidenceService
from evidence.verbatim.cascade import question_groups

INDEX = "shared"
GUIDE = (
    "Installing the toolkit\n\nThe toolkit installs on Linux and macOS. Run the installer with "
    "administrator rights. The installer needs 2 GB of free disk space."
)
#: Another tenant's document, full of the question's qualifier; its title names nothing asked.
NOTES = "Board notes\n\n" + "\n\n".join(
    f"Meeting {i}. The board {i} runs on RISC-V and the RISC-V port {i} was reviewed at length by "
    f"the committee, who noted item {i} among many others in the minutes."
    for i in range(80)
)
QUESTION = "How much disk space does the installer need on RISC-V?"
TENANT_A = {"tenant": "a"}


def _upload(service: EvidenceService, doc: str, text: str, tenant: str) -> None:
    request = IndexDocumentRequest(
        document_id=doc, filename=f"{doc}.txt", text=text, metadata={"tenant": tenant}
    )
    service.index_document(INDEX, request)


def _counts(service: EvidenceService, filters: dict[str, Any] | None) -> Any:
    env = ProfileEnv(service.backend, service.settings, index=INDEX, filters=filters)
    counter = index_counter(env, QUESTION)
    assert counter is not None
    return counter([t for g in question_groups(QUESTION) for t in g])


def _answer(service: EvidenceService) -> tuple[Any, ...]:
    r = service.retrieve(INDEX, RetrieveRequest(query=QUESTION, profile="default", filters=TENANT_A))
    features = r.telemetry.answer.features if r.telemetry.answer is not None else None
    return r.can_answer, r.confidence, features, [h.document_id for h in r.hits]


def test_another_tenants_upload_moves_no_count_and_no_refusal(service: EvidenceService) -> None:
    _upload(service, "a-guide", GUIDE, "a")
    counts, unfiltered, answer = _counts(service, TENANT_A), _counts(service, None), _answer(service)
    assert counts["risc"] == 0 and unfiltered["risc"] == 0
    _upload(service, "b-notes", NOTES, "b")
    # The whole index now uses the qualifier: a count that ignored the filter would say so.
    assert _counts(service, None)["risc"] > 0
    assert _counts(service, TENANT_A) == counts
    assert _answer(service) == answer


def test_the_request_filters_reach_both_counters(service: EvidenceService) -> None:
    """`index_counter` (default/vrm) reads the env's filters; the verbatim plug-in hands the
    request's filters to its cascade stage, whose run state counts within them."""
    from evidence.profiles import get_plugin
    from evidence.verbatim.profile import VerbatimCascadeStage

    _upload(service, "a-guide", GUIDE, "a")
    seen: list[Any] = []
    backend = service.backend
    counts = backend.term_counts

    def spy(index: str, texts: Any, **kw: Any) -> dict[str, int]:
        seen.append(kw.get("filters"))
        return counts(index, texts, **kw)

    backend.term_counts = spy  # type: ignore[method-assign]
    try:
        env = ProfileEnv(backend, service.settings, index=INDEX, filters=TENANT_A)
        stage = get_plugin("verbatim").pipeline(env).stages[0]
        assert isinstance(stage, VerbatimCascadeStage) and stage.filters == TENANT_A
        for profile in ("verbatim", "default"):
            seen.clear()
            service.retrieve(INDEX, RetrieveRequest(query=QUESTION, profile=profile, filters=TENANT_A))
            assert seen and all(f == TENANT_A for f in seen), profile
        # The scope's own document filter (a question naming a document) is not the caller's.
        seen.clear()
        service.retrieve(
            INDEX, RetrieveRequest(query="How much disk space does Installing the toolkit need?")
        )
        assert all(f is None for f in seen)
    finally:
        del backend.term_counts


# --- open: the verbatim cascade and the named-document scope read the whole index ---------------
# Found while writing the tests above (not fixed here: they are the cascade's and the scope's own
# searches, RELIABILITY.md §1). Strict: each starts failing once it is fixed, to be turned on.

NAMED_NOTES = (
    "RISC-V support\n\n" + "The toolkit runs on RISC-V boards. RISC-V builds need 4 GB of memory. " * 3
)


def test_a_filtered_verbatim_answer_holds_only_the_tenants_documents(service: EvidenceService) -> None:
    _upload(service, "a-guide", GUIDE, "a")
    _upload(service, "b-notes", NOTES, "b")
    r = service.retrieve(INDEX, RetrieveRequest(query=QUESTION, profile="verbatim", filters=TENANT_A))
    assert {h.document_id for h in r.hits} <= {"a-guide"}


def test_another_tenants_document_title_does_not_scope_the_request(service: EvidenceService) -> None:
    _upload(service, "a-guide", GUIDE, "a")
    before = _answer(service)
    _upload(service, "b-support", NAMED_NOTES, "b")
    # "RISC-V" names tenant B's document: scoped to it, tenant A's request loses its own hits.
    assert _answer(service) == before


def test_the_plan_names_no_subject_of_another_tenants_documents(service: EvidenceService) -> None:
    # The plan is returned to the caller: the rule planner's known subjects are read within the
    # request's filters, or tenant A's plan would show that some document of the index (B's) has
    # the subject A asked about, and its scope would name B's document.
    label = (
        "# Zorvex (zorvexamab) tablets\n\n## Dosage and administration\n\nTake 10 mg of Zorvex once daily.\n"
    )
    service.index_document(
        INDEX,
        IndexDocumentRequest(
            document_id="b-label", filename="zorvex.md", text=label, metadata={"tenant": "b"}
        ),
    )
    _upload(service, "a-guide", GUIDE, "a")
    asked = "What is the daily dose of zorvexamab?"  # the generic name: B's label maps it to its brand
    mine = service.retrieve(INDEX, RetrieveRequest(query=asked, profile="verbatim", filters=TENANT_A))
    assert mine.plan.entity is None and mine.plan.filters == TENANT_A  # nor B's document id
    assert {h.document_id for h in mine.hits} <= {"a-guide"}
    theirs = service.retrieve(
        INDEX, RetrieveRequest(query=asked, profile="verbatim", filters={"tenant": "b"})
    )
    assert theirs.plan.entity == "zorvexamab"  # a subject known within B's own documents
