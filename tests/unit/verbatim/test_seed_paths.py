"""Seed 002's remaining paths and attributes (issue 25 item 7), the named-document scope and the
safety net (issue 22 item 4). Each test fails on the code before them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from evidence.config import Settings
from evidence.model import RetrieveRequest
from evidence.plan.verbatim import plan_question
from evidence.service import EvidenceService
from evidence.verbatim.cascade import (
    ATTRIBUTE_LOOKUP,
    ENTITY_OVERVIEW,
    HYBRID_FACTSPAN,
    NO_RESULT,
    PATHS,
    CascadeConfig,
    VerbatimCascade,
)
from evidence.verbatim.scope import named_documents
from tests.unit.verbatim.verbatimkit import text_service

KNOWN = ["lipravex", "ferlostatin calcium", "ferlostatin", "zorvex", "talmopril maleate", "talmopril"]


def run(service: EvidenceService, question: str, config: CascadeConfig | None = None):
    return VerbatimCascade(config).run(
        service.backend, "label", question, plan_question(question, known_entities=KNOWN)
    )


def test_a_question_naming_only_the_drug_gets_an_overview_of_its_key_sections(
    label_service: EvidenceService,
) -> None:
    res = run(label_service, "Lipravex")
    assert res.path_used == ENTITY_OVERVIEW and res.entity == "LIPRAVEX"
    sections = [h.chunk.metadata.get("section_canonical") for h in res.hits]
    assert sections[:3] == ["indications", "dosage", "contraindications"]
    assert len(set(sections)) == len(sections) >= 4  # one span per key section


def test_elimination_is_an_attribute_answered_by_half_life_or_clearance(
    label_service: EvidenceService,
) -> None:
    plan = plan_question("How is ferlostatin eliminated from the body?", known_entities=KNOWN)
    assert plan.query_mode == "ATTRIBUTE" and plan.attribute == "elimination"
    res = run(label_service, "How is ferlostatin eliminated from the body?")
    assert res.path_used == ATTRIBUTE_LOOKUP
    assert any("elimination half-life of ferlostatin" in h.chunk.text for h in res.hits)


def test_treatment_duration_questions_are_answered_by_figures_of_time() -> None:
    plan = plan_question("For how many weeks should the course of treatment continue?")
    assert plan.attribute == "treatment_duration" and "dosage" in plan.candidate_sections


def test_every_path_of_the_seed_is_a_cascade_path() -> None:
    seed = {"SECTION_EXACT", "SECTION_FUZZY", "ATTRIBUTE_LOOKUP", "BM25_FACTSPAN", "GLOBAL_FACTSPAN_SCAN"}
    assert seed | {"VECTOR_SCOPED", ENTITY_OVERVIEW, HYBRID_FACTSPAN} == set(PATHS)


def test_the_grounding_check_refuses_evidence_without_the_question_s_key_concept(
    label_service: EvidenceService,
) -> None:
    res = run(label_service, "What is the wholesale price of Lipravex per pack?")
    assert res.path_used == NO_RESULT and res.hits == []
    assert res.refused is not None and "price" in " ".join(res.missing)
    # The same evidence with the floor off: found by a path, not by chance empty.
    loose = run(
        label_service,
        "What is the wholesale price of Lipravex per pack?",
        CascadeConfig(min_grounding=0.0, safety_net_grounding=0.0),
    )
    assert loose.hits and loose.path_used == res.refused


LICENCES = {
    "alpha-license.txt": """Alpha Public License

1. Definitions.
"Work" means the software distributed under this License.

2. Patent Grant. Each Contributor grants You a patent license to make and sell the Work.
If You institute patent litigation against any entity, the patent licenses granted to You
under this License for the Work terminate on the date such litigation is filed.
""",
    "beta-license.txt": """Beta Software License

1. Definitions.
"Software" means the program distributed under this License.

2. Patent Grant. The patent grant to you for the Software ends if you sue anyone claiming the
Software infringes a patent; the patent grant then terminates immediately.
""",
    "gamma-license.txt": """Gamma Content License

1. Scope. This License covers documentation and images.

2. Attribution. You must credit the authors of the content.
""",
    "delta-license.txt": """Delta Font License

1. Scope. This License covers fonts.

