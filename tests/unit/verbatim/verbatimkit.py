"""Builders the verbatim tests share: a span chunk, a lexical-only service over texts, and a
stage's request context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from evidence.config import Settings
from evidence.rank.context import ProfileParams, RankContext
from evidence.records import Chunk, ChunkKind, SpanType
from evidence.service import EvidenceService


def span(i: int, text: str, kind: SpanType = SpanType.SENTENCE, section: str = "Dosage") -> Chunk:
    """The `i`-th span of document "d", 100 characters after the one before."""
    return Chunk(
        chunk_id=f"s{i}",
        document_id="d",
        kind=ChunkKind.SPAN,
        text=text,
        char_start=100 * i,
        char_end=100 * i + len(text),
        sequence=i,
        section=section,
        span_type=kind,
    )


def placed_span(text: str, seq: int, section: str, doc: str) -> Chunk:
    """The `seq`-th span of document `doc` under `section`, 100 characters after the one before
    (id `doc:seq`): spans whose document order a test reads."""
    return Chunk(
        chunk_id=f"{doc}:{seq}",
        document_id=doc,
        kind=ChunkKind.SPAN,
        text=text,
        char_start=seq * 100,
        char_end=seq * 100 + len(text),
        sequence=seq,
        section=section,
    )


def doc_span(text: str, section: str, doc: str = "d", metadata: dict[str, Any] | None = None) -> Chunk:
    """A sentence span of document `doc` at offset 0, under heading `section` (id: document, text
    and section, so the same text under two headings is two spans)."""
    return Chunk(
        chunk_id=f"{doc}:{text}:{section}",
        document_id=doc,
        kind=ChunkKind.SPAN,
        text=text,
        char_start=0,
        char_end=len(text),
        sequence=0,
        section=section,
        span_type=SpanType.SENTENCE,
        metadata=metadata or {},
    )


def text_service(
    tmp_path_factory: pytest.TempPathFactory, index: str, documents: Mapping[str, str]
) -> EvidenceService:
    """A service whose index `index` holds `documents` (file name → text), indexed without vectors."""
    root = tmp_path_factory.mktemp(index)
    (root / "docs").mkdir()
    for name, text in documents.items():
        (root / "docs" / name).write_text(text)
    service = EvidenceService(Settings(store_dir=root / "store"))
    assert not service.index_paths(index, [root / "docs"], embed=False).failed
    return service


def refusal_row(
    family: str, answerable: bool, profile: str, *, cosine: float, agreement: float
) -> dict[str, Any]:
    """One row as `bench/refusal_rows.py` writes it: a contract question, its evidence holding
    the answer or not, the judgement's inputs recorded."""
    text = "Disputes go to binding arbitration." if answerable else "Notices are sent by email."
    return {
        "family": family,
        "question": "Do disputes go to binding arbitration?",
        "answerable": answerable,
        "found": answerable,
        "profile": profile,
        "path": "HYBRID_FACTSPAN" if profile == "verbatim" else "hybrid",
        "can_answer": True,
        "judged": {
            "texts": [text],
            "groups": [["disput"], ["bind"], ["arbitr"]],
            "cosine": cosine,
            "given": [],
            "bodies": [text],
            "agreement": agreement,
        },
    }


def rank_context(backend: Any, index: str, question: str, vector: Any = None) -> RankContext:
    """What a stage reads of a request asking `question` of `index` (no filters, no reranker)."""
    return RankContext(
        index=index,
        query=question,
        query_vector=vector,
        criterion_question=None,
        criterion_hash=None,
        params=ProfileParams(),
        filters=None,
        explain=False,
        backend=backend,
        reranker=None,
    )
