"""Seed 003's three TDD tests and the generic stages (limit, rerank, cutoff, dedup, caps, MMR, top-k)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from evidence.errors import ConfigurationError, RequestValidationError
from evidence.rank.candidate import Candidate
from evidence.rank.context import ProfileParams
from evidence.rank.guardrail import Guardrail
from evidence.rank.pipeline import Profile
from evidence.rank.rerank import RerankError
from evidence.rank.stages import (
    MMR,
    CandidateLimit,
    DedupContent,
    FollowupDocumentBoost,
    FollowupExtraction,
    MinSimilarity,
    PerDocumentCap,
    RelevancyCutoff,
    Rerank,
    TopK,
)
from evidence.records import Chunk, ChunkKind
from tests.unit.rank.rankkit import (
    FailingReranker,
    ScriptedReranker,
    cand,
    chunk,
    ctx,
    new_backend,
    vec,
)

SEED003 = Profile(
    name="seed003",
    description="similarity-ordered matches, threshold, top-k, budget",
    defaults=ProfileParams(rerank_cutoff=0.0),
    stages=(Guardrail(),),
)


class Matches:
    """A first stage returning matches with a dense similarity, sorted desc (seed 003 step 1)."""

    name = "first_stage"

    def __init__(self, *pairs: tuple[str, float]) -> None:
        self.cands = [Candidate(chunk(f"m{i}", t), s, s, {"dense": s}) for i, (t, s) in enumerate(pairs)]

    def run(self, candidates: object, c: object) -> list[Candidate]:
        return sorted(self.cands, key=lambda x: (-x.score, x.chunk_id))


def run003(first: Matches, **overrides: object) -> list[str]:
    profile = replace(SEED003, stages=(first, *SEED003.stages))
    out = profile.run(ctx(None, params=SEED003.params(dict(overrides))))
    return [c.chunk.text for c in out.hits]


def test_reference_threshold_filters_low_similarity() -> None:
    assert run003(Matches(("good", 0.9), ("bad", 0.1)), top_k=2, min_similarity=0.5) == ["good"]


def test_min_similarity_floor_is_inclusive() -> None:
    """Seed 003: matches whose similarity is at or above the threshold are kept."""
    first = Matches(("at", 0.5), ("above", 0.75), ("below", 0.4999))
    assert run003(first, top_k=3, min_similarity=0.5) == ["above", "at"]


def test_reference_budget_limits_included_matches() -> None:
    assert run003(Matches(("12345", 0.9), ("12345", 0.8)), top_k=3, max_chars=5) == ["12345"]


def test_defaults_preserve_existing_selection() -> None:
    first = Matches(("low", 0.2), ("high", 0.9), ("mid", 0.5))
    assert run003(first, top_k=2) == ["high", "mid"]
    assert run003(first, top_k=2, min_similarity=None, max_chars=0) == ["high", "mid"]


def test_budget_stops_at_first_overflow_and_never_cuts() -> None:
    first = Matches(("aaaa", 0.9), ("bbbbbbbb", 0.8), ("c", 0.7))
    # "c" would fit after skipping "bbbbbbbb", but the seed stops at the first overflow.
    assert run003(first, top_k=3, max_chars=6) == ["aaaa"]
    assert run003(first, top_k=3, max_chars=3) == []


# --- min_similarity without a first-stage dense score ----------------------------------------


def test_min_similarity_uses_stored_vectors_or_keeps(tmp_path: Path) -> None:
    near, far = chunk("near", "alpha"), chunk("far", "omega")
    backend = new_backend(tmp_path, [near, far])
    q = vec("alpha")
    lexical_only = [cand(near, 1.0), cand(far, 0.9), cand(chunk("ghost", "not stored"), 0.8)]
    c = ctx(backend, query_vector=q, min_similarity=0.99, explain=True)
    out = MinSimilarity().run(lexical_only, c)
    assert [x.chunk_id for x in out] == ["near", "ghost"]
    assert out[0].scores["dense"] == pytest.approx(1.0, abs=1e-5)
    assert any("no dense similarity" in n for n in out[1].notes)
    assert c.trace.detail["dropped"][0]["chunk_id"] == "far"
    # no query vector: nothing can be measured, everything stays
    c2 = ctx(backend, query_vector=None, min_similarity=0.99)
    assert len(MinSimilarity().run(lexical_only, c2)) == 3


# --- candidate limit, rerank, cutoff ----------------------------------------------------------


def test_candidate_limit_uses_first_stage_score() -> None:
    cands = [
        Candidate(chunk("a"), score=0.9, first_stage_score=0.1),
        Candidate(chunk("b"), score=0.1, first_stage_score=0.9),
        Candidate(chunk("c"), score=0.5, first_stage_score=0.5),
    ]
    out = CandidateLimit().run(cands, ctx(None, rerank_k=2))
    assert [c.chunk_id for c in out] == ["b", "c"]


def test_rerank_rescored_and_sorted() -> None:
    cands = [cand(chunk(x, x), 0.1) for x in "abc"]
    rr = ScriptedReranker({"a": 0.2, "b": 0.9, "c": 0.5})
    c = ctx(None, reranker=rr, query="q", criterion="crit")
    out = Rerank().run(cands, c)
    assert [(x.chunk_id, x.score) for x in out] == [("b", 0.9), ("c", 0.5), ("a", 0.2)]
    assert out[0].scores["fused"] == 0.1 and out[0].scores["rerank"] == 0.9
    assert rr.calls[0][0] == "q" and c.trace.reranked
    Rerank(use_criterion=True).run(cands, c)
    assert rr.calls[1][0] == "crit"


@pytest.mark.parametrize("reason", ["timeout", "throttled", "unavailable"])
def test_rerank_failure_keeps_first_stage_order(reason: str) -> None:
    cands = [cand(chunk(x), s) for x, s in (("a", 0.3), ("b", 0.2), ("c", 0.1))]
    c = ctx(None, reranker=FailingReranker(reason))
    out = Rerank().run(cands, c)
    assert out == cands
    assert c.trace.degraded == [f"rerank:{reason}"] and not c.trace.reranked
    # and the cutoff, which only acts on reranker scores, then cuts nothing
    assert RelevancyCutoff().run(out, ctx(None, rerank_cutoff=0.5)) == cands


def test_rerank_drops_what_the_reranker_did_not_return() -> None:
    class TopOne(ScriptedReranker):
        def rerank(self, query, texts, top_n=None):
            return super().rerank(query, texts, 1)

    cands = [cand(chunk(x, x), 0.1) for x in "ab"]
    out = Rerank().run(cands, ctx(None, reranker=TopOne({"a": 0.1, "b": 0.8})))
    assert [x.chunk_id for x in out] == ["b"]


def test_cutoff_applies_only_to_reranker_scores() -> None:
    cands = [
        cand(chunk("hi"), 0.5).with_score("rerank", 0.5),
        cand(chunk("lo"), 0.05).with_score("rerank", 0.05),
        cand(chunk("edge"), 0.1).with_score("rerank", 0.1),
        cand(chunk("fused"), 0.016),
    ]
    out = RelevancyCutoff().run(cands, ctx(None, rerank_cutoff=0.1))
    assert [x.chunk_id for x in out] == ["hi", "edge", "fused"]


def test_vrm_cutoff_without_a_reranker_reads_a_calibrated_relevance(tmp_path: Path) -> None:
    """Issue 25 item 6: with no reranker, vrm's cutoff applies to `confidence.hit_relevance`
    (here the coverage-only model: the test index's embedder has no fitted cosine model), so an
    off-topic hit no longer pads the list; a follow-up document is boosted as in seed 001."""
    from evidence.rank.confidence import LEXICAL_CALIBRATION

    chunks = [
        chunk("on", "Customer data is encrypted at rest with AES-256."),
        chunk("off", "The office canteen opens at noon."),
        chunk("fu", "Backups are encrypted.", type="followup_document"),
    ]
    backend = new_backend(tmp_path, chunks)
    cands = [cand(c, 0.5 - 0.1 * i) for i, c in enumerate(chunks)]
    q = "Is customer data encrypted at rest?"
    # The follow-up document has 1 of the query's 4 terms: 0.122 raw, under a 0.13 cutoff, and
    # 0.140 boosted by seed 001's 1.15: lifted over it, as seed 001 lifts it over a rerank cutoff.
    raw = LEXICAL_CALIBRATION.probability(0.0, 0.25)
    assert raw < 0.13 <= raw * 1.15
    c = ctx(backend, query=q, rerank_cutoff=0.13, followup_boost=1.15)
    out = RelevancyCutoff(calibrated=True).run(cands, c)
    assert [x.chunk_id for x in out] == ["on", "fu"]
    assert out[0].scores["relevance"] == pytest.approx(LEXICAL_CALIBRATION.probability(0.0, 1.0), abs=1e-6)
    assert out[1].scores["relevance"] == pytest.approx(raw * 1.15, abs=1e-6)
    assert c.trace.detail["score"] == "relevance"
    # Reranker scores, when there are any, are what the cutoff reads; the default profile's
    # uncalibrated cutoff still cuts nothing without them.
    assert RelevancyCutoff().run(cands, ctx(backend, query=q, rerank_cutoff=0.1)) == cands
    reranked = [x.with_score("rerank", 0.05) for x in cands]
    assert RelevancyCutoff(calibrated=True).run(reranked, ctx(backend, query=q, rerank_cutoff=0.1)) == []
    backend.close()


# --- dedup, per-document cap, top-k -----------------------------------------------------------


def test_dedup_keeps_best_scored_copy() -> None:
    cands = [cand(chunk("a", "same"), 0.1), cand(chunk("b", "same"), 0.9), cand(chunk("c", "other"), 0.5)]
    out = DedupContent().run(cands, ctx(None))
    assert [x.chunk_id for x in out] == ["b", "c"]


def test_per_document_cap() -> None:
    cands = [cand(chunk(f"c{i}", doc="d1" if i < 3 else "d2"), 1 - i / 10) for i in range(5)]
    assert [x.chunk_id for x in PerDocumentCap().run(cands, ctx(None, max_chunks_per_document=2))] == [
        "c0",
        "c1",
        "c3",
        "c4",
    ]
    assert PerDocumentCap().run(cands, ctx(None)) == cands


def test_top_k_is_a_prefix() -> None:
    cands = [cand(chunk(f"c{i}"), 1 - i / 10) for i in range(5)]
    assert TopK().run(cands, ctx(None, top_k=2)) == cands[:2]


# --- MMR -----------------------------------------------------------------------------------------


def test_mmr_demotes_near_duplicates(tmp_path: Path) -> None:
    a = chunk("a", "alpha")
    a2 = chunk("a2", "alpha")  # same text → same vector
    b = chunk("b", "beta")
    backend = new_backend(tmp_path, [a, a2, b])
    cands = [cand(a, 1.0), cand(a2, 0.95), cand(b, 0.5)]
    out = MMR().run(cands, ctx(backend, mmr_lambda=0.5))
    assert [x.chunk_id for x in out] == ["a", "b", "a2"]
    assert all("mmr" in x.scores for x in out) and out[0].score == 1.0
    assert MMR().run(cands, ctx(backend, mmr_lambda=1.0)) == cands
    assert MMR().run(cands, ctx(backend)) == cands
    # deterministic
    assert MMR().run(cands, ctx(backend, mmr_lambda=0.5)) == out


def test_mmr_without_vectors_keeps_relevance_order(tmp_path: Path) -> None:
    backend = new_backend(tmp_path, [chunk("stored")])
    cands = [cand(chunk(f"g{i}"), 1 - i / 10) for i in range(4)]
    out = MMR().run(cands, ctx(backend, mmr_lambda=0.3))
    assert [x.chunk_id for x in out] == [x.chunk_id for x in cands]


def test_mmr_ignores_nan_vectors() -> None:
    class NanBackend:
        def vectors(self, index: str, ids: list[str]) -> dict[str, np.ndarray]:
            return {i: np.full(4, np.nan, dtype=np.float32) for i in ids}

    cands = [cand(chunk(f"g{i}"), 1 - i / 10) for i in range(3)]
    out = MMR().run(cands, ctx(NanBackend(), mmr_lambda=0.3))
    assert [x.chunk_id for x in out] == ["g0", "g1", "g2"]


def test_stage_config_is_validated() -> None:
    with pytest.raises(ConfigurationError):
        FollowupExtraction(lookup_limit=0)
    with pytest.raises(ConfigurationError):
        FollowupDocumentBoost(doc_type="")


def test_rerank_error_is_an_upstream_error() -> None:
    from evidence.errors import UpstreamError

    assert issubclass(RerankError, UpstreamError)


def test_min_similarity_zero_is_off_even_for_negative_cosines() -> None:
    # seed 003: a threshold of 0.0 means off; a negative cosine is still a match then
    first = Matches(("close", 0.4), ("opposite", -0.3), ("orthogonal", 0.0))
    assert run003(first, top_k=5, min_similarity=0.0) == ["close", "orthogonal", "opposite"]
    assert run003(first, top_k=5, min_similarity=0.1) == ["close"]
    # A negative floor is outside the one range (0-1) and refused, naming the knob.
    with pytest.raises(RequestValidationError, match="min_similarity"):
        run003(first, top_k=5, min_similarity=-0.5)


# --- collapse_overlaps (issue 13, item 7) ---------------------------------------------------


POLICY = " ".join(
    f"Sentence {i} says the backup key number {i} rotates every {i + 2} days." for i in range(60)
)


def _windows() -> list[Chunk]:
    """Real passage windows of one document: neighbours share `overlap` tokens of text."""
    from evidence.ingest import chunk_document, parse_text

    doc = parse_text(POLICY, filename="policy.txt")
    chunks = chunk_document(doc, document_id="policy", source="policy.txt", metadata={}, passage_tokens=64)
    passages = [c for c in chunks.chunks if c.kind is ChunkKind.PASSAGE]
    assert len(passages) >= 4 and passages[0].char_end > passages[1].char_start  # they overlap
    return passages


def test_collapse_overlaps_merges_neighbouring_windows_into_the_better_hit() -> None:
    from evidence.rank.stages import CollapseOverlaps

    w = _windows()
    other = chunk("other", "another document", doc="elsewhere")
    cands = [cand(w[1], 0.9), cand(other, 0.8), cand(w[0], 0.7), cand(w[3], 0.6)]
    c = ctx(None, explain=True)
    out = CollapseOverlaps().run(cands, c)
    assert [x.chunk_id for x in out] == [w[1].chunk_id, "other", w[3].chunk_id]
    merged = out[0]
    assert merged.score == 0.9 and merged.scores == cands[0].scores
    assert (merged.chunk.char_start, merged.chunk.char_end) == (w[0].char_start, w[1].char_end)
    assert merged.chunk.text == POLICY[w[0].char_start : w[1].char_end]  # no sentence twice
    assert out[2].chunk == w[3]  # w[3] does not overlap w[0..1]: untouched
    assert c.trace.detail["merged"] == 1
    assert c.trace.detail["dropped"] == [
        {
            "chunk_id": w[0].chunk_id,
            "reason": f"overlaps {w[1].chunk_id} of the same document: merged into it",
        }
    ]


def test_collapse_overlaps_joins_two_hits_a_third_window_bridges() -> None:
    from evidence.rank.stages import CollapseOverlaps

    w = _windows()
    if w[0].char_end > w[2].char_start:
        pytest.skip("windows 0 and 2 overlap directly")  # pragma: no cover - 64-token windows do not
    out = CollapseOverlaps().run([cand(w[0], 0.9), cand(w[2], 0.8), cand(w[1], 0.7)], ctx(None))
    assert [x.chunk_id for x in out] == [w[0].chunk_id]
    assert (out[0].chunk.char_start, out[0].chunk.char_end) == (w[0].char_start, w[2].char_end)


def test_collapse_overlaps_leaves_spans_other_documents_and_empty_input_alone() -> None:
    from evidence.rank.stages import CollapseOverlaps

    w = _windows()
    span = replace(w[0], chunk_id="span", kind=ChunkKind.SPAN)
    moved = replace(w[0], chunk_id="copy", document_id="another")
    cands = [cand(w[0], 0.9), cand(span, 0.8), cand(moved, 0.7)]
    assert CollapseOverlaps().run(cands, ctx(None)) == cands
    assert CollapseOverlaps().run([], ctx(None)) == []


def test_collapse_overlaps_never_grows_a_hit_past_its_bound() -> None:
    """Issue 22: merging without a bound returned hits of 24,630 characters. Every window of a long
    document matching: no hit exceeds the bound, no text is repeated, every hit is a slice."""
    from evidence.rank.stages import CollapseOverlaps

    w = _windows()
    bound = len(w[0].text) + len(w[1].text) // 2
    out = CollapseOverlaps(max_chars=bound).run([cand(x, 1.0 - i / 100) for i, x in enumerate(w)], ctx(None))
    assert all(len(x.chunk.text) <= bound for x in out)
    assert all(POLICY[x.chunk.char_start : x.chunk.char_end] == x.chunk.text for x in out)
    covered = sorted((x.chunk.char_start, x.chunk.char_end) for x in out)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(covered))  # nothing twice
    assert covered[0][0] == w[0].char_start and covered[-1][1] == w[-1].char_end  # nothing lost
    with pytest.raises(ConfigurationError):
        CollapseOverlaps(max_chars=0)


_PAD = " ".join(f"Padding sentence number {i} is about something else entirely." for i in range(12))


def _slice_of(out: Candidate, given: Candidate) -> bool:
    start = out.chunk.char_start - given.chunk.char_start
    return given.chunk.text[start : start + len(out.chunk.text)] == out.chunk.text


def test_focus_cuts_a_later_hit_to_its_best_run_and_keeps_its_coverage() -> None:
    """Every hit after the first is cut to its best run of sentences within `window` characters,
    by default about two sentences (the rule before issue 22's fit kept 700 characters); the
    second within `second_window`."""
    from evidence.rank.confidence import term_coverage
    from evidence.rank.stages import FocusHits

    text = f"The service stores data in three regions. {_PAD} Backups are kept for 35 days. {_PAD}"
    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.9)
    c = cand(chunk("p", text), 0.5)
    query = "How long are backups kept?"
    out = FocusHits(fill=None, min_chars=10, second_window=None).run([first, c], ctx(None, query=query))
    got = out[1].chunk.text
    assert got.startswith("Backups are kept for 35 days.") and len(got) <= 200 and got.endswith(".")
    # By default the second hit's run may run to 400 characters (`second_window`).
    got = FocusHits(fill=None, min_chars=10).run([first, c], ctx(None, query=query))[1].chunk.text
    assert got.startswith("Backups are kept for 35 days.") and 200 < len(got) <= 400
    assert _slice_of(out[1], c)
    assert out[1].score == 0.5
    assert out[1].scores["coverage"] == term_coverage(query, text)
    # A short passage is left whole; so is a one-sentence one.
    short = cand(chunk("s", "Nothing here. Backups are kept for 35 days."), 0.4)
    assert FocusHits(fill=None).run([first, short], ctx(None, query=query))[1].chunk == short.chunk
    one = cand(chunk("o", "Backups " + "are kept, " * 60 + "for 35 days."), 0.4)
    assert FocusHits(fill=None, min_chars=10).run([first, one], ctx(None, query=query))[1].chunk == one.chunk


def test_focus_run_counts_each_question_word_once_across_its_sentences() -> None:
    """The best run holds most of the question's words across its sentences, not the single
    sentence with most of them: the answer is often the sentence next to the question's words.
    (The best-sentence rule started at "Keys rotate often.", with more of them.)"""
    from evidence.rank.stages import FocusHits

    answer = "Backups are encrypted with AES-256. Their keys rotate every 90 days."
    text = f"Keys rotate often. {_PAD} {answer} {_PAD}"
    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.9)
    c = cand(chunk("p", text), 0.5)
    query = "Are backups encrypted, and how often do their keys rotate?"
    out = FocusHits(fill=None, min_chars=10, window=200).run([first, c], ctx(None, query=query))
    assert out[1].chunk.text.startswith(answer)


def test_focus_gives_the_first_hit_a_lead_and_a_longer_window() -> None:
    """The first hit (most answers are in it) starts at a sentence up to `lead` characters before
    its best run and runs on over whole sentences to `first_window` characters."""
    from evidence.rank.stages import FocusHits

    filler = " ".join(f"Filler sentence number {i} says nothing much." for i in range(30))
    before = "Retention is set per plan. "
    text = f"{filler} {before}Backups are kept for 35 days and then deleted. {filler}"
    c = cand(chunk("p", text), 0.5)
    query = "How long are backups kept?"
    out = FocusHits(fill=None, min_chars=10, window=200, first_window=400, lead=100).run(
        [c], ctx(None, query=query)
    )
    got = out[0].chunk
    assert got.text.startswith("Filler sentence number 29 says nothing much. " + before)
    assert 300 < len(got.text) <= 400 and got.text.endswith(".")
    assert _slice_of(out[0], c)
    # Only whole sentences within the lead: the one 72 characters back is not within 60.
    out = FocusHits(fill=None, min_chars=10, window=200, first_window=400, lead=60).run(
        [c], ctx(None, query=query)
    )
    assert out[0].chunk.text.startswith(before + "Backups are kept")
    # No lead: the first hit starts at its best run.
    out = FocusHits(fill=None, min_chars=10, window=200, first_window=400, lead=0).run(
        [c], ctx(None, query=query)
    )
    assert out[0].chunk.text.startswith("Backups are kept for 35 days")
    with pytest.raises(ConfigurationError):
        FocusHits(window=0)
    with pytest.raises(ConfigurationError):
        FocusHits(lead=-1)


def test_focus_keeps_a_list_marker_with_its_item() -> None:
    """A list marker the splitter cut off ("a." before "No trademark…") opens the item's
    sentence, so a run starting at the item holds the whole item; a lower-case marker after a
    sentence ("… document. b. Nothing…") starts a sentence of its own."""
    from evidence.rank.dedup import _sentences

    text = (
        "4. Limitations.\n\n a. No trademark rights are waived by this document."
        " b. Nothing else is. (ii) A third."
    )
    got = [text[a:b] for a, b in _sentences(text)]
    assert got == [
        "4. Limitations.",
        "a. No trademark rights are waived by this document.",
        "b. Nothing else is.",
        "(ii) A third.",
    ]
    # A marker closing the passage stays with the sentence before it.
    assert [t[a:b] for t in ["It ends here. 8."] for a, b in _sentences(t)] == ["It ends here. 8."]
    # "e.g." and an initial are not list markers of the next sentence's item.
    assert [t[a:b] for t in ["As a rule, e.g. Foo bar."] for a, b in _sentences(t)] == [
        "As a rule, e.g.",
        "Foo bar.",
    ]


def test_focus_second_hit_window_and_answer_type_bonus() -> None:
    """The second hit's run may be longer than the later hits' (`second_window`); a sentence that
    states the kind of value the question expects (a duration for "how long") raises its run
    by `type_weight` over a run that only repeats the question's words."""
    from evidence.rank.stages import FocusHits
    from evidence.verbatim.answer_types import answer_types

    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.9)
    answer = "Backups are deleted after 35 days."
    text = f"{_PAD} Backups of the service are described in the backup policy. {answer} {_PAD}"
    c = cand(chunk("p", text), 0.5)
    query = "How long are backups of the service kept?"
    plain = FocusHits(fill=None, min_chars=10, window=70, second_window=70).run(
        [first, c], ctx(None, query=query)
    )
    assert answer not in plain[1].chunk.text  # the run that repeats the question's words
    kinds = answer_types().expected
    typed = FocusHits(fill=None, min_chars=10, window=70, second_window=70, type_weight=10.0, expected=kinds)
    assert typed.run([first, c], ctx(None, query=query))[1].chunk.text.startswith(answer)
    # Without the kinds (the stage alone, below the lexicon's layer) no run is raised.
    alone = FocusHits(fill=None, min_chars=10, window=70, second_window=70, type_weight=10.0)
    assert answer not in alone.run([first, c], ctx(None, query=query))[1].chunk.text
    longer = FocusHits(fill=None, min_chars=10, window=70, second_window=150).run(
        [first, c], ctx(None, query=query)
    )
    assert answer in longer[1].chunk.text and _slice_of(longer[1], c)
    # Later hits keep `window`.
    third = cand(chunk("q", text.replace("service", "system"), doc="third"), 0.4)
    out = FocusHits(fill=None, min_chars=10, window=70, second_window=150).run(
        [first, c, third], ctx(None, query=query)
    )
    assert len(out[2].chunk.text) <= 70 < len(out[1].chunk.text)
    with pytest.raises(ConfigurationError):
        FocusHits(second_window=0)
    with pytest.raises(ConfigurationError):
        FocusHits(type_weight=-1.0)


def test_focus_counts_a_whitespace_run_once_when_sizing_runs() -> None:
    """Indented plain text (a licence's clauses) spends characters on indentation that a reader
    and the QA budget (whitespace collapsed) do not count: with `collapse_space` a run's size is
    counted that way, so an indented run holds as much text as prose would."""
    import re

    from evidence.rank.dedup import _Reading
    from evidence.rank.stages import FocusHits

    gap = "\n" + " " * 40
    body = gap.join(
        ["Backups are kept for 35 days.", "Nothing else is said in here.", "Backups are encrypted."]
    )
    text = f"{_PAD}{gap}{body}{gap}{_PAD}"
    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.9)
    c = cand(chunk("p", text), 0.5)
    query = "Are backups kept and encrypted?"
    spaced = FocusHits(fill=None, min_chars=10, window=120, second_window=120, collapse_space=True)
    out = spaced.run([first, c], ctx(None, query=query))[1]
    assert out.chunk.text == body and _slice_of(out, c)
    raw = FocusHits(fill=None, min_chars=10, window=120, second_window=120, collapse_space=False)
    got = raw.run([first, c], ctx(None, query=query))[1].chunk.text
    assert got.startswith("Backups are kept") and "encrypted" not in got
    # Every offset counts what a whitespace-collapsing reader has read before it.
    for sample in (text, "ab  c\n\n d ", "  lead and trail  ", ""):
        at = _Reading(sample)
        assert [at.count(x) for x in range(len(sample) + 1)] == [
            len(re.sub(r"\s+", " ", sample[:x])) for x in range(len(sample) + 1)
        ]


