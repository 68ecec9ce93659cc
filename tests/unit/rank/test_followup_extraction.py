"""Seed 000 "Testing Scenarios": follow-up extraction through the vrm profile, end to end.

Real embedded store, the real first stage (lexical + dense, fused), an in-process reranker
(no cross-encoder ships here), the real formatter; every evidence document is parsed back.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from evidence.format.evidence import evidence_from_candidates
from evidence.format.hits import to_followups
from evidence.ids import normalize_and_hash
from evidence.ingest.chunker import chunk_document
from evidence.ingest.parsers import parse_bytes
from evidence.ingest.sources import enrich_metadata
from evidence.profiles import get_profile
from evidence.rank.candidate import Candidate
from evidence.rank.first_stage import FirstStage
from evidence.rank.followups import round_of
from evidence.rank.stages import FollowupExtraction
from evidence.records import Chunk, ChunkKind
from tests.unit.rank.rankkit import (
    INDEX,
    ScriptedReranker,
    chunk,
    ctx,
    followup,
    new_backend,
    overlap_score,
    vec,
)

CRITERION = "Do you encrypt customer data at rest?"
VENDOR_DOCS = [
    chunk(f"v{i}", f"Vendor policy {i}: customer data at rest is protected and we encrypt backups {i}")
    for i in range(10)
] + [chunk(f"x{i}", f"Unrelated cafeteria menu item number {i}") for i in range(10)]


def run_vrm(tmp_path: Path, extra: list[Chunk], **overrides: object):
    backend = new_backend(tmp_path, VENDOR_DOCS + extra)
    reranker = ScriptedReranker(overlap_score)
    profile = get_profile("vrm")
    c = ctx(
        backend,
        params=profile.params(dict(overrides)),
        criterion=CRITERION,
        query=CRITERION,
        query_vector=vec(CRITERION),
        reranker=reranker,
        explain=True,
    )
    outcome = profile.run(c)
    doc = evidence_from_candidates(outcome.hits, outcome.followups)
    root = ET.fromstring(f"<root>{doc.xml}</root>")
    return outcome, doc, root, reranker


def entry_text(root: ET.Element, n: int) -> tuple[str, str]:
    el = root.find(f"index_{n}")
    assert el is not None
    return el.findtext("source") or "", el.findtext("content") or ""


def test_no_followups_in_index_gives_reranked_results_only(tmp_path: Path) -> None:
    outcome, doc, root, _ = run_vrm(tmp_path, [])
    assert outcome.followups == []
    assert [el.tag for el in root] == [f"index_{i}" for i in range(1, 7)]
    assert doc.valid_indexes == [1, 2, 3, 4, 5, 6]


def test_single_followup_is_a_standard_entry_at_index_7(tmp_path: Path) -> None:
    fu = followup("f1", CRITERION, 1, answer="AES-256 for all volumes.", filename="round1.xlsx")
    outcome, doc, root, reranker = run_vrm(tmp_path, [fu])
    assert [c.chunk_id for c in outcome.followups] == ["f1"]
    assert len(root) == 7 and doc.valid_indexes == [1, 2, 3, 4, 5, 6, 7]
    source, content = entry_text(root, 7)
    assert source == "round1.xlsx"
    assert content.strip() == fu.text
    # extracted BEFORE reranking: the reranker never saw it
    assert all(fu.text not in texts for _, texts, _ in reranker.calls)


def test_three_rounds_are_combined_into_one_progression(tmp_path: Path) -> None:
    fus = [followup(f"f{r}", CRITERION, r, answer=f"answer {r}", filename=f"r{r}.xlsx") for r in (2, 1, 3)]
    _, _, root, _ = run_vrm(tmp_path, fus)
    assert len(root) == 7
    source, content = entry_text(root, 7)
    assert source == "r3.xlsx (Multiple Rounds)"
    expected = "\n\n".join(f"[Round {r}]\nQuestion: {CRITERION}\nAnswer: answer {r}" for r in (1, 2, 3))
    assert content.strip() == expected


def test_five_rounds_keep_only_the_latest_three(tmp_path: Path) -> None:
    fus = [followup(f"f{r}", CRITERION, r, answer=f"answer {r}") for r in range(1, 6)]
    outcome, _, root, _ = run_vrm(tmp_path, fus)
    assert [c.metadata["round_number"] for c in outcome.followups] == [3, 4, 5]
    _, content = entry_text(root, 7)
    assert "[Round 1]" not in content and "[Round 2]" not in content
    assert content.index("[Round 3]") < content.index("[Round 4]") < content.index("[Round 5]")
    # the older linked rounds are not ranked hits either
    assert not {"f1", "f2"} & {c.chunk_id for c in outcome.hits}


def test_followup_with_a_different_hash_goes_to_the_reranker(tmp_path: Path) -> None:
    other = followup(
        "g1",
        "Do you have a business continuity plan?",
        1,
        answer="customer data at rest encrypt backups protected policy",
    )
    outcome, _, root, reranker = run_vrm(tmp_path, [other])
    assert outcome.followups == []
    assert any(other.text in texts for _, texts, _ in reranker.calls)
    assert len(root) == 6


def test_modified_question_still_extracted_with_question_similarity(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fu = followup("f1", CRITERION, 2, question="Is customer data encrypted when stored?")
    with caplog.at_level(logging.INFO, logger="evidence.rank.stages"):
        outcome, _, _, _ = run_vrm(tmp_path, [fu])
    assert [c.chunk_id for c in outcome.followups] == ["f1"]
    (model,) = to_followups(outcome.followups)
    assert model.question_similarity_score is not None
    assert 0.0 < model.question_similarity_score < 1.0
    logged = [r for r in caplog.records if hasattr(r, "question_similarity_score")]
    assert logged and logged[0].question_similarity_score == model.question_similarity_score


def test_unmodified_question_scores_one(tmp_path: Path) -> None:
    fu = followup("f1", CRITERION, 1, question="do you encrypt customer data AT REST")
    outcome, _, _, _ = run_vrm(tmp_path, [fu])
    assert to_followups(outcome.followups)[0].question_similarity_score == 1.0


def test_linked_followup_found_by_lookup_when_search_misses_it(tmp_path: Path) -> None:
    """Beyond the seed: the follow-up shares no word with the criterion and search can't see it."""
    fu = chunk(
        "f-hidden",
        "Yes. AES-256 everywhere since 2019.",
        doc="fu-hidden",
        type="followup_response:1",
        meta={
            "round_number": 1,
            "criterion_question_hash": normalize_and_hash(CRITERION),
            "question": "Storage cryptography?",
            "answer": "Yes. AES-256 everywhere since 2019.",
        },
    )
    assert not set(CRITERION.lower().split()) & set(fu.text.lower().split())
    backend = new_backend(tmp_path, [*VENDOR_DOCS, fu])
    profile = get_profile("vrm")
    c = ctx(
        backend,
        params=profile.params({"first_stage_k": 3}),
        criterion=CRITERION,
        query=CRITERION,
        query_vector=None,
        explain=True,
    )
    found = FirstStage().retrieve(backend, INDEX, query=CRITERION, vector=None, k=3).candidates
    assert "f-hidden" not in {x.chunk_id for x in found}
    outcome = profile.run(c)
    assert [x.chunk_id for x in outcome.followups] == ["f-hidden"]
    assert "f-hidden" not in {x.chunk_id for x in outcome.hits}
    extraction = next(s for s in outcome.stages if s.name == "followup_extraction")
    assert extraction.detail is not None and extraction.detail["from_lookup"] == 1


