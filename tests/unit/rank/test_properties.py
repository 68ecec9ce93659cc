"""Property-based invariants of the stages and profiles (hypothesis), on a real embedded store."""

from __future__ import annotations

import hashlib
import random
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence.profiles import get_profile
from evidence.rank.candidate import Candidate
from evidence.rank.context import ProfileParams
from evidence.rank.followups import round_of
from evidence.rank.stages import FollowupDocumentBoost
from evidence.records import Chunk
from evidence.search.embedded import EmbeddedBackend
from tests.unit.rank.rankkit import ListFirstStage, ScriptedReranker, chunk, ctx, followup, new_backend, vec

CRIT_A = "Do you encrypt data at rest?"
CRIT_B = "Do you run background checks?"


def _split_response(doc: str, criterion: str, round_number: object, n: int) -> list[Chunk]:
    """One follow-up response split into `n` overlapping windows of its text (as the chunker does)."""
    text = " ".join(f"Answer part {i}: keys rotate every {i + 1} days." for i in range(3 * n))
    width, step = len(text) // n + 20, len(text) // n
    base = followup(f"{doc}-0", criterion, 5)
    meta = {**base.metadata, "round_number": round_number, "type": "followup_response:5"}
    out = []
    for i in range(n):
        a, b = i * step, min(len(text), i * step + width) if i < n - 1 else len(text)
        c = chunk(f"{doc}-{i}", text[a:b], doc=doc, type="followup_response:5", meta=meta, seq=i)
        out.append(replace(c, char_start=a, char_end=b))
    return out


POOL = (
    [chunk(f"p{i}", f"passage {i % 9} " + "x" * (i * 7 % 50), doc=f"d{i % 5}", seq=i) for i in range(24)]
    + [chunk(f"fd{i}", f"uploaded document {i}", type="followup_document") for i in range(4)]
    + [followup(f"fa{i}", CRIT_A, r) for i, r in enumerate([1, 2, 2, 3, 4, 6])]
    + _split_response("fa-long", CRIT_A, 5, 3)  # a multi-chunk response
    + _split_response("fa-float", CRIT_A, "5.0", 2)  # a float round from an older index
    + [followup(f"fb{i}", CRIT_B, i + 1) for i in range(3)]
)


def _responses(criterion: str) -> dict[tuple[str, int], list[Chunk]]:
    out: dict[tuple[str, int], list[Chunk]] = {}
    for x in POOL:
        if x.metadata.get("criterion_question") == criterion:
            out.setdefault((x.document_id, round_of(x.metadata)), []).append(x)
    return out


@pytest.fixture(scope="module")
def backend() -> Iterator[EmbeddedBackend]:
    with tempfile.TemporaryDirectory() as d:
        b = new_backend(Path(d), POOL)
        yield b
        b.close()


def _score(_: str, text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:2], 16) % 5 / 4  # ties on purpose


# fused scores as z-score fusion gives them: negative, zero, tied; and reranker-like ones near the cap
scores = st.sampled_from([-1.3, -0.271, -0.236, -0.05, 0.0, 0.0, 0.01, 0.016, 0.02, 0.5, 0.87, 0.9, 0.99])
candidate_lists = st.lists(
    st.tuples(st.sampled_from(range(len(POOL))), scores), max_size=len(POOL), unique_by=lambda t: t[0]
).map(lambda xs: [Candidate(POOL[i], s, s, {"fused": s}) for i, s in xs])
params = st.builds(
    ProfileParams,
    first_stage_k=st.integers(1, 60),
    rerank_k=st.integers(1, 60),
    top_k=st.integers(1, 20),
    rerank_cutoff=st.sampled_from([0.0, 0.1, 0.5]),
    followup_max_rounds=st.integers(0, 4),
    followup_boost=st.sampled_from([1.0, 1.15, 3.0]),
    followup_boost_cap=st.sampled_from([None, 1.0]),
    min_similarity=st.sampled_from([None, -1.0, 0.0, 0.3]),
    max_chars=st.sampled_from([None, 0, 10, 60, 200]),
    mmr_lambda=st.sampled_from([None, 0.0, 0.5, 1.0]),
    max_chunks_per_document=st.sampled_from([None, 1, 2]),
)
common = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ctx(backend: EmbeddedBackend, p: ProfileParams, with_reranker: bool, criterion: str | None):
    return ctx(
        backend,
        params=p,
        criterion=criterion,
        query="passage 3",
        query_vector=vec("passage 3"),
        reranker=ScriptedReranker(_score) if with_reranker else None,
        explain=True,
    )


@common
@given(
    cands=candidate_lists,
    p=params,
    rr=st.booleans(),
    crit=st.sampled_from([None, CRIT_A, CRIT_B]),
    profile=st.sampled_from(["default", "vrm"]),
)
def test_every_stage_output_is_drawn_from_its_input(  # noqa: PLR0917
    backend, cands, p, rr, crit, profile
) -> None:
    c = _ctx(backend, p, rr, crit)
    current = cands
    # after the recall stage (which finds candidates rather than drawing from its input)
    for stage in get_profile(profile).stages[1:]:
        out = stage.run(current, c)
        by_id = {x.chunk_id: x.chunk for x in current}
        assert len({x.chunk_id for x in out}) == len(out), stage.name
        assert all(x.chunk_id in by_id for x in out), stage.name
        for x in out:
            before = by_id[x.chunk_id]
            if stage.name == "collapse_overlaps" and x.chunk != before:
                # a passage widened over the overlapping passages of its document it absorbed
                assert x.chunk.document_id == before.document_id
                assert x.chunk.char_start <= before.char_start and x.chunk.char_end >= before.char_end
            else:
                assert x.chunk == before, stage.name
        current = out