def test_focus_reads_a_passage_once_and_its_cached_reading_changes_nothing() -> None:
    """A passage's sentences and terms are kept by its text (`_sentence_terms`): a second run over
    the same hits reads them from the cache and cuts them exactly as the first, and what is kept
    is what the analyzer reads in each sentence."""
    from evidence.rank.dedup import _sentence_terms, _sentences
    from evidence.rank.stages import FocusHits
    from evidence.search.analysis import get_analyzer

    text = f"The service stores data in three regions. {_PAD} Backups are kept for 35 days. {_PAD}"
    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.9)
    c = cand(chunk("p", text), 0.5)
    query = "How long are backups kept?"
    _sentence_terms.cache_clear()
    once = FocusHits(fill=None, min_chars=10).run([first, c], ctx(None, query=query))
    misses = _sentence_terms.cache_info().misses
    again = FocusHits(fill=None, min_chars=10).run([first, c], ctx(None, query=query))
    assert _sentence_terms.cache_info().misses == misses and _sentence_terms.cache_info().hits >= 2
    assert again == once
    spans, terms = _sentence_terms(text)
    assert list(spans) == _sentences(text)
    assert terms == tuple(tuple(get_analyzer().analyze(text[a:b])) for a, b in spans)


def test_focus_fill_grows_runs_over_whole_sentences_to_the_reader_budget() -> None:
    """When the focused hits come to less than `fill` characters (a question scoped to one short
    document gets 2-4 hits), the runs grow back over whole sentences of their own passages, first
    hit first: on after the run while the passage lasts, then back before it. Never past the
    budget, never out of the passage; with many hits (over the budget already) nothing changes;
    a caller's `max_chars` caps the fill, counted as the guardrail counts (every character)."""
    from evidence.rank.stages import FocusHits

    filler = " ".join(f"Filler sentence number {i} says nothing much." for i in range(40))
    answer = "The retention is then extended to 90 days for audits."
    text = f"Backups are kept for 35 days. {filler[:600]} {answer} {filler}"
    c = cand(chunk("p", text), 0.5)
    other = cand(chunk("q", f"Backups are kept nightly. {filler}", doc="other"), 0.4)
    query = "How long are backups kept?"

    def focus(fill: int | None) -> FocusHits:
        return FocusHits(fill=fill, min_chars=10, window=100, first_window=300, lead=0)

    plain = focus(None).run([c, other], ctx(None, query=query))
    assert answer not in plain[0].chunk.text and plain[0].chunk.text.startswith("Backups are kept")
    filled = focus(1200).run([c, other], ctx(None, query=query))
    first = filled[0].chunk.text
    assert first.startswith("Backups are kept") and answer in first and _slice_of(filled[0], c)
    assert len(first) + 1 + len(filled[1].chunk.text) <= 1200
    assert filled[1].chunk.text == plain[1].chunk.text  # the first hit took the whole slack
    assert sum(len(h.chunk.text) for h in filled) > 1100  # a sentence (~45 characters) short at most
    # The run at its passage's end grows back before itself.
    tail = cand(chunk("t", f"{filler} {answer} Backups are kept for 35 days."), 0.5)
    back = focus(600).run([tail], ctx(None, query=query))[0]
    assert back.chunk.text.endswith("kept for 35 days.") and answer in back.chunk.text
    assert 500 < len(back.chunk.text) <= 600 and _slice_of(back, tail)
    # Over the budget already (ten runs of ~100 characters and one of ~300): nothing changes.
    many = [cand(chunk(f"m{i}", text, doc=f"d{i}"), 0.5 - i / 100) for i in range(10)]
    assert [h.chunk for h in focus(1000).run(many, ctx(None, query=query))] == [
        h.chunk for h in focus(None).run(many, ctx(None, query=query))
    ]
    # A caller's max_chars caps it, every character counted.
    capped = focus(5000).run([c, other], ctx(None, query=query, max_chars=900))
    assert sum(len(h.chunk.text) for h in capped) + 1 <= 900
    with pytest.raises(ConfigurationError):
        FocusHits(fill=0)