2. Embedding. Fonts may be embedded in documents.
""",
}


@pytest.fixture(scope="module")
def licences(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    return text_service(tmp_path_factory, "lic", LICENCES)


@pytest.mark.parametrize("profile", ["verbatim", "default"])
def test_the_document_a_question_names_is_the_scope_in_every_profile(
    licences: EvidenceService, profile: str
) -> None:
    question = "Under the Alpha licence, when does the patent license terminate?"
    resp = licences.retrieve("lic", RetrieveRequest(query=question, profile=profile))
    scoped = resp.plan.filters.get("document_id", [])
    assert isinstance(scoped, list) and [Path(d).name for d in scoped] == ["alpha-license.txt"]
    assert resp.hits and {Path(h.document_id).name for h in resp.hits} == {"alpha-license.txt"}


def test_a_word_every_document_uses_names_none_of_them(licences: EvidenceService) -> None:
    # "license" is in every title and "software" in every text: neither names one document.
    assert named_documents(licences.backend, "lic", "Which license lets me embed software?") is None
    named = named_documents(licences.backend, "lic", "What does the Delta font license allow?")
    assert [Path(d).name for d in named or []] == ["delta-license.txt"]


def test_plain_text_clauses_are_sections_the_cascade_can_use(licences: EvidenceService) -> None:
    resp = licences.retrieve(
        "lic", RetrieveRequest(query="What does the Alpha licence say about patents?", profile="verbatim")
    )
    assert any(h.citation.section == "2. Patent Grant" and "patent license" in h.text for h in resp.hits)


ACMEX = """# ACMEX (acmeprazole) capsules

## 2 DOSAGE AND ADMINISTRATION

Take ACMEX once daily before a meal.

| Indication | Dose | Duration |
|---|---|---|
| Healing of erosive esophagitis | 20 mg once daily | 4 to 8 weeks |
| Duodenal ulcer | 40 mg once daily | 4 weeks |

## 12 CLINICAL PHARMACOLOGY

### 12.3 Pharmacokinetics

The elimination half-life of acmeprazole is about 1 hour.
"""


@pytest.fixture(scope="module")
def acmex(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    root = tmp_path_factory.mktemp("acmex")
    (root / "acmex.md").write_text(ACMEX)
    service = EvidenceService(Settings(store_dir=root / "store"))
    assert not service.index_paths("acmex", [root / "acmex.md"], embed=False).failed
    return service


@pytest.mark.parametrize(
    ("question", "row"),
    [
        ("How long should erosive esophagitis be treated with Acmex?", "| Healing of erosive esophagitis |"),
        ("What Acmex dose is used for a duodenal ulcer?", "| Duodenal ulcer | 40 mg once daily |"),
    ],
)
def test_table_rows_answer_duration_and_dose_questions(
    acmex: EvidenceService, question: str, row: str
) -> None:
    resp = acmex.retrieve("acmex", RetrieveRequest(query=question, profile="verbatim"))
    assert resp.hits and resp.hits[0].text.startswith(row), [h.text for h in resp.hits]


@pytest.mark.parametrize(
    "question",
    [
        "What is the wholesale price of Lipravex per pack?",
        "What is the elimination half-life of talmopril?",
        "Lipravex contraindications",
    ],
)
def test_no_result_can_answer_and_confidence_come_from_the_one_shared_signal(
    label_service: EvidenceService, question: str
) -> None:
    from evidence.verbatim.grounding import REFUSAL_FLOOR, SAFETY_NET_FLOOR

    loose = run(label_service, question, CascadeConfig(min_grounding=0.0, safety_net_grounding=0.0))
    # the answer probability of `verbatim.grounding.judge`, against the floor of the path it came by
    floor = max(REFUSAL_FLOOR, SAFETY_NET_FLOOR) if loose.path_used == HYBRID_FACTSPAN else REFUSAL_FLOOR
    refused = loose.grounding < floor
    res = label_service.retrieve("label", RetrieveRequest(query=question, profile="verbatim"))
    assert (res.telemetry.path_used == NO_RESULT) is refused
    assert res.can_answer is (not refused) is bool(res.hits)
    assert (res.confidence >= 0.5) is res.can_answer


@pytest.mark.parametrize("profile", ["verbatim", "default"])
def test_the_refusal_reads_how_many_passages_use_each_concept(
    licences: EvidenceService, profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both profiles hand the shared signal the index's passage counts of the question's terms:
    # "embedded" is in a passage (counted by the question's word: its stem "embed" analyses to
    # "emb" and would find nothing), "spaceships" in none (`index_absent`).
    import evidence.verbatim.grounding as rg
    import evidence.verbatim.run_state as rs

    seen: list[Mapping[str, int] | None] = []
    judge = rg.judge

    def recorded(*args: Any, **kwargs: Any) -> rg.Verdict:
        seen.append(kwargs.get("df"))
        return judge(*args, **kwargs)

    monkeypatch.setattr(rg, "judge", recorded)
    monkeypatch.setattr(rs, "judge", recorded)
    question = "May fonts be embedded in spaceships?"
    licences.retrieve("lic", RetrieveRequest(query=question, profile=profile))
    assert seen and seen[-1] is not None
    assert seen[-1].get("embed", 0) >= 1 and seen[-1].get("spaceship") == 0