# --- unit tests of the stage (seed 000: FollowupExtractionResult.from_first_stage_refs) -------


@pytest.fixture
def backend(tmp_path: Path):
    b = new_backend(tmp_path, [chunk("seed", "seed document")])
    yield b
    b.close()


def _cands(chunks: list) -> list[Candidate]:  # type: ignore[type-arg]
    return [
        Candidate(chunk=c, score=1.0 - i / 100, first_stage_score=1.0 - i / 100) for i, c in enumerate(chunks)
    ]


def test_extraction_splits_matched_and_remaining(backend) -> None:
    cs = [chunk("a"), followup("f1", CRITERION, 1), chunk("b"), followup("g", "Other question?", 1)]
    c = ctx(backend, criterion=CRITERION, followup_max_rounds=3)
    out = FollowupExtraction().run(_cands(cs), c)
    assert [x.chunk_id for x in out] == ["a", "b", "g"]
    assert [x.chunk_id for x in c.trace.followups] == ["f1"]


def test_extraction_needs_a_followup_type(backend) -> None:
    """A followup_document carrying the hash is not a follow-up response: it stays a hit."""
    meta = {"criterion_question_hash": normalize_and_hash(CRITERION)}
    doc = chunk("d", type="followup_document", meta=meta)
    c = ctx(backend, criterion=CRITERION, followup_max_rounds=3)
    out = FollowupExtraction().run(_cands([doc]), c)
    assert [x.chunk_id for x in out] == ["d"] and c.trace.followups == []


@pytest.mark.parametrize(("criterion", "rounds"), [(None, 3), (CRITERION, 0)])
def test_extraction_off_without_criterion_or_rounds(backend, criterion, rounds) -> None:
    cs = [chunk("a"), followup("f1", CRITERION, 1)]
    c = ctx(backend, criterion=criterion, followup_max_rounds=rounds)
    out = FollowupExtraction().run(_cands(cs), c)
    assert [x.chunk_id for x in out] == ["a", "f1"] and c.trace.followups == []


