"""A request reads only the caller's documents: the service hands its profile the index seen
through the request's filters (`search.scoped.bind_filters`). So the refusal's index counts
(`verbatim.grounding.index_df`) read only them, and a tenant sharing an index under a metadata
filter cannot learn whether another tenant's documents use a word by watching its refusal flip;
nor can the verbatim cascade, the named-document scope or the planner read another's documents."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from evidence.model import IndexDocumentRequest, RetrieveRequest
from evidence.profiles import register_profile, unregister_profile
from evidence.profiles.base import ProfileEnv, index_counter
from evidence.rank.candidate import Candidate
from evidence.rank.context import ProfileParams, RankContext
from evidence.rank.pipeline import Profile
from evidence.search.scoped import bind_filters
from evidence.service import EvidenceService
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.scope import named_documents

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
    env = ProfileEnv(bind_filters(service.backend, filters), service.settings, index=INDEX)
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
    """`index_counter` (default/vrm) and the verbatim cascade's run state count through the
    request's view of the backend, which adds the request's filters to every read."""
    _upload(service, "a-guide", GUIDE, "a")
    seen: list[Any] = []
    backend = service.backend
    counts = backend.term_counts

    def spy(index: str, texts: Any, **kw: Any) -> dict[str, int]:
        seen.append(kw.get("filters"))
        return counts(index, texts, **kw)

    backend.term_counts = spy  # type: ignore[method-assign]
    try:
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


# --- the verbatim cascade, the named-document scope and the planner read within the filters ----

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


GIZMO = "Gizmo {}\n\nThe gizmo resets when you hold its button for ten seconds. Gizmo {} notes."
OTHER = "{} handbook\n\nThe {} ships in a box with a cable and a printed card."


def test_another_tenants_document_count_does_not_move_the_named_scope(service: EvidenceService) -> None:
    """A name is distinctive in at most a third of the documents the request reads: two of tenant
    A's three documents are "gizmo" ones, so "gizmo" names none of them, however many documents
    tenant B adds to the index (a third of the whole index's would let it name both)."""
    _upload(service, "a-gizmo-manual", GIZMO.format("manual", "manual"), "a")
    _upload(service, "a-gizmo-guide", GIZMO.format("guide", "guide"), "a")
    _upload(service, "a-sprocket", OTHER.format("Sprocket", "sprocket"), "a")
    view = bind_filters(service.backend, TENANT_A)
    asked = "How do I reset the gizmo?"
    before = named_documents(view, INDEX, asked)
    assert before is None and view.document_count(INDEX) == 3
    for i, thing in enumerate(("lamp", "kettle", "drill", "radio", "fan", "clock")):
        _upload(service, f"b-{i}", OTHER.format(thing.title(), thing), "b")
    assert service.backend.document_count(INDEX) == 9 and view.document_count(INDEX) == 3
    assert named_documents(view, INDEX, asked) == before
    # Tenant B's own view reads its six: no gizmo at all.
    assert named_documents(bind_filters(service.backend, {"tenant": "b"}), INDEX, asked) is None


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


# --- a read that forgets the filters ------------------------------------------------------------

FORGETFUL = "forgetful-test"


class _Forgetful:
    """A recall stage written with no thought for tenants: none of its reads names a filter."""

    name = "forgetful"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        found = [
            *ctx.backend.lexical(ctx.index, "toolkit installer board RISC-V meeting", k=100, kind=None),
            *ctx.backend.lookup(ctx.index, {}, limit=10_000, kind=None),
        ]
        held = ctx.backend.vectors(ctx.index, [h.chunk.chunk_id for h in found])
        ctx.trace.detail["vectors"] = len(held)
        return [Candidate(chunk=h.chunk, score=h.score, first_stage_score=h.score) for h in found]


@pytest.fixture
def forgetful() -> Iterator[None]:
    register_profile(
        FORGETFUL,
        lambda: Profile(
            FORGETFUL, "test: reads without filters", ProfileParams(top_k=10_000), (_Forgetful(),)
        ),
    )
    yield
    unregister_profile(FORGETFUL)


def test_a_new_read_that_forgets_the_filters_reads_only_the_tenants_documents(
    service: EvidenceService, forgetful: None
) -> None:
    """The profile's backend is the index seen through the request's filters: a stage (or a
    plug-in's own profile) that passes none still reads only the caller's documents."""
    _upload(service, "a-guide", GUIDE, "a")
    _upload(service, "b-notes", NOTES, "b")
    everyone = service.retrieve(INDEX, RetrieveRequest(query=QUESTION, profile=FORGETFUL))
    assert {h.document_id for h in everyone.hits} == {"a-guide", "b-notes"}  # the stage reads widely
    mine = service.retrieve(INDEX, RetrieveRequest(query=QUESTION, profile=FORGETFUL, filters=TENANT_A))
    assert mine.hits and {h.document_id for h in mine.hits} == {"a-guide"}
    theirs = service.retrieve(
        INDEX, RetrieveRequest(query=QUESTION, profile=FORGETFUL, filters={"tenant": "b"})
    )
    assert theirs.hits and {h.document_id for h in theirs.hits} == {"b-notes"}


def test_a_profile_cannot_write_through_its_backend(service: EvidenceService) -> None:
    """What a profile is given reads only: no upsert, no delete, no listing of the whole index."""
    from evidence.search.base import DocumentListing, SearchBackend, SearchReader

    _upload(service, "a-guide", GUIDE, "a")
    env = service._env(INDEX, TENANT_A)
    assert isinstance(env.backend, SearchReader) and not isinstance(env.backend, SearchBackend)
    assert not isinstance(env.backend, DocumentListing)
    # Nor through the rest of its environment: what else it may use of the service is two
    # functions (`ProfileServices`), not the service and its backend.
    assert env.services is not None
    assert not any(
        isinstance(getattr(env.services, name), SearchBackend | EvidenceService) for name in dir(env.services)
    )
    assert env.services.document_embedder(INDEX) is service.document_embedder(INDEX)
    # of the coach, its `coach` alone: not the runtime, whose service holds the backend
    # (tests/unit/coach/test_coach_runtime_refs.py walks what it holds)
    answering = env.services.coach_runtime()
    assert answering is not service.coach_runtime and not hasattr(answering, "service")
    for write in ("upsert", "delete_document", "delete_index", "create_index", "close"):
        assert not hasattr(env.backend, write), write


@pytest.mark.parametrize("value", [5, 5.0, True, "5", ["5"]])
def test_a_document_id_filter_of_any_json_scalar_scopes_the_verbatim_cascade(
    service: EvidenceService, value: Any
) -> None:
    """`filters.document_id` may be any JSON scalar (`model.MetaScalar`), not only a string or
    a list: the cascade reads it as the backends compare it (5 names document "5"), never a 500."""
    from evidence.search.base import filter_value

    request = IndexDocumentRequest(document_id="5", filename="5.txt", text=GUIDE, metadata={"tenant": "a"})
    service.index_document(INDEX, request)
    answer = service.retrieve(
        INDEX, RetrieveRequest(query=QUESTION, profile="verbatim", filters={"document_id": value})
    )
    named = value[0] if isinstance(value, list) else value
    assert {h.document_id for h in answer.hits} <= {filter_value(named)}
    assert answer.hits or named is True  # true names document "true": there is none