def test_focus_paraphrase_credit_counts_a_question_term_the_run_lacks() -> None:
    """With a `Paraphrase` and `paraphrase_weight` > 0 (a bench lever, off by default), a question
    term a run lacks adds its similarity to the run's words x its IDF x the weight: a run that
    paraphrases "charge" ("a fee") can outweigh one that repeats more of the question's words."""
    import functools
    from collections.abc import Sequence

    from evidence.rank.stages import FocusHits

    class FeeIsCharge:
        def credit(
            self, query: str, terms: set[str], text: str, spans: Sequence[tuple[int, int]]
        ) -> list[dict[str, float]]:
            return [{"charg": 0.8} if "fee" in text[a:b] and "charg" in terms else {} for a, b in spans]

    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.9)
    answer = "A fee may be asked for copies."
    text = f"{_PAD} You may distribute copies of the work. {answer} {_PAD}"
    c = cand(chunk("p", text), 0.5)
    query = "Can I charge money to distribute copies?"
    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=45, second_window=45)
    plain = sized().run([first, c], ctx(None, query=query))[1].chunk.text
    assert plain.startswith("You may distribute copies")
    credited = sized(paraphrase=FeeIsCharge(), paraphrase_weight=4.0)
    assert credited.run([first, c], ctx(None, query=query))[1].chunk.text.startswith(answer)

    class NeverAsked:
        def credit(
            self, query: str, terms: set[str], text: str, spans: Sequence[tuple[int, int]]
        ) -> list[dict[str, float]]:
            raise AssertionError("a paraphrase at weight 0 must not be asked")

    # Weight 0 is off: the paraphrase is never asked and the cut is the plain one.
    off = sized(paraphrase=NeverAsked(), paraphrase_weight=0.0)
    assert off.run([first, c], ctx(None, query=query))[1].chunk.text == plain
    with pytest.raises(ConfigurationError, match="paraphrase_weight"):
        FocusHits(paraphrase=FeeIsCharge(), paraphrase_weight=-1.0)


