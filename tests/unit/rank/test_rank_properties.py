"""Property-based invariants of the stages and profiles (hypothesis), on a real embedded store."""

from __future__ import annotations

import hashlib
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rankkit import ListFirstStage, ScriptedReranker, chunk, ctx, followup, new_backend, vec

from evidence.rank.candidate import Candidate
from evidence.rank.pipeline import ProfileParams, get_profile
from evidence.search.embedded import EmbeddedBackend

CRIT_A = "Do you encrypt data at rest?"
CRIT_B = "Do you run background checks?"

POOL = (
    [chunk(f"p{i}", f"passage {i % 9} " + "x" * (i * 7 % 50), doc=f"d{i % 5}", seq=i) for i in range(24)]
    + [chunk(f"fd{i}", f"uploaded document {i}", type="followup_document") for i in range(4)]
    + [followup(f"fa{i}", CRIT_A, r) for i, r in enumerate([1, 2, 2, 3, 4, 6])]
    + [followup(f"fb{i}", CRIT_B, i + 1) for i in range(3)]
)


@pytest.fixture(scope="module")
def backend() -> Iterator[EmbeddedBackend]:
    with tempfile.TemporaryDirectory() as d:
        b = new_backend(Path(d), POOL)
        yield b
        b.close()


def _score(_: str, text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:2], 16) % 5 / 4  # ties on purpose


scores = st.sampled_from([0.0, 0.01, 0.016, 0.02, 0.5])
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


def _ctx(backend: EmbeddedBackend, p: ProfileParams, with_reranker: bool, criterion: str | None):  # type: ignore[no-untyped-def]
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
def test_every_stage_output_is_drawn_from_its_input(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    backend, cands, p, rr, crit, profile
) -> None:
    c = _ctx(backend, p, rr, crit)
    current = cands
    for stage in get_profile(profile).stages:
        out = stage.run(current, c)
        by_id = {x.chunk_id: x.chunk for x in current}
        assert len({x.chunk_id for x in out}) == len(out), stage.name
        assert all(x.chunk_id in by_id and x.chunk == by_id[x.chunk_id] for x in out), stage.name
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
def test_profile_invariants(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    backend, cands, p, rr, crit, profile, seed
) -> None:
    prof = get_profile(profile)
    out = prof.run(_ctx(backend, p, rr, crit), ListFirstStage(cands))
    hits = out.hits
    # budgets
    assert len(hits) <= p.top_k
    if p.max_chars:
        assert sum(len(h.chunk.text) for h in hits) <= p.max_chars
    if p.max_chunks_per_document:
        docs = [h.chunk.document_id for h in hits]
        assert all(docs.count(d) <= p.max_chunks_per_document for d in docs)
    if p.rerank_cutoff and rr:
        assert all(h.scores.get("rerank", 1.0) >= p.rerank_cutoff for h in hits)
    # follow-ups: never also a hit, at most the latest max_rounds rounds, only linked ones
    fu_ids = {f.chunk_id for f in out.followups}
    assert not fu_ids & {h.chunk_id for h in hits}
    assert len({f.metadata["round_number"] for f in out.followups}) <= p.followup_max_rounds
    if out.followups:
        assert crit is not None
        assert {f.metadata["criterion_question"] for f in out.followups} == {crit}
    # deterministic under ties: a shuffled first stage gives the same answer
    shuffled = list(cands)
    random.Random(seed).shuffle(shuffled)
    again = prof.run(_ctx(backend, p, rr, crit), ListFirstStage(shuffled))
    if p.first_stage_k >= len(cands):  # the first stage itself truncates in input order
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in hits]
        assert [f.chunk_id for f in again.followups] == [f.chunk_id for f in out.followups]


@common
@given(p=params, crit=st.sampled_from([CRIT_A, CRIT_B]))
def test_linked_followups_found_even_with_empty_first_stage(backend, p, crit) -> None:  # type: ignore[no-untyped-def]
    out = get_profile("vrm").run(_ctx(backend, p, False, crit), ListFirstStage([]))
    linked = [x for x in POOL if x.metadata.get("criterion_question") == crit]
    rounds = sorted({x.metadata["round_number"] for x in linked}, reverse=True)[: p.followup_max_rounds]
    assert {f.chunk_id for f in out.followups} == {
        x.chunk_id for x in linked if x.metadata["round_number"] in rounds
    }
    assert out.hits == []
