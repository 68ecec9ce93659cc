"""Seed 001: follow-up document boost (x1.15 after rerank, before top-k; cap; re-sort; log)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from evidence.profiles import get_profile
from evidence.rank.candidate import Candidate
from evidence.rank.context import RankContext
from evidence.rank.stages import FollowupDocumentBoost, TopK
from tests.unit.rank.rankkit import ScriptedReranker, cand, chunk, ctx, new_backend, vec

VRM = get_profile("vrm").defaults


def reranked(cid: str, score: float, type: str = "tc_files") -> Candidate:
    return cand(chunk(cid, type=type), score, first=0.03).with_score("rerank", score)


def boost(cands: list[Candidate], **overrides: Any) -> tuple[list[Candidate], RankContext]:
    c = ctx(None, params=VRM, **overrides)
    return FollowupDocumentBoost().run(cands, c), c


# --- unit -------------------------------------------------------------------------------------


def test_boosts_only_followup_documents_and_resorts() -> None:
    cands = [
        reranked("orig", 0.80),
        reranked("fdoc", 0.70, "followup_document"),
        reranked("resp", 0.60, "followup_response:1"),
        reranked("soc2", 0.50, "soc2_summary:overview"),
    ]
    out, _ = boost(cands)
    assert [c.chunk_id for c in out] == ["fdoc", "orig", "resp", "soc2"]
    by_id = {c.chunk_id: c for c in out}
    assert by_id["fdoc"].score == pytest.approx(0.805)
    assert by_id["fdoc"].scores["rerank"] == 0.70  # unboosted kept
    assert by_id["fdoc"].scores["boosted"] == pytest.approx(0.805)
    for cid in ("orig", "resp", "soc2"):
        assert by_id[cid] is next(c for c in cands if c.chunk_id == cid)  # untouched


def test_boost_loses_to_a_clearly_better_original() -> None:
    out, _ = boost([reranked("orig", 0.50), reranked("fdoc", 0.30, "followup_document")])
    assert [c.chunk_id for c in out] == ["orig", "fdoc"]
    assert out[1].score == pytest.approx(0.345)


def test_cap_applies_to_reranker_scores() -> None:
    out, _ = boost([reranked("orig", 0.99), reranked("fdoc", 0.95, "followup_document")])
    assert out[0].chunk_id == "fdoc" and out[0].score == 1.0
    uncapped, _ = boost([reranked("fdoc", 0.95, "followup_document")], followup_boost_cap=None)
    assert uncapped[0].score == pytest.approx(1.0925)


def test_cap_never_lowers_a_score() -> None:
    out, _ = boost([reranked("fdoc", 0.9, "followup_document")], followup_boost_cap=0.5)
    assert out[0].score == 0.9


def test_fused_scores_are_boosted_uncapped() -> None:
    """Without a reranker the boost multiplies the fused score and no cap applies (DESIGN §2)."""
    fdoc = cand(chunk("fdoc", type="followup_document"), 0.03)
    out, _ = boost([cand(chunk("orig"), 0.032), fdoc], followup_boost_cap=0.01)
    assert [c.chunk_id for c in out] == ["fdoc", "orig"]
    assert out[0].score == pytest.approx(0.0345)


@pytest.mark.parametrize(
    ("types", "expect_boosted"),
    [([], 0), (["followup_document"] * 3, 3), (["tc_files"] * 3, 0)],
    ids=["empty", "all-followup", "no-followup"],
)
def test_edge_cases(types: list[str], expect_boosted: int) -> None:
    cands = [reranked(f"c{i}", 0.9 - i / 10, t) for i, t in enumerate(types)]
    out, c = boost(cands)
    assert [x.chunk_id for x in out] == [x.chunk_id for x in cands]  # uniform boost keeps order
    assert sum("boosted" in x.scores for x in out) == expect_boosted
    assert c.trace.detail.get("order_changed", False) is False


def test_factor_one_is_a_no_op() -> None:
    cands = [reranked("a", 0.5), reranked("b", 0.49, "followup_document")]
    out, _ = boost(cands, followup_boost=1.0)
    assert out == cands


def test_logs_when_the_boost_changed_the_order(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="evidence.rank.stages"):
        _, c = boost([reranked("orig", 0.80), reranked("fdoc", 0.70, "followup_document")])
    assert c.trace.detail["order_changed"] is True
    assert any("boost changed the ranking" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="evidence.rank.stages"):
        boost([reranked("orig", 0.95), reranked("fdoc", 0.50, "followup_document")])
    assert not any("boost changed" in r.getMessage() for r in caplog.records)


# --- integration: vrm profile on the embedded store ------------------------------------------

QUESTION = "data retention policy duration"


@pytest.mark.parametrize(
    ("orig_score", "fdoc_score", "winner"),
    [(0.80, 0.70, "fdoc"), (0.80, 0.50, "orig")],
    ids=["beats-close-original", "loses-to-clearly-better"],
)
def test_end_to_end_boost(tmp_path: Path, orig_score: float, fdoc_score: float, winner: str) -> None:
    docs = [
        chunk("orig", "Our data retention policy keeps records for seven years"),
        chunk("fdoc", "Uploaded data retention policy: duration is five years", type="followup_document"),
        *[chunk(f"n{i}", f"data retention note {i}") for i in range(8)],
    ]
    backend = new_backend(tmp_path, docs)
    scores = {d.text: 0.2 for d in docs} | {docs[0].text: orig_score, docs[1].text: fdoc_score}
    profile = get_profile("vrm")
    c = ctx(
        backend,
        params=profile.params({}),
        query=QUESTION,
        query_vector=vec(QUESTION),
        reranker=ScriptedReranker(scores),
        explain=True,
    )
    outcome = profile.run(c)
    assert outcome.hits[0].chunk_id == winner
    assert len(outcome.hits) == 6
    assert outcome.path_used.endswith("+rerank")
    fdoc = next(h for h in outcome.hits if h.chunk_id == "fdoc")
    assert fdoc.scores["rerank"] == fdoc_score and "fused" in fdoc.scores


def test_boost_happens_before_top_k(tmp_path: Path) -> None:
    """A follow-up document ranked 7th by the reranker enters the top 6 thanks to the boost."""
    docs = [chunk(f"o{i}", f"retention original {i}") for i in range(6)]
    docs.append(chunk("fdoc", "retention follow-up upload", type="followup_document"))
    backend = new_backend(tmp_path, docs)
    scores = {d.text: 0.60 - i * 0.001 for i, d in enumerate(docs[:6])} | {docs[6].text: 0.56}
    profile = get_profile("vrm")
    c = ctx(backend, params=profile.params({}), query="retention", reranker=ScriptedReranker(scores))
    outcome = profile.run(c)
    assert outcome.hits[0].chunk_id == "fdoc"
    off = profile.run(
        ctx(
            backend,
            params=profile.params({"followup_boost": 1.0}),
            query="retention",
            reranker=ScriptedReranker(scores),
        )
    )
    assert "fdoc" not in [h.chunk_id for h in off.hits]


def test_cutoff_applies_to_the_boosted_list_as_seed_001_orders_it() -> None:
    """Seed 001: `[r for r in boosted[:n] if r.score >= relevancy_cutoff]`: a follow-up document
    just under the cutoff is lifted over it by the boost; an original document is not."""
    from evidence.rank.stages import RelevancyCutoff

    cands = [reranked("orig", 0.095), reranked("fdoc", 0.095, "followup_document")]
    boosted, c = boost(cands)
    kept = RelevancyCutoff().run(boosted, c)
    assert [x.chunk_id for x in kept] == ["fdoc"]
    assert kept[0].score == pytest.approx(0.10925)


# --- fused scores (no reranker, or after a reranker failure) may be negative ---------------------


def fused(cid: str, score: float, type: str = "tc_files") -> Candidate:
    return cand(chunk(cid, type=type), score)


def test_boost_never_demotes_a_negative_fused_score() -> None:
    # z-score fusion: below-average candidates are negative; x1.15 would push fdoc DOWN
    cands = [fused(f"o{i}", 0.9 - 0.15 * i) for i in range(8)] + [
        fused("fdoc", -0.236, "followup_document"),
        fused("below", -0.25),
        fused("last", -0.9),
    ]
    cands.sort(key=lambda c: -c.score)
    plain, _ = boost(cands, followup_boost=1.0)
    out, c = boost(cands, followup_boost=1.15)
    rank = {x.chunk_id: i for i, x in enumerate(out)}
    assert rank["fdoc"] <= [x.chunk_id for x in plain].index("fdoc")
    assert next(x for x in out if x.chunk_id == "fdoc").score >= -0.236
    assert rank["fdoc"] < rank["below"]  # it was above it before the boost: still above
    # the shifted scale: floor = lowest score, so the boost lifts fdoc's height above it by 15%
    assert c.trace.detail["floor"] == -0.9
    assert next(x for x in out if x.chunk_id == "fdoc").score == pytest.approx(-0.9 + (0.664) * 1.15)


def test_boost_end_to_end_without_reranker_lifts_the_followup_document(tmp_path: Path) -> None:
    docs = [chunk(f"o{i}", f"retention policy clause {i} " + "filler " * i) for i in range(12)]
    docs.append(chunk("fdoc", "retention " + "filler " * 9, type="followup_document"))
    backend = new_backend(tmp_path, docs)
    profile = get_profile("vrm")

    def rank_of(factor: float) -> int:
        c = ctx(
            backend,
            params=profile.params({"followup_boost": factor, "top_k": 13}),
            query="retention policy",
            query_vector=vec("retention policy"),
        )
        hits = profile.run(c).hits
        assert all("rerank" not in h.scores for h in hits)  # fused scores: the case at hand
        return [h.chunk_id for h in hits].index("fdoc")

    assert rank_of(1.15) <= rank_of(1.0)
    assert rank_of(3.0) <= rank_of(1.15)


def test_ties_at_the_cap_keep_the_unboosted_order() -> None:
    # all three reach the cap (0.88, 0.95, 0.99 x 1.15 >= 1.0); "a" would win a chunk-id tie-break
    cands = [
        reranked("z-best", 0.99, "followup_document"),
        reranked("m-mid", 0.95, "followup_document"),
        reranked("a-weak", 0.88, "followup_document"),
        reranked("orig", 0.97),
    ]
    out, _ = boost(cands)
    assert [c.chunk_id for c in out] == ["z-best", "m-mid", "a-weak", "orig"]
    assert [c.score for c in out[:3]] == [1.0, 1.0, 1.0]
    # and at top_k the stronger ones are the ones kept
    boosted, c = boost(cands, top_k=2)
    assert [x.chunk_id for x in TopK().run(boosted, c)] == ["z-best", "m-mid"]