def test_focus_second_run_follows_the_first_hit_with_its_best_run_outside_the_kept_one() -> None:
    """With `second_run` (the default: docs/ranking.md#focus-second-run), when focus cut some of
    the first hit's sentences away, the best run (`window` characters, the same value) among the
    sentences it left out follows it as a hit of its own: a slice of the same passage, with its id
    and scores, sharing no character with the first. None when the sentences left out hold no
    question word, nor when the fill grew the first run over it. Off: the hits as before."""
    import functools

    from evidence.rank.stages import FocusHits

    filler = " ".join(f"Filler sentence number {i} says nothing much." for i in range(40))
    later = "Old backups are kept offsite in a second region."
    text = f"Backups are kept for 35 days. {filler} {later} {filler}"
    c = cand(chunk("p", text), 0.9)
    other = cand(chunk("q", f"Backups are kept nightly. {filler}", doc="other"), 0.4)
    query = "How long are backups kept?"
    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=100, first_window=300, lead=0)
    off = sized(second_run=False).run([c, other], ctx(None, query=query))
    assert [h.chunk_id for h in off] == ["p", "q"] and later not in off[0].chunk.text
    on = sized(second_run=True).run([c, other], ctx(None, query=query))
    assert [h.chunk_id for h in on] == ["p", "p", "q"]
    assert on[0].chunk == off[0].chunk and on[2].chunk == off[1].chunk  # the others as they were
    assert on[1].chunk.text.startswith(later) and len(on[1].chunk.text) <= 100 and _slice_of(on[1], c)
    assert on[0].chunk.char_end <= on[1].chunk.char_start and on[1].scores == on[0].scores
    # The sentences left out hold no question word: no second run.
    bare = cand(chunk("b", f"Backups are kept for 35 days. {filler}"), 0.9)
    alone = sized(second_run=True).run([bare, other], ctx(None, query=query))
    assert [h.chunk_id for h in alone] == ["b", "q"]
    # The fill grows the first run over the second one: once is enough.
    filled = FocusHits(fill=5000, min_chars=10, window=100, first_window=300, lead=0, second_run=True)
    grown = filled.run([c], ctx(None, query=query))
    assert [h.chunk_id for h in grown] == ["p"] and later in grown[0].chunk.text