@common
@given(
    cands=candidate_lists,
    p=params,
    rr=st.booleans(),
    crit=st.sampled_from([None, CRIT_A, CRIT_B]),
    profile=st.sampled_from(["default", "vrm"]),
    seed=st.integers(0, 2**16),
)
def test_profile_invariants(  # noqa: PLR0917
    backend, cands, p, rr, crit, profile, seed
) -> None:
    prof = get_profile(profile)
    out = prof.with_stage("first_stage", ListFirstStage(cands)).run(_ctx(backend, p, rr, crit))
    hits = out.hits
    # budgets
    assert len(hits) <= p.top_k
    if p.max_chars:
        assert sum(len(h.chunk.text) for h in hits) <= p.max_chars
    if p.max_chunks_per_document:
        docs = [h.chunk.document_id for h in hits]
        assert all(docs.count(d) <= p.max_chunks_per_document for d in docs)
    if p.rerank_cutoff and rr:
        # the cutoff judges the boosted list (seed 001): a boosted score stands for the rerank one
        assert all(h.scores.get("boosted", h.scores.get("rerank", 1.0)) >= p.rerank_cutoff for h in hits)
    # follow-ups: never also a hit, one per (document, round), the latest responses, only linked ones
    fu_docs = {f.chunk.document_id for f in out.followups}
    assert not fu_docs & {h.chunk.document_id for h in hits}
    keys = [(f.chunk.document_id, round_of(f.metadata)) for f in out.followups]
    assert len(keys) == len(set(keys)) <= p.followup_max_rounds
    if out.followups:
        assert crit is not None
        assert {f.metadata["criterion_question"] for f in out.followups} == {crit}
        latest = sorted(_responses(crit), key=lambda k: (-k[1], k[0]))[: p.followup_max_rounds]
        assert set(keys) == set(latest)
    # deterministic under ties: a shuffled first stage gives the same answer
    shuffled = list(cands)
    random.Random(seed).shuffle(shuffled)
    again = prof.with_stage("first_stage", ListFirstStage(shuffled)).run(_ctx(backend, p, rr, crit))
    if p.first_stage_k >= len(cands):  # the first stage itself truncates in input order
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in hits]
        assert [f.chunk_id for f in again.followups] == [f.chunk_id for f in out.followups]


@common
@given(p=params, crit=st.sampled_from([CRIT_A, CRIT_B]))
def test_linked_followups_found_even_with_empty_first_stage(backend, p, crit) -> None:
    out = get_profile("vrm").with_stage("first_stage", ListFirstStage([])).run(_ctx(backend, p, False, crit))
    responses = _responses(crit)
    latest = sorted(responses, key=lambda k: (-k[1], k[0]))[: p.followup_max_rounds]
    assert [(f.chunk.document_id, round_of(f.metadata)) for f in out.followups] == sorted(
        latest, key=lambda k: (k[1], k[0])
    )
    for f in out.followups:  # a split response comes back whole, its overlap removed, once
        parts = sorted(responses[(f.chunk.document_id, round_of(f.metadata))], key=lambda x: x.char_start)
        assert f.chunk.char_start == parts[0].char_start and f.chunk.char_end == parts[-1].char_end
        assert len(f.chunk.text) == parts[-1].char_end - parts[0].char_start
    assert out.hits == []


boost_lists = st.lists(
    st.tuples(st.sampled_from(range(len(POOL))), scores, st.booleans()),
    min_size=1,
    max_size=len(POOL),
    unique_by=lambda t: t[0],
)


@common
@given(
    items=boost_lists,
    reranked=st.booleans(),
    factor=st.sampled_from([1.15, 1.5, 3.0]),
    cap=st.sampled_from([None, 1.0, 0.95]),
)
def test_boost_never_moves_a_boosted_candidate_down(items, reranked, factor, cap) -> None:
    cands = []
    for i, score, as_doc in items:
        ch = (
            POOL[i]
            if not as_doc
            else replace(POOL[i], metadata={**POOL[i].metadata, "type": "followup_document"})
        )
        s = abs(score) if reranked else score  # reranker relevance is never negative
        c = Candidate(ch, s, s, {"fused": s})
        cands.append(c.with_score("rerank", s) if reranked else c)
    cands.sort(key=lambda c: (-c.score, c.chunk_id))  # the order the previous stage leaves
    p = ProfileParams(followup_boost=factor, followup_boost_cap=cap)
    out = FollowupDocumentBoost().run(cands, ctx(None, params=p))
    pos = {c.chunk_id: i for i, c in enumerate(out)}
    boosted = {c.chunk_id for c in cands if c.metadata.get("type") == "followup_document"}
    for i, a in enumerate(cands):
        for b in cands[i + 1 :]:
            if a.chunk_id in boosted and b.chunk_id not in boosted:
                assert pos[a.chunk_id] < pos[b.chunk_id]  # a boost never demotes
            if (a.chunk_id in boosted) == (b.chunk_id in boosted) and a.score > b.score:
                assert pos[a.chunk_id] < pos[b.chunk_id]  # ties at the cap keep the unboosted order
    for c in out:
        unboosted = next(x for x in cands if x.chunk_id == c.chunk_id)
        assert c.score >= unboosted.score
