"""The answerability signal (`rank.confidence`): inputs, edge cases, and independence from the
reranker's scale."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evidence.coach.confidence import logistic
from evidence.config import Settings
from evidence.embed.minilm import MODEL_ID
from evidence.errors import BackendError
from evidence.profiles.base import ProfileEnv
from evidence.profiles.base import head_cosines as head_cosines_of
from evidence.rank.confidence import (
    DENSE_CALIBRATIONS,
    HEAD,
    LEXICAL_CALIBRATION,
    AnswerSignal,
    Calibration,
    answer_signal,
    head_cosines,
    missing_cosines,
    on_bar,
    sigmoid,
    term_coverage,
)
from evidence.verbatim.grounding import RefusalModel
from tests.unit.rank.rankkit import cand, chunk, new_backend, vec

QUERY = "Is customer data encrypted at rest?"
ON_TOPIC = "Customer data is encrypted at rest with AES-256 and keys rotate yearly."
OFF_TOPIC = "The cafeteria opens at nine and serves soup on Fridays."


def signal(cosines: list[float], texts: list[str], min_confidence: float = 0.5) -> AnswerSignal:
    hits = [cand(chunk(f"c{i}", t), 1.0 - i / 10) for i, t in enumerate(texts)]
    return answer_signal(
        QUERY, hits, [], cosines=cosines, embedder_id=MODEL_ID, min_confidence=min_confidence
    )


def test_no_hits_is_none_and_followups_alone_answer() -> None:
    none = answer_signal(QUERY, [], [], cosines=[], embedder_id=MODEL_ID)
    assert (none.confidence, none.can_answer, none.basis) == (0.0, False, "none")
    fu = answer_signal(QUERY, [], [cand(chunk("f"), 0.0)], cosines=[], embedder_id=MODEL_ID)
    assert (fu.confidence, fu.can_answer, fu.basis) == (1.0, True, "followups")


def test_a_close_passage_answers_and_an_unrelated_one_does_not() -> None:
    yes = signal([0.62], [ON_TOPIC])
    no = signal([0.1], [OFF_TOPIC])
    assert yes.basis == no.basis == "dense"
    assert yes.can_answer and yes.confidence > 0.9
    assert not no.can_answer and no.confidence < 0.01
    assert yes.features == {"coverage": 1.0, "cosine": 0.62}


@pytest.mark.parametrize("cosine", [0.0, -0.3, -1.0])
def test_zero_and_negative_cosines_are_low_and_finite(cosine: float) -> None:
    s = signal([cosine], [OFF_TOPIC])
    assert not s.can_answer and 0.0 <= s.confidence < 0.01 and math.isfinite(s.confidence)


def test_confidence_is_monotone_in_both_inputs() -> None:
    cal = DENSE_CALIBRATIONS[MODEL_ID]
    grid = [cal.probability(c, v) for c in (-1.0, 0.0, 0.3, 0.5, 1.0) for v in (0.0, 0.5, 1.0)]
    assert all(0.0 <= p <= 1.0 for p in grid)
    assert cal.probability(0.5, 0.5) < cal.probability(0.6, 0.5) < cal.probability(0.6, 0.9)
    # extreme logits neither overflow nor leave [0, 1]
    assert cal.probability(-1e6, 0.0) == 0.0 and cal.probability(1e6, 1.0) == 1.0


def test_the_best_of_the_head_counts_so_reordering_the_top_changes_nothing() -> None:
    a = signal([0.2, 0.6, 0.3], [OFF_TOPIC, ON_TOPIC, OFF_TOPIC])
    b = signal([0.6, 0.3, 0.2], [ON_TOPIC, OFF_TOPIC, OFF_TOPIC])
    assert (a.confidence, a.can_answer, a.features) == (b.confidence, b.can_answer, b.features)


@pytest.mark.parametrize("rerank", [0.999, 0.5, 0.02, 0.0001])
def test_a_rerankers_scale_is_recorded_never_read(rerank: float) -> None:
    """Cohere's or Bedrock's relevance is on a scale of its own: the verdict on the same hits is
    the same whatever score the reranker gave."""
    plain = signal([0.1], [OFF_TOPIC])
    hits = [cand(chunk("c0", OFF_TOPIC), rerank, 0.4, rerank=rerank)]
    reranked = answer_signal(QUERY, hits, [], cosines=[0.1], embedder_id=MODEL_ID)
    assert (reranked.confidence, reranked.can_answer) == (plain.confidence, plain.can_answer)
    assert reranked.features["rerank"] == rerank


def test_without_cosines_or_a_calibrated_embedder_coverage_decides() -> None:
    hits = [cand(chunk("c0", ON_TOPIC), 1.0)]
    for cosines, embedder in (([], MODEL_ID), ([0.62], "amazon.titan-embed-text-v2:0"), ([0.62], None)):
        s = answer_signal(QUERY, hits, [], cosines=cosines, embedder_id=embedder)
        assert s.basis == "lexical" and "cosine" not in s.features
        assert s.confidence == round(LEXICAL_CALIBRATION.probability(0.0, 1.0), 4) and s.can_answer
    off = answer_signal(QUERY, [cand(chunk("c0", OFF_TOPIC), 1.0)], [], cosines=[], embedder_id=None)
    assert off.basis == "lexical" and not off.can_answer


def test_the_bar_moves_with_min_confidence() -> None:
    s = signal([0.4], [ON_TOPIC])
    assert s.can_answer == (s.confidence >= 0.5)
    assert not signal([0.4], [ON_TOPIC], min_confidence=min(1.0, s.confidence + 0.01)).can_answer


def test_term_coverage() -> None:
    assert term_coverage(QUERY, ON_TOPIC) == 1.0
    assert term_coverage(QUERY, OFF_TOPIC) == 0.0
    assert term_coverage("the of and", ON_TOPIC) == 0.0  # stop words only: nothing to cover


def test_head_cosines_use_dense_scores_else_stored_vectors() -> None:
    q = vec("query")
    hits = [
        cand(chunk("a"), 0.9, dense=0.25),
        cand(chunk("b"), 0.8),  # no dense score: its stored vector
        cand(chunk("c"), 0.7),  # nothing stored: left out
        cand(chunk("d"), 0.6, dense=0.99),  # beyond the head
    ]
    assert missing_cosines(hits) == ["b", "c"]
    stored: dict[str, np.ndarray] = {"b": vec("b") * 3.0, "c": np.zeros(8, dtype=np.float32)}
    got = head_cosines(hits, stored, q)
    assert len(got) == 2 and got[0] == 0.25
    assert got[1] == pytest.approx(float(np.dot(q, vec("b"))), abs=1e-6)
    assert head_cosines(hits, stored, None) == [0.25]
    assert head_cosines([cand(chunk("n"), 1.0, dense=float("nan"))], {}, q) == []
    assert len(hits[:HEAD]) == 3


def test_service_degrades_when_the_vectors_lookup_fails(tmp_path: Path) -> None:
    backend = new_backend(tmp_path, [chunk("a", ON_TOPIC)])

    def fail(index: str, ids: object) -> dict[str, np.ndarray]:
        raise BackendError("cluster unavailable")

    backend.vectors = fail  # type: ignore[method-assign,assignment]
    env = ProfileEnv(backend, Settings(store_dir=tmp_path), index="ranktest", query_vector=vec("q"))
    hits = [cand(chunk("a", ON_TOPIC), 1.0)]
    assert head_cosines_of(env, hits) == []
    assert env.degraded == ["answer:vectors_unavailable"]


def test_service_looks_up_the_vectors_fused_only_hits_lack(tmp_path: Path) -> None:
    """Server-side hybrid returns fused scores only: the cosines come from the stored vectors."""
    backend = new_backend(tmp_path, [chunk("a", ON_TOPIC), chunk("b", OFF_TOPIC)])
    q = vec("q")
    env = ProfileEnv(backend, Settings(store_dir=tmp_path), index="ranktest", query_vector=q)
    hits = [cand(chunk("a", ON_TOPIC), 0.03), cand(chunk("b", OFF_TOPIC), 0.02)]  # "fused" only
    got = head_cosines_of(env, hits)
    assert env.degraded == []
    # The store keeps float16 vectors: a cosine read back is within ~1e-3 of the float32 one.
    assert got == pytest.approx([float(np.dot(q, vec(ON_TOPIC))), float(np.dot(q, vec(OFF_TOPIC)))], abs=1e-3)


@pytest.mark.parametrize("bar", [0.0, 0.2, 0.3, 0.5, 0.7])
def test_confidence_and_can_answer_agree_at_any_bar(bar: float) -> None:
    # `confidence` is mapped so that the bar lands on 0.5: whatever bar, can_answer is
    # confidence >= 0.5, and a higher probability never reads as a lower confidence.
    seen = []
    for cosine in (0.1, 0.3, 0.35, 0.4, 0.45, 0.6, 0.9):
        s = signal([cosine], [ON_TOPIC], min_confidence=bar)
        p = signal([cosine], [ON_TOPIC]).confidence  # at the bar 0.5 the confidence is the probability
        assert s.can_answer == (p >= bar)
        assert s.can_answer == (s.confidence >= 0.5) or s.confidence == pytest.approx(0.5, abs=1e-4)
        seen.append(s.confidence)
    assert seen == sorted(seen)


def test_on_bar_puts_the_bar_at_one_half() -> None:
    assert on_bar(0.3, 0.3) == 0.5
    assert on_bar(0.15, 0.3) == pytest.approx(0.25)
    assert on_bar(0.65, 0.3) == pytest.approx(0.75)
    assert on_bar(0.42, 0.5) == pytest.approx(0.42)  # the identity at 0.5
    assert on_bar(0.0, 0.0) == 0.5 and on_bar(1.0, 1.0) == 1.0


@pytest.mark.parametrize("z", [-1000.0, -3.5, 0.0, 0.7, 1000.0])
def test_every_logistic_model_reads_the_one_overflow_free_sigmoid(z: float) -> None:
    # The answerability calibration, the refusal model and the coach's logistic share it: at
    # |z| = 1000 `math.exp` of the other sign would overflow.
    p = sigmoid(z)
    assert 0.0 <= p <= 1.0 and math.isclose(p, 1.0 - sigmoid(-z), abs_tol=1e-12)
    assert Calibration(dense=0.0, coverage=0.0, bias=z).probability(0.3, 0.4) == p
    assert RefusalModel({}, bias=z).probability({}) == p
    assert logistic([z], []) == p


def test_the_profile_signal_reads_the_judged_hits_when_a_stage_left_them(tmp_path: Path) -> None:
    """`RankOutcome.judged` (the hits in the order the signal was fitted on, which `focus` leaves
    when `anchor_order` moved hits: docs/ranking.md#focus-anchor-order-judged) is what the answer
    signal and the grounding check read; the returned hits are read when there is none."""
    from evidence.profiles.default import DefaultPlugin
    from evidence.rank.candidate import Candidate
    from evidence.rank.pipeline import RankOutcome

    env = ProfileEnv(new_backend(tmp_path, []), Settings(store_dir=tmp_path), embedder_id=MODEL_ID)
    on = [cand(chunk("a", ON_TOPIC), 1.0, dense=0.8)]
    off = [cand(chunk("b", OFF_TOPIC), 1.0, dense=0.05)]

    def outcome(hits: list[Candidate], judged: list[Candidate] | None = None) -> RankOutcome:
        return RankOutcome(hits=hits, followups=[], stages=[], degraded=[], path_used="hybrid", judged=judged)

    plugin = DefaultPlugin()
    answered = plugin.answer_signal(QUERY, outcome(on), env)
    refused = plugin.answer_signal(QUERY, outcome(off), env)
    assert answered.can_answer and not refused.can_answer
    assert plugin.answer_signal(QUERY, outcome(off, judged=on), env) == answered
    assert plugin.answer_signal(QUERY, outcome(on, judged=off), env) == refused
