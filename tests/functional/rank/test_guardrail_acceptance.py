"""The guardrail in every profile, through the service (issue 24 item 2's acceptance).

- With `EVIDENCE_MIN_SIMILARITY=0.99` every profile returns no hits for an ordinary question
  (and the coach endpoint cites nothing), while without it the same question has hits.
- A verbatim request with `top_k: 30` on a section of 22 matching spans returns all 22; the
  cascade's caps (8 spans, 1,500 characters) are only its defaults.
- The coach honours `max_chars`: on `/retrieve` (its hits) and on its own endpoint (the bullets of
  `minimal_context` and the content items' snippets).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidence.coach.contract import CoachRequest, CoachResponse
from evidence.coach.respond import quoted_chars
from evidence.config import Settings
from evidence.demo import DATA
from evidence.model import RetrieveRequest, RetrieveResponse
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder

LABEL = DATA / "label" / "lipravex.md"
GRAPH = DATA / "coach" / "algebra-calculus.yaml"
QUESTIONS = {
    "default": ("label", "What is the half-life of Lipravex?"),
    "vrm": ("label", "What is the half-life of Lipravex?"),
    "verbatim": ("label", "What is the half-life of Lipravex?"),
    "coach": ("tutor", "How do I solve a quadratic equation?"),
}
REACTIONS = [
    "Headache", "Nausea", "Dizziness", "Fatigue", "Diarrhoea", "Constipation", "Rash", "Pruritus",
    "Insomnia", "Back pain", "Arthralgia", "Cough", "Dyspepsia", "Abdominal pain", "Myalgia",
    "Oedema", "Palpitations", "Dry mouth", "Vomiting", "Somnolence", "Flushing", "Tremor",
]  # fmt: skip


def _service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> EvidenceService:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return EvidenceService(Settings(store_dir=tmp_path / "store"), embedder=HashingEmbedder())


def _indexed(service: EvidenceService) -> EvidenceService:
    assert not service.index_paths("label", [LABEL]).failed
    assert not service.index_graph_paths("tutor", [GRAPH]).failed
    return service


def _retrieve(service: EvidenceService, profile: str, **overrides: Any) -> RetrieveResponse:
    index, question = QUESTIONS[profile]
    return service.retrieve(index, RetrieveRequest(query=question, profile=profile, **overrides))


def _coach(service: EvidenceService) -> CoachResponse:
    return service.coach("tutor", CoachRequest(query=QUESTIONS["coach"][1]))


def test_a_floor_of_0_99_leaves_every_profile_without_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_service = _indexed(_service(tmp_path, monkeypatch))
    for profile in QUESTIONS:
        assert _retrieve(open_service, profile).hits, f"{profile}: the question has hits without a floor"
    before = _coach(open_service)
    assert before.matched_los and before.minimal_context
    open_service.close()

    floored = _service(tmp_path, monkeypatch, EVIDENCE_MIN_SIMILARITY="0.99")
    for profile in QUESTIONS:
        response = _retrieve(floored, profile)
        assert response.hits == [], profile
        assert response.valid_indexes == []
        guardrail = next(s for s in response.telemetry.stages if s.name == "guardrail")
        assert guardrail.detail is not None and guardrail.detail["min_similarity"] == 0.99
    after = _coach(floored)
    assert (after.matched_los, after.supporting_los, after.content_items, after.minimal_context) == (
        [],
        [],
        [],
        [],
    )
    assert after.citations == [] and not after.can_answer
    floored.close()


def _label_with_reactions(path: Path) -> Path:
    lines = [f"- {name} was reported in {i % 9 + 1}% of patients." for i, name in enumerate(REACTIONS)]
    text = "\n".join(
        [
            "# Zorlexin (zorlexamab) tablets",
            "",
            "## Indications and Usage",
            "",
            "Zorlexin is indicated for the treatment of chronic plaque psoriasis in adults.",
            "",
            "## Adverse Reactions",
            "",
            *lines,
            "",
            "## Dosage and Administration",
            "",
            "Take one 20 mg tablet once daily with food.",
            "",
        ]
    )
    out = path / "zorlexin.md"
    out.write_text(text, encoding="utf-8")
    return out


def test_a_verbatim_top_k_of_30_returns_all_22_spans_of_the_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _service(tmp_path, monkeypatch)
    assert not service.index_paths("zorlexin", [_label_with_reactions(tmp_path)]).failed
    question = "What are the adverse reactions of Zorlexin?"

    def ask(**overrides: Any) -> list[str]:
        response = service.retrieve(
            "zorlexin", RetrieveRequest(query=question, profile="verbatim", **overrides)
        )
        assert response.telemetry.path_used == "SECTION_EXACT"
        return [h.text for h in response.hits]

    spans = [s for s in _label_with_reactions(tmp_path).read_text().splitlines() if " was reported in " in s]
    assert len(spans) == 22
    # The cascade's caps are the profile's defaults: 8 spans...
    assert ask() == spans[:8]
    # ...which a request's top_k overrides: the section's 22 first, in order, then the safety
    # net's best spans in the rest of the bundle,
    got = ask(top_k=30)
    assert got[:22] == spans and 22 < len(got) <= 30
    # and its budget bounds, as seed 003 counts it (stop at the first that would overflow).
    budget = sum(len(s) for s in spans[:5]) + 3
    assert ask(top_k=30, max_chars=budget) == spans[:5]
    service.close()


def test_the_coach_honours_max_chars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    open_service = _indexed(_service(tmp_path, monkeypatch))
    free = _coach(open_service)
    hits = _retrieve(open_service, "coach").hits
    open_service.close()
    used = quoted_chars(free)
    assert len(free.minimal_context) >= 2 and used > 0
    budget = used - len(free.minimal_context[-1]) // 2  # not room for everything
    assert sum(len(h.text) for h in hits) > budget

    service = _service(
        tmp_path, monkeypatch, EVIDENCE_PROFILE_DEFAULTS=f'{{"coach": {{"max_chars": {budget}}}}}'
    )
    fitted = _coach(service)
    assert 0 < quoted_chars(fitted) <= budget
    assert fitted.minimal_context and set(fitted.minimal_context) <= set(free.minimal_context)
    assert fitted.telemetry.detail["max_chars"] == budget
    # On /retrieve its hits are whole nodes, counted as seed 003 counts them.
    room = len(hits[0].text) + len(hits[1].text) - 1
    on_retrieve = _retrieve(service, "coach", max_chars=room)
    assert [h.chunk_id for h in on_retrieve.hits] == [hits[0].chunk_id]
    service.close()


def test_a_hit_exactly_at_the_floor_stays_in_every_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 003's floor is inclusive: the lowest similarity among a profile's hits, used as the
    floor, keeps that hit."""
    service = _indexed(_service(tmp_path, monkeypatch))
    for profile in QUESTIONS:
        probe = _retrieve(service, profile, min_similarity=1e-9, explain=True)
        sims = [h.scores["dense"] for h in probe.hits if h.scores and "dense" in h.scores]
        assert sims, profile
        floor = min(sims)
        kept = _retrieve(service, profile, min_similarity=floor, explain=True)
        assert any((h.scores or {}).get("dense") == floor for h in kept.hits), profile
        above = _retrieve(service, profile, min_similarity=min(1.0, floor + 1e-6), explain=True)
        assert all((h.scores or {}).get("dense", 1.0) > floor for h in above.hits), profile
    service.close()
