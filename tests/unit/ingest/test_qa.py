"""Follow-up responses uploaded as "Q: …\nA: …" text get `question`/`answer` metadata (issue 13, item 7).

The evidence formatter shows a follow-up's question and answer from its metadata
(docs/seeds.md#seed-000); a text upload used to come back with both empty.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from evidence.format.evidence import followup_entry
from evidence.ingest import chunk_document, enrich_metadata, parse_bytes
from evidence.ingest.qa import split_qa
from evidence.rank.candidate import Candidate
from evidence.records import ChunkKind, DocumentChunks

FOLLOWUP = {"type": "followup_response:2", "criterion_question": "Do you encrypt backups?"}


def _chunks(data: bytes, filename: str, metadata: Mapping[str, object]) -> DocumentChunks:
    doc = parse_bytes(data, filename=filename)
    return chunk_document(doc, document_id=filename, source=filename, metadata=enrich_metadata(metadata))


def test_text_upload_of_a_followup_fills_question_and_answer() -> None:
    data = b"Q: Do you encrypt backups at rest?\r\nA: Yes. Backups use AES-256,\r\nkeys rotate yearly.\r\n"
    chunks = _chunks(data, "round2.txt", FOLLOWUP)
    for chunk in chunks.chunks:
        assert chunk.metadata["question"] == "Do you encrypt backups at rest?"
        assert chunk.metadata["answer"] == "Yes. Backups use AES-256,\nkeys rotate yearly."
    passage = next(c for c in chunks.chunks if c.kind is ChunkKind.PASSAGE)
    entry = followup_entry(Candidate(chunk=passage, score=1.0, first_stage_score=1.0))
    assert (entry.question, entry.answer, entry.round_number) == (
        "Do you encrypt backups at rest?",
        "Yes. Backups use AES-256,\nkeys rotate yearly.",
        2,
    )
    assert chunks.metadata["question"] == "Do you encrypt backups at rest?"


def test_markdown_question_answer_labels_are_read_too() -> None:
    data = b"**Question:** Is MFA enforced\nfor admins?\n\n**Answer:** Yes, with hardware keys.\n"
    meta = _chunks(data, "r.md", FOLLOWUP).metadata
    assert (meta["question"], meta["answer"]) == ("Is MFA enforced for admins?", "Yes, with hardware keys.")


def test_explicit_metadata_wins_and_other_documents_are_untouched() -> None:
    data = b"Q: Asked in the file?\nA: Answered in the file."
    given = _chunks(data, "r.txt", {**FOLLOWUP, "question": "Asked by the caller", "answer": "By the caller"})
    assert (given.metadata["question"], given.metadata["answer"]) == ("Asked by the caller", "By the caller")
    for meta in ({"type": "tc_files"}, {"type": "followup_document"}, {}):
        assert "question" not in _chunks(data, "r.txt", meta).metadata


@pytest.mark.parametrize(
    "text",
    [
        "Q: one?\nA: yes\nQ: two?\nA: no",  # a questionnaire, not one response
        "Preamble first.\nQ: late?\nA: yes",  # the question must open the text
        "A: answer first\nQ: then the question?",
        "Q: no answer here?",
        "Q:\nA: empty question",
        "Quarterly reviews: yes.\nAnswers: none.",  # words that only start like a label
    ],
)
def test_texts_that_are_not_one_question_and_answer(text: str) -> None:
    assert split_qa(text) is None
