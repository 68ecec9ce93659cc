"""A later long span placed as its best verbatim part (`CascadeConfig.trim_spans_over`,
`spans.best_sub_span`, `cascade.trim_spans`): more spans fit the first characters, and every part
is still the document's own characters at its own offsets."""

from __future__ import annotations

import random
from collections.abc import Sequence

from evidence.evaluation.qa import answer_found
from evidence.ingest.spans import trim_offsets
from evidence.plan.verbatim import plan_question
from evidence.records import Chunk, ChunkKind
from evidence.service import EvidenceService
from evidence.verbatim.cascade import (
    HYBRID_FACTSPAN,
    CascadeConfig,
    SpanHit,
    VerbatimCascade,
    trim_spans,
)
from evidence.verbatim.check import verify_spans
from evidence.verbatim.scoring import SpanStats, terms
from evidence.verbatim.spans import _covered, _pieces, best_sub_span

INDEX = "label"
KNOWN = ["lipravex", "ferlostatin calcium", "ferlostatin", "zorvex", "talmopril maleate", "talmopril"]

LONG = (
    "The collector runs in incremental mode by default, interleaving small steps with the program, "
    "and each step traverses part of the heap; the pause multiplier controls how long the collector "
    "waits before starting a new cycle, and larger values make it less aggressive."
)


def concepts(question: str, texts: list[str]) -> list[tuple[float, frozenset[str]]]:
    groups = [(t,) for t in dict.fromkeys(terms(question))]
    return SpanStats(texts).concepts(groups)


def test_a_long_span_is_cut_to_the_clause_holding_the_question_concepts() -> None:
    c = concepts("pause multiplier", [LONG, "Another span about memory."])
    cut = best_sub_span(LONG, c, 120)
    assert cut is not None
    a, b = cut
    part = LONG[a:b]
    assert part == "the pause multiplier controls how long the collector waits before starting a new cycle,"
    assert b - a <= 120 and not part[0].isspace() and not part[-1].isspace()


def test_the_longest_part_within_the_bound_that_keeps_every_concept_wins() -> None:
    c = concepts("pause multiplier", [LONG])
    a, b = best_sub_span(LONG, c, 200) or (0, 0)
    assert "pause multiplier" in LONG[a:b] and 120 < b - a <= 200


def test_a_span_stays_whole_when_short_or_with_nothing_to_choose_its_part_by() -> None:
    assert best_sub_span(LONG, concepts("pause multiplier", [LONG]), len(LONG)) is None
    assert best_sub_span(LONG, concepts("pause multiplier", [LONG]), 0) is None
    # none of the question's concepts in the span
    assert best_sub_span(LONG, concepts("checksum algorithm", [LONG, "checksum algorithm"]), 80) is None
    # its concepts lie further apart than the bound: no part keeps them all
    assert best_sub_span(LONG, concepts("incremental aggressive", [LONG]), 120) is None
    # no place to cut (a table row, an identifier list)
    row = "| " + " | ".join(f"col{i} pause" for i in range(30)) + " |"
    assert best_sub_span(row, concepts("pause", [row]), 50) is None


def pairs_best_sub_span(
    text: str, concepts: Sequence[tuple[float, frozenset[str]]], max_chars: int
) -> tuple[int, int] | None:
    """`best_sub_span` as it was written first: every (start, end) run of pieces analysed
    (quadratic in a span's clauses). The reference the linear pass must equal."""
    if max_chars <= 0 or len(text) <= max_chars:
        return None
    whole = _covered(text, concepts)
    if not whole:
        return None
    cuts = _pieces(text)
    best: tuple[int, int] | None = None
    for i, a in enumerate(cuts):
        for b in cuts[i + 1 :]:
            s, e = trim_offsets(text, a, b)
            if e - s > max_chars:
                break
            longer = best is None or e - s > best[1] - best[0]
            if e > s and longer and _covered(text[s:e], concepts) == whole:
                best = (s, e)
    return best


_WORDS = (
    "pause multiplier collector heap step cycle dose renal tablet daily the of and 3.5 don't it's".split()
)
_JOINS = [", ", "; ", ": ", ". ", "! ", "? ", "\n", " ", "  ", ",\n", ". \n", " , ", ".", ",", "\t"]


def _clauses(rng: random.Random, n: int) -> str:
    return "".join(
        " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 9))) + rng.choice(_JOINS) for _ in range(n)
    )


def test_the_linear_pass_gives_the_pairs_pass_answer_on_a_long_many_clause_span() -> None:
    rng = random.Random(45)
    long = _clauses(rng, 400)  # ~12,000 characters, ~400 places to cut
    assert len(_pieces(long)) > 300
    for question in ("pause multiplier", "renal dose", "heap cycle tablet", "don't step", "3.5 daily"):
        c = concepts(question, [long, "Another span about memory."])
        for bound in (40, 120, 300, 600, 2000):
            assert best_sub_span(long, c, bound) == pairs_best_sub_span(long, c, bound), (question, bound)