def test_extraction_lookup_failure_degrades(tmp_path: Path) -> None:
    class Broken:
        def lookup(self, *a: object, **k: object) -> list:  # type: ignore[type-arg]
            from evidence.errors import BackendError

            raise BackendError("down")

    c = ctx(Broken(), criterion=CRITERION, followup_max_rounds=3)
    out = FollowupExtraction().run(_cands([chunk("a"), followup("f1", CRITERION, 1)]), c)
    assert [x.chunk_id for x in out] == ["a"]
    assert [x.chunk_id for x in c.trace.followups] == ["f1"]
    assert c.trace.degraded == ["followup_lookup:error"]


def test_round_number_falls_back_to_type_suffix(backend) -> None:
    fus = [followup(f"f{r}", CRITERION, r) for r in (1, 2, 3, 4)]
    fus = [
        chunk(
            f.chunk_id,
            f.text,
            type=f.metadata["type"],
            meta={k: v for k, v in f.metadata.items() if k not in ("round_number", "type")},
        )
        for f in fus
    ]
    c = ctx(backend, criterion=CRITERION, followup_max_rounds=2)
    FollowupExtraction().run(_cands(fus), c)
    assert [x.chunk_id for x in c.trace.followups] == ["f3", "f4"]


# --- one response = one (document, round), however many chunks it was split into -------------


def _long_followup_chunks(round_number: object, *, doc: str = "fu-long.md") -> list[Chunk]:
    """A follow-up answer long enough to be split into overlapping passages by the real chunker."""
    answer = " ".join(
        f"Sentence {i} of the answer: volumes, backups and replicas are encrypted with AES-256 key {i}."
        for i in range(40)
    )
    text = f"Question: {CRITERION}\n\nAnswer: {answer}"
    meta = enrich_metadata(
        {
            "type": "followup_response:2",
            "round_number": round_number,
            "criterion_question": CRITERION,
            "question": CRITERION,
            "answer": answer,
            "FILENAME": "round2.docx",
        }
    )
    parsed = parse_bytes(text.encode(), filename=doc)
    chunks = chunk_document(parsed, document_id=doc, source=doc, metadata=meta, passage_tokens=64, overlap=16)
    passages = [c for c in chunks.chunks if c.kind is ChunkKind.PASSAGE]
    assert len(passages) >= 4  # the point of the test: one answer, many overlapping chunks
    return passages


def test_a_response_split_into_chunks_is_one_followup(tmp_path: Path) -> None:
    passages = _long_followup_chunks(2)
    outcome, _, root, _ = run_vrm(tmp_path, passages)
    # one response: one follow-up, a standard entry (not "Multiple Rounds"), the text once
    assert len(outcome.followups) == 1
    source, content = entry_text(root, len(root))
    assert source == "round2.docx" and "(Multiple Rounds)" not in source
    assert content.count("[Round") == 0
    for i in range(40):
        assert content.count(f"Sentence {i} of the answer:") == 1
    assert len(to_followups(outcome.followups)) == 1
    # the merged text is exactly the document's text from the first chunk's start to the last's end
    assert outcome.followups[0].chunk.text == content.strip()


def test_latest_three_responses_counted_per_document_and_round(tmp_path: Path) -> None:
    # rounds 0, 1 and 3 as one chunk each, round 2 split into many chunks: the latest three responses
    fus = [followup("f1", CRITERION, 1), followup("f3", CRITERION, 3), followup("f0", CRITERION, 0)]
    outcome, _, root, _ = run_vrm(tmp_path, [*fus, *_long_followup_chunks(2)])
    rounds = [round_of(c.metadata) for c in outcome.followups]
    assert rounds == [1, 2, 3]  # three responses, not three chunks of round 2
    _, content = entry_text(root, len(root))
    assert [content.count(f"[Round {r}]") for r in (1, 2, 3)] == [1, 1, 1] and "[Round 0]" not in content


@pytest.mark.parametrize("raw", [2.0, "2.0", "2", 2])
def test_integral_float_rounds_read_as_that_round(tmp_path: Path, raw: object) -> None:
    assert round_of({"round_number": raw}) == 2
    fus = [followup(f"f{r}", CRITERION, r) for r in (1, 3, 4)]
    outcome, _, _, _ = run_vrm(tmp_path, [*fus, *_long_followup_chunks(raw)], followup_max_rounds=4)
    assert sorted(round_of(c.metadata) for c in outcome.followups) == [1, 2, 3, 4]


def test_a_criterion_without_words_links_nothing(backend) -> None:
    # "???" normalises to "", and so does every other punctuation-only criterion: never link on it
    fu = followup("fq", "???", 1)
    c = ctx(backend, params=get_profile("vrm").defaults, criterion="!!!")
    c = replace(c, criterion_hash=normalize_and_hash("!!!"))
    out = FollowupExtraction().run(_cands([fu]), c)
    assert c.trace.followups == [] and [x.chunk_id for x in out] == ["fq"]
    assert c.trace.detail["skipped"] == "criterion has no words to link on"