def test_focus_third_run_follows_the_second_hit_with_the_best_run_left_out() -> None:
    """With `third_run` (the default: docs/ranking.md#focus-third-run), when the first hit's kept
    text and its second run still leave sentences with a question word out, the best run among
    them is a hit of its own too, placed after the second hit: the first three hits (the grounding
    check reads them) are those of `third_run` off. Not when the fill grew the first run over it;
    without a second hit it follows the second run. Off: the hits as before."""
    import functools

    from evidence.rank.stages import FocusHits

    filler = " ".join(f"Filler sentence number {i} says nothing much." for i in range(40))
    later = "Old backups are kept offsite in a second region."
    third = "Backups of the logs are rotated weekly."
    text = f"Backups are kept for 35 days. {filler} {later} {filler} {third} {filler}"
    c = cand(chunk("p", text), 0.9)
    other = cand(chunk("q", f"Backups are kept nightly. {filler}", doc="other"), 0.4)
    last = cand(chunk("r", f"Backups are kept on tape. {filler}", doc="last"), 0.3)
    query = "How long are backups kept?"
    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=100, first_window=300, lead=0)
    off = sized(third_run=False).run([c, other, last], ctx(None, query=query))
    assert [h.chunk_id for h in off] == ["p", "p", "q", "r"] and off[1].chunk.text.startswith(later)
    on = sized(third_run=True).run([c, other, last], ctx(None, query=query))
    assert [h.chunk_id for h in on] == ["p", "p", "q", "p", "r"]
    assert [h.chunk for h in on[:3]] == [h.chunk for h in off[:3]] and on[4].chunk == off[3].chunk
    assert on[3].chunk.text.startswith(third) and len(on[3].chunk.text) <= 100 and _slice_of(on[3], c)
    assert on[3].scores == on[0].scores and third not in on[0].chunk.text + on[1].chunk.text
    # No second hit: the third run follows the second one.
    alone = sized(third_run=True).run([c], ctx(None, query=query))
    assert [h.chunk.text[:20] for h in alone[1:]] == [later[:20], third[:20]]
    # Only with the second run.
    without = sized(second_run=False, third_run=True).run([c], ctx(None, query=query))
    assert [h.chunk_id for h in without] == ["p"]
    # The fill grows the first run over both: once is enough.
    filled = FocusHits(fill=9000, min_chars=10, window=100, first_window=300, lead=0, third_run=True)
    grown = filled.run([c, other], ctx(None, query=query))
    assert [h.chunk_id for h in grown] == ["p", "q"] and third in grown[0].chunk.text