def test_the_linear_pass_gives_the_pairs_pass_answer_on_random_spans() -> None:
    rng = random.Random(7)
    found = 0
    for _ in range(600):
        text = (" " * rng.randint(0, 2)) + _clauses(rng, rng.randint(1, 25)) + (" " * rng.randint(0, 2))
        question = " ".join(rng.sample(_WORDS, rng.randint(1, 4)))
        c = concepts(question, [text, "pause step dose"])
        bound = rng.randint(0, len(text) + 5)
        got = best_sub_span(text, c, bound)
        assert got == pairs_best_sub_span(text, c, bound), (text, question, bound)
        found += got is not None
    assert found > 100  # most draws have a part to choose


def _span(text: str, start: int, seq: int) -> Chunk:
    return Chunk(f"doc:s{seq}", "doc", ChunkKind.SPAN, text, start, start + len(text), seq)


def test_trim_spans_keeps_the_top_span_whole_and_the_parts_verbatim() -> None:
    # A document whose second-ranked span is a long paragraph: with it whole the third span's
    # answer starts past 600 characters; placed as its part, within them.
    first_text = "The pause multiplier is set with collectgarbage, as is the step size. " * 5
    tail = ", which is read by every collector cycle" * 8 + "."
    doc = f"{first_text} {LONG}{tail} The default pause is 200."
    first = _span(first_text.strip(), 0, 1)
    at = doc.index(LONG)
    second = _span(doc[at : at + len(LONG) + len(tail)], at, 2)
    at = doc.index("The default pause")
    third = _span(doc[at:], at, 3)
    hits = [SpanHit(c, 1.0 - i / 10, HYBRID_FACTSPAN) for i, c in enumerate((first, second, third))]
    c = concepts("pause multiplier", [h.chunk.text for h in hits])
    assert not answer_found([h.chunk.text for h in hits], ["The default pause is 200."])
    out = trim_spans(hits, c, 150, keep=first)
    assert out[0] == hits[0] and out[2] == hits[2]  # the top span, and a short one, unchanged
    part = out[1].chunk
    assert part.chunk_id.startswith("doc:s2@") and len(part.text) <= 150
    assert part.text == doc[part.char_start : part.char_end]  # the verbatim contract
    assert answer_found([h.chunk.text for h in out], ["The default pause is 200."])
    # the top-ranked span is never cut, however long
    assert trim_spans(hits, c, 150, keep=second)[1] == hits[1]


def test_the_cascade_places_later_long_spans_as_parts_and_refuses_alike(
    label_service: EvidenceService,
) -> None:
    question = "What are the warnings about liver enzymes for Lipravex?"
    plan = plan_question(question, known_entities=KNOWN)
    backend = label_service.backend
    whole = VerbatimCascade(CascadeConfig(trim_spans_over=0)).run(backend, INDEX, question, plan)
    cut = VerbatimCascade(CascadeConfig(trim_spans_over=80)).run(backend, INDEX, question, plan)
    assert cut.path_used == whole.path_used and cut.grounding == whole.grounding
    assert len(cut.hits) == len(whole.hits)
    assert cut.hits[0] == whole.hits[0]  # the top-ranked span whole (98 characters)
    parts = [h for h in cut.hits if "@" in h.chunk.chunk_id]
    assert parts and all(len(h.chunk.text) <= 80 for h in parts)
    for h, w in zip(cut.hits, whole.hits, strict=True):
        assert h.chunk.chunk_id.split("@")[0] == w.chunk.chunk_id
        assert h.chunk.text in w.chunk.text and h.score == w.score
    # every part is the document's own text at its offsets (raises otherwise)
    assert verify_spans(label_service.backend, INDEX, [h.chunk for h in cut.hits]) == len(cut.hits)


def test_the_setting_turns_it_on_for_the_verbatim_profile(label_service: EvidenceService) -> None:
    from evidence.config import Settings
    from evidence.model import RetrieveRequest

    query = "What are the warnings about liver enzymes for Lipravex?"
    question = RetrieveRequest(query=query, profile="verbatim")
    store = label_service.settings.store_dir
    off = EvidenceService(Settings(store_dir=store, verbatim_trim_spans_over=0)).retrieve(INDEX, question)
    on = EvidenceService(Settings(store_dir=store, verbatim_trim_spans_over=80)).retrieve(INDEX, question)
    assert not any("@" in h.chunk_id for h in off.hits)
    parts = [h for h in on.hits if "@" in h.chunk_id]
    assert parts and all(len(h.text) <= 80 for h in parts)
    # its citation is the part's own range (the response passed `verify_spans` to leave)
    assert all(h.citation.char_end - h.citation.char_start == len(h.text) for h in on.hits)
    assert on.hits[0].text == off.hits[0].text
