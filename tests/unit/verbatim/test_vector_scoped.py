"""VECTOR_SCOPED (seed 002's vector path) on its own: a passage answers only when its cosine
clears the floor AND stands out from the scope's other passages by the margin. Every passage
of one product's document mentions the product, as the question does, so absolute cosines run
high for all of them; without the margin the path would answer from whichever came first."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from evidence.records import Chunk, ChunkKind, SearchHit
from evidence.verbatim.cascade import VECTOR_SCOPED, CascadeConfig, VerbatimCascade
from evidence.verbatim.cascade_paths import CascadePaths
from evidence.verbatim.scoring import terms

TEXT = "Backups are encrypted with AES-256. Keys rotate yearly. Staff train every quarter."


def _span(i: int, start: int, end: int) -> Chunk:
    return Chunk(f"s{i}", "doc", ChunkKind.SPAN, TEXT[start:end], start, end, i)


SPANS = [_span(0, 0, 35), _span(1, 36, 54), _span(2, 55, len(TEXT))]
PASSAGE = Chunk("p0", "doc", ChunkKind.PASSAGE, TEXT, 0, len(TEXT), 0)


class _Backend:
    def __init__(self, cosines: Sequence[float]) -> None:
        self.cosines = cosines

    def dense(
        self, index: str, vector: Any, k: int, filters: Any = None, kind: Any = None
    ) -> list[SearchHit]:
        others = [
            Chunk(f"p{i}", "doc", ChunkKind.PASSAGE, "other", 0, 5, i) for i in range(1, len(self.cosines))
        ]
        return [SearchHit(c, s, dense=s) for c, s in zip([PASSAGE, *others], self.cosines, strict=True)]

    def lookup(self, index: str, filters: Any, limit: int, kind: Any = None) -> list[SearchHit]:
        return [SearchHit(c, 1.0) for c in SPANS]


def _path(cosines: Sequence[float]) -> tuple[list[Any], str]:
    question = "How are backups encrypted?"
    state = CascadePaths(
        VerbatimCascade(CascadeConfig()),
        backend=_Backend(cosines),  # type: ignore[arg-type]
        index="i",
        question=question,
        plan=SimpleNamespace(search_phrases=[]),
        scope={"document_id": ["doc"]},
        q_groups=[(t,) for t in terms(question)],
        query_vector=[1.0, 0.0],
    )
    return state.vector_scoped()


def test_a_passage_that_stands_out_answers_with_its_matching_span() -> None:
    hits, why = _path([0.9, 0.5, 0.5, 0.5])  # margin over the mean: 0.3
    assert [h.chunk.chunk_id for h in hits] == ["s0"] and all(h.path == VECTOR_SCOPED for h in hits), why


def test_a_high_cosine_that_does_not_stand_out_is_not_an_answer() -> None:
    hits, why = _path([0.8, 0.76, 0.75, 0.74])  # above the floor, margin 0.04 < 0.15
    assert hits == [] and "margin" in why


def test_a_cosine_under_the_floor_is_not_an_answer() -> None:
    hits, why = _path([0.45, 0.1, 0.1])
    assert hits == [] and "best cosine 0.45" in why