def test_focus_drop_repeats_drops_a_hit_whose_run_is_already_in_the_evidence() -> None:
    """With `drop_repeats` (a bench lever, off by default: docs/ranking.md#focus-repeats), a hit
    (never the first) whose kept text, whitespace runs read as one space, already occurs in the
    hits before it is dropped; the hits after it keep their order. Off, nothing is dropped."""
    import functools

    from evidence.rank.stages import FocusHits

    boiler = "Backups   are kept\nfor 35 days."
    first = cand(chunk("a", f"Backups are kept for 35 days. Restores take an hour. {_PAD}", doc="d1"), 0.9)
    repeat = cand(chunk("b", f"{_PAD} {boiler} {_PAD}", doc="d2"), 0.8)
    last = cand(chunk("c", f"{_PAD} Backups are kept offsite in a second region. {_PAD}", doc="d3"), 0.7)
    query = "How long are backups kept?"
    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=40, second_window=40)
    plain = sized().run([first, repeat, last], ctx(None, query=query))
    assert [h.chunk_id for h in plain] == ["a", "b", "c"] and plain[1].chunk.text == boiler
    run = ctx(None, query=query, explain=True)
    dropped = sized(drop_repeats=True).run([first, repeat, last], run)
    assert [h.chunk_id for h in dropped] == ["a", "c"]
    assert [h.chunk.text for h in dropped] == [plain[0].chunk.text, plain[2].chunk.text]
    assert [d["chunk_id"] for d in run.trace.detail["dropped"]] == ["b"]


class _AnchorCase(NamedTuple):
    """The focus span anchor's scenario: passage `p` (doc-p, scored 0.5) after an unrelated first
    hit; its answer sentence shares no word with the question, the sentence before it does."""

    first: Candidate
    passage: Candidate
    lead: str
    answer: str
    query: str
    at: int  # where the answer starts in the passage's text


def _anchor_case(first_score: float) -> _AnchorCase:
    lead = "You may distribute copies of the work."
    answer = "A fee may be asked for the physical act of transfer."
    text = f"{_PAD} {lead} {answer} {_PAD}"
    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), first_score)
    query = "Can I charge money to distribute copies?"
    return _AnchorCase(first, cand(chunk("p", text), 0.5), lead, answer, query, text.index(answer))


def test_focus_span_anchor_keeps_the_run_holding_the_span_scorers_best_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `anchors` (off by default; docs/ranking.md#focus-span-anchor) a hit's run holds the
    sentence where the span scorer puts the answer, even one without the question's words:
    `contain` keeps the best run (focus's own value) among those holding it, `start` starts the
    run at it. `verbatim.cascade.SpanAnchors` maps the scorer's ranking to each passage's best
    span inside its offsets."""
    import functools
    from collections.abc import Mapping, Sequence

    from evidence.rank.context import RankContext
    from evidence.rank.stages import FocusHits
    from evidence.verbatim import cascade

    first, c, lead, answer, query, at = _anchor_case(0.9)

    class Fixed:
        def find(self, hits: Sequence[Candidate], ctx: RankContext) -> Mapping[int, tuple[int, int]]:
            return {1: (at, at + len(answer))}

    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=45, second_window=45)
    plain = sized().run([first, c], ctx(None, query=query))[1].chunk.text
    assert plain.startswith(lead) and answer not in plain
    # `contain`: the anchor sentence is the only run holding it within 45 characters (the run from
    # the question's words would need 92): the run from the anchor.
    held = sized(anchors=Fixed()).run([first, c], ctx(None, query=query))[1].chunk.text
    assert held.startswith(answer)
    # A wider window: the best run holding the anchor is the one from the question's words.
    wide = functools.partial(FocusHits, fill=None, min_chars=10, window=120, second_window=120)
    held = wide(anchors=Fixed()).run([first, c], ctx(None, query=query))[1].chunk.text
    assert held.startswith(lead) and answer in held
    started = wide(anchors=Fixed(), anchor_mode="start").run([first, c], ctx(None, query=query))
    assert started[1].chunk.text.startswith(answer)
    # A hit the anchors say nothing of is focused as without them.
    assert (
        sized(anchors=Fixed()).run([first, c], ctx(None, query=query))[0]
        == sized().run([first, c], ctx(None, query=query))[0]
    )
    with pytest.raises(ConfigurationError, match="anchor_mode"):
        FocusHits(anchor_mode="centre")

    # SpanAnchors: per passage, the best-ranked span inside its offsets (same document).
    def span(cid: str, doc: str, a: int, b: int) -> Chunk:
        return replace(chunk(cid, "x" * (b - a), doc=doc), kind=ChunkKind.SPAN, char_start=a, char_end=b)

    ranked = [
        (0.9, span("s1", "other", 5, 20)),
        (0.8, span("s2", "doc-p", 10_000, 10_050)),  # outside the passage
        (0.7, span("s3", "doc-p", at, at + len(answer))),
        (0.6, span("s4", "doc-p", 0, 30)),
    ]
    seen: dict[str, object] = {}

    def fake(backend: object, index: str, question: str, documents: Sequence[str], **kw: object) -> object:
        seen["documents"] = list(documents)
        return ranked

    monkeypatch.setattr(cascade, "span_ranking", fake)
    found = cascade.SpanAnchors().find([first, c], ctx(None, query=query))
    assert found == {0: (5, 20), 1: (at, at + len(answer))}
    assert seen["documents"] == ["other", "doc-p"]


def test_focus_anchor_order_moves_a_hit_up_by_its_best_span_cosine() -> None:
    """With anchors that give each hit's best span cosine (`SpanAnchors.find_with_cosines`), the
    first hit stays first and hits 2 to `anchor_order` are reordered by z(score) + weight x
    z(cosine) before focus cuts them (docs/ranking.md#focus-anchor-order), the anchors following
    their hits; anchors with `find` only, `anchor_order=0` or weight 0 leave the order as it is."""
    import functools
    from collections.abc import Mapping, Sequence

    from evidence.rank.context import RankContext
    from evidence.rank.dedup import ANCHOR_ORDER_HITS, ANCHOR_ORDER_WEIGHT, anchor_order
    from evidence.rank.stages import FocusHits

    assert (ANCHOR_ORDER_HITS, ANCHOR_ORDER_WEIGHT) == (10, 1.0)
    first, c, _, answer, query, at = _anchor_case(0.95)
    second = cand(chunk("s", f"Second passage on labels. {_PAD}", doc="fourth"), 0.9)
    middle = cand(chunk("m", f"Another passage on storage. {_PAD}", doc="third"), 0.8)
    hits = [first, second, middle, c]
    # The first hit's cosine is never read; `middle`: no candidate span, the lowest of hits 2-4.
    cosines: list[float | None] = [0.0, 0.1, None, 0.9]

    # Hits 2-4: z(score) = (0.98, 0.39, -1.37), z(cosine) = (-0.71, -0.71, 1.41): weight 1 ->
    # s, p, m; weight 2 -> p, s, m; the first hit stays, hits past `n` stay where they are.
    assert anchor_order(hits, cosines, 10, 1.0) == [0, 1, 3, 2]
    assert anchor_order(hits, cosines, 10, 2.0) == [0, 3, 1, 2]
    assert anchor_order(hits, cosines, 3, 1.0) == [0, 1, 2, 3]
    assert anchor_order(hits, [0.9, None, None, None], 10, 1.0) is None
    assert anchor_order(hits[:2], cosines[:2], 10, 1.0) is None
    # Tied fused scores (a constant column counts 0): the cosines alone order hits 2-4, a
    # negative one last; everything tied keeps the fused order.
    tied = [cand(chunk(x, f"Passage {x}. {_PAD}", doc=x), 0.5) for x in "wxyz"]
    assert anchor_order(tied, [None, 0.2, -0.3, 0.9], 10, 1.0) == [0, 3, 1, 2]
    assert anchor_order(tied, [0.0, 0.5, 0.5, 0.5], 10, 1.0) == [0, 1, 2, 3]

    class Plain:
        def find(self, hits: Sequence[Candidate], ctx: RankContext) -> Mapping[int, tuple[int, int]]:
            return {len(hits) - 1: (at, at + len(answer))}

    class WithCosines(Plain):
        def find_with_cosines(
            self, hits: Sequence[Candidate], ctx: RankContext
        ) -> tuple[Mapping[int, tuple[int, int]], list[float | None]]:
            return {3: (at, at + len(answer))}, cosines

    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=45, second_window=45)
    traced = ctx(None, query=query)
    moved = sized(anchors=WithCosines(), anchor_order_weight=2.0).run(hits, traced)
    assert [h.chunk.chunk_id for h in moved] == ["a", "p", "s", "m"]
    # The trace names the hits the cosines moved (positions from 1).
    assert traced.trace.detail["anchor_order"] == [
        {"chunk_id": "p", "from": 4, "to": 2, "cosine": 0.9},
        {"chunk_id": "s", "from": 2, "to": 3, "cosine": 0.1},
        {"chunk_id": "m", "from": 3, "to": 4, "cosine": None},
    ]
    # The anchor found for `p` at position 3 is read at its new position 1.
    assert moved[1].chunk.text.startswith(answer)
    moved = sized(anchors=WithCosines()).run(hits, ctx(None, query=query))
    assert [h.chunk.chunk_id for h in moved] == ["a", "s", "p", "m"]
    for kept in (
        sized(anchors=Plain()).run(hits, ctx(None, query=query)),
        sized(anchors=WithCosines(), anchor_order=0).run(hits, ctx(None, query=query)),
        sized(anchors=WithCosines(), anchor_order_weight=0.0).run(hits, ctx(None, query=query)),
    ):
        assert [h.chunk.chunk_id for h in kept] == ["a", "s", "m", "p"]
    with pytest.raises(ConfigurationError, match="anchor_order"):
        FocusHits(anchor_order=-1)


def test_focus_judged_hits_are_the_fused_order_cut_as_without_the_reorder() -> None:
    """With `judge_fused` (the default, `JUDGE_FUSED`: docs/ranking.md#focus-anchor-order-judged),
    when `anchor_order` moved hits, focus leaves the hits in their fused order, cut as focus cuts
    them without the reorder (the second hit's window going to the fused second hit), in
    `ctx.trace.judged` for the answer signal; the hits it returns are those of `judge_fused` off.
    Nothing moved, or `judge_fused` off: none."""
    import functools
    from collections.abc import Mapping, Sequence

    from evidence.rank.context import RankContext
    from evidence.rank.dedup import JUDGE_FUSED
    from evidence.rank.stages import FocusHits

    assert JUDGE_FUSED is True
    first = cand(chunk("a", f"Unrelated opening passage. {_PAD}", doc="other"), 0.95)
    second = cand(chunk("s", f"Second passage on labels. {_PAD}", doc="fourth"), 0.9)
    middle = cand(chunk("m", f"Another passage on storage. {_PAD}", doc="third"), 0.8)
    answer = "A fee may be asked for the physical act of transfer."
    text = f"{_PAD} You may distribute copies of the work. {answer} {_PAD}"
    c = cand(chunk("p", text), 0.5)
    query = "Can I charge money to distribute copies?"
    at = text.index(answer)
    hits = [first, second, middle, c]

    class WithCosines:
        def __init__(self, cosines: list[float | None]) -> None:
            self.cosines = cosines

        def find(self, hits: Sequence[Candidate], ctx: RankContext) -> Mapping[int, tuple[int, int]]:
            return {3: (at, at + len(answer))}

        def find_with_cosines(
            self, hits: Sequence[Candidate], ctx: RankContext
        ) -> tuple[Mapping[int, tuple[int, int]], list[float | None]]:
            return self.find(hits, ctx), self.cosines

    moving = WithCosines([0.0, 0.1, None, 0.9])  # weight 2: a, p, s, m
    sized = functools.partial(FocusHits, fill=None, min_chars=10, window=45, second_window=90)
    traced, off = ctx(None, query=query), ctx(None, query=query)
    shown = sized(anchors=moving, anchor_order_weight=2.0).run(hits, traced)
    assert [h.chunk_id for h in shown] == ["a", "p", "s", "m"]
    assert sized(anchors=moving, anchor_order_weight=2.0, judge_fused=False).run(hits, off) == shown
    assert off.trace.judged is None
    fused = sized(anchors=moving, anchor_order=0).run(hits, ctx(None, query=query))
    assert [h.chunk_id for h in fused] == ["a", "s", "m", "p"]
    assert traced.trace.judged == fused
    # `s` is cut with the second hit's window in the fused order, with the window where it is shown.
    assert len(fused[1].chunk.text) > 45 >= len(shown[2].chunk.text)
    assert fused[3].chunk.text.startswith(answer)  # the anchor follows its hit in both orders
    # Through a profile: the outcome carries them (`RankOutcome.judged`) past the guardrail.
    given = Matches()
    given.cands = hits
    profile = Profile(
        name="judged",
        description="focus with anchor_order, then the guardrail",
        defaults=ProfileParams(),
        stages=(given, sized(anchors=moving, anchor_order_weight=2.0), Guardrail()),
    )
    outcome = profile.run(ctx(None, query=query))
    assert outcome.hits == shown and outcome.judged == fused
    # Cosines that keep the fused order: nothing to judge apart.
    still = ctx(None, query=query)
    kept = sized(anchors=WithCosines([0.0, 0.9, 0.5, 0.1]), anchor_order_weight=2.0).run(hits, still)
    assert [h.chunk_id for h in kept] == ["a", "s", "m", "p"] and still.trace.judged is None


def test_guardrail_cuts_the_judged_hits_as_it_cuts_the_hits() -> None:
    """`Trace.judged` (the hits the answer signal reads, `focus`'s fused order) leaves the
    guardrail cut as the hits are: `min_similarity` by chunk (the similarity it read recorded),
    then `top_k`, then `max_chars`; without it, nothing is set."""
    from types import MappingProxyType

    def hit(cid: str, sim: float) -> Candidate:
        return Candidate(chunk(cid, f"text {cid}"), sim, sim, {"dense": sim})

    x, y, z, w = hit("x", 0.9), hit("y", 0.2), hit("z", 0.8), hit("w", 0.7)
    bare = replace(w, scores=MappingProxyType({}))  # no similarity of its own
    floored = ctx(None, params=ProfileParams(min_similarity=0.5, top_k=2))
    floored.trace.judged = [bare, y, z, x]
    assert [h.chunk_id for h in Guardrail().run([x, y, z, w], floored)] == ["x", "z"]
    # `w`, below the hits' top 2 but above the floor, stays judged; `y`, under the floor, does not.
    assert [h.chunk_id for h in floored.trace.judged] == ["w", "z"]
    assert floored.trace.judged[0].scores["dense"] == 0.7
    budget = ctx(None, params=ProfileParams(max_chars=13))
    budget.trace.judged = [w, z, x]
    assert [h.chunk_id for h in Guardrail().run([x, z, w], budget)] == ["x", "z"]
    assert [h.chunk_id for h in budget.trace.judged] == ["w", "z"]
    plain = ctx(None)
    Guardrail().run([x, z], plain)
    assert plain.trace.judged is None


def test_default_profile_anchors_focus_only_when_switched_on() -> None:
    """The `focus_span_anchor` setting (on by default since session 46) gives `focus` the span
    anchors, reading the index's cached span vectors; off, the profile is the one it builds."""
    from evidence.config import Settings
    from evidence.profiles import default
    from evidence.profiles.base import ProfileEnv, ProfileServices
    from evidence.rank.stages import FocusHits
    from evidence.verbatim.cascade import SpanAnchors

    asked: list[str] = []
    services = ProfileServices(
        document_embedder=asked.append,  # type: ignore[arg-type]
        coach_runtime=lambda: None,  # type: ignore[arg-type,return-value]
    )
    env = ProfileEnv(backend=None, settings=Settings(focus_span_anchor=False), index="ix", services=services)  # type: ignore[arg-type]
    plugin = default.DefaultPlugin()
    off = plugin.pipeline(env)
    assert all(s.anchors is None for s in off.stages if isinstance(s, FocusHits))
    assert Settings().focus_span_anchor is True
    switched = ProfileEnv(
        backend=None,  # type: ignore[arg-type]
        settings=Settings(focus_span_anchor=True),
        index="ix",
        services=services,
    )
    on = default.DefaultPlugin().pipeline(switched)
    (focus,) = [s for s in on.stages if isinstance(s, FocusHits)]
    # The spans inside the hits scored from vectors read from the store's embedding cache only,
    # never embedded at query time (docs/ranking.md#focus-span-anchor).
    assert isinstance(focus.anchors, SpanAnchors) and focus.anchors.embed is None
    assert focus.anchors.vectors is not None and focus.anchors.scorer == default.ANCHOR_SCORER
    assert asked == []  # the embedder is built on first use only
    focus.anchors.vectors.build()
    assert asked == ["ix"]
    # The profile the plug-in built and keeps is not changed by an anchored copy.
    kept = super(default.DefaultPlugin, plugin).pipeline(env)
    assert kept is off and all(s.anchors is None for s in kept.stages if isinstance(s, FocusHits))
