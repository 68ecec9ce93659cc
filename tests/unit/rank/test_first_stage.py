"""The first stage: legs, fusion, and score completion over the union of both legs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evidence.rank.context import ProfileParams, RankContext
from evidence.rank.first_stage import FirstStage, HybridRecall, RetrievalMode
from evidence.rank.fusion import FusionConfig, FusionMethod
from evidence.search.embedded import EmbeddedBackend
from tests.unit.search.storekit import one_passage

TEXTS = {
    "lex": "encryption keys rotate yearly",  # lexical match, vector far from the query
    "dense": "cryptographic material is renewed annually",  # no shared term, vector close
    "both": "encryption at rest with yearly key rotation",
    "none": "the cafeteria opens at noon",
}
AXIS = {"lex": 3, "dense": 0, "both": 0, "none": 2}


def _vec(axis: int, tilt: float = 0.0) -> np.ndarray:
    v = np.zeros(4, dtype=np.float32)
    v[axis] = 1.0
    v[1] = tilt
    return v / np.linalg.norm(v)


@pytest.fixture
def backend(tmp_path: Path) -> EmbeddedBackend:
    b = EmbeddedBackend(tmp_path)
    b.create_index("fs", embedder_id="fake", dimension=4)
    docs, vecs = [], []
    for i, (did, text) in enumerate(TEXTS.items()):
        docs.append(one_passage(did, text))
        vecs.append(_vec(AXIS[did], tilt=0.1 * i)[None, :])
    b.upsert("fs", docs, vecs)
    return b


def test_completion_scores_every_candidate_on_both_legs(backend: EmbeddedBackend) -> None:
    query, vector = "encryption key rotation", _vec(0)
    # legs of depth 1 so each leg alone misses what the other found
    stage = FirstStage(leg_depth=1, fusion=FusionConfig(FusionMethod.ZSCORE))
    out = stage.retrieve(backend, "fs", query=query, vector=vector, k=1)
    assert len(out.candidates) == 1
    full = FirstStage(leg_depth=2).retrieve(backend, "fs", query=query, vector=vector, k=10)
    by_id = {c.chunk_id: c for c in full.candidates}
    # "dense" has no query term: its completed BM25 is exactly 0, not missing
    assert by_id["dense"].scores["lexical"] == 0.0
    # "lex" was found lexically; its dense score is its true cosine, filled in from its vector
    assert by_id["lex"].scores["dense"] == pytest.approx(float(_vec(3, 0.0) @ vector), abs=1e-6)
    exact = backend.lexical("fs", query, k=10)
    assert by_id["both"].scores["lexical"] == pytest.approx(
        next(h.score for h in exact if h.chunk.chunk_id == "both")
    )
    assert full.detail and full.detail["complete"] is True


def test_without_completion_missing_legs_are_absent(backend: EmbeddedBackend) -> None:
    out = FirstStage(leg_depth=2, complete=False).retrieve(
        backend, "fs", query="encryption key rotation", vector=_vec(0), k=10
    )
    assert any("lexical" not in c.scores or "dense" not in c.scores for c in out.candidates)


@pytest.mark.parametrize("mode", list(RetrievalMode))
def test_modes_and_empty_results(backend: EmbeddedBackend, mode: RetrievalMode) -> None:
    stage = FirstStage(mode=mode)
    out = stage.retrieve(backend, "fs", query="encryption", vector=_vec(0), k=10)
    assert out.candidates and all(c.score == c.first_stage_score for c in out.candidates)
    # only stop words and no vector: nothing to search with, so nothing comes back
    assert stage.retrieve(backend, "fs", query="the of and", vector=None, k=10).candidates == []


class _ServerHybrid:
    """The embedded backend plus a `hybrid` method shaped like the OpenSearch adapter's
    (no cluster can run here; this checks the glue, the adapter's bodies are spec-tested)."""

    def __init__(self, inner: EmbeddedBackend, client_mode: bool = False) -> None:
        self.inner = inner
        self.client_mode = client_mode
        self.calls: list[dict[str, object]] = []
        self.dense_calls = 0

    def dense(self, *args: object, **kw: object) -> object:
        self.dense_calls += 1
        return self.inner.dense(*args, **kw)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def hybrid(self, index: str, text: str, vector: np.ndarray, **kw: object) -> object:
        from evidence.search.base import HybridResult

        self.calls.append(kw)
        if self.client_mode:  # the adapter's client mode: the two legs, nothing fused
            return HybridResult(
                mode="client",  # type: ignore[arg-type]
                fused=None,
                lexical=self.inner.lexical(index, text, k=10),
                dense=self.dense(index, vector, k=10),  # type: ignore[arg-type]
            )
        lex = self.inner.lexical(index, text, k=10)
        fused = [replace(h, score=1.0 / (i + 1)) for i, h in enumerate(lex)]
        return HybridResult(mode="server", fused=fused, lexical=lex, fusion="rrf")  # type: ignore[arg-type]


def _recall_ctx(backend: object, *, server_hybrid: bool) -> RankContext:
    return RankContext(
        index="fs",
        query="encryption",
        query_vector=_vec(0),
        criterion_question=None,
        criterion_hash=None,
        params=ProfileParams(first_stage_k=5),
        filters=None,
        explain=False,
        backend=backend,  # type: ignore[arg-type]
        reranker=None,
        server_hybrid=server_hybrid,
    )


def test_server_hybrid_first_stage_uses_the_pipeline_ranking(backend: EmbeddedBackend) -> None:
    from evidence.rank.first_stage import ServerHybridFirstStage

    server = _ServerHybrid(backend)
    ctx = _recall_ctx(server, server_hybrid=True)
    got = HybridRecall().run([], ctx)
    assert server.calls and ctx.trace.detail == {"mode": "server-hybrid", "fusion": "rrf"}
    out = ServerHybridFirstStage().retrieve(server, "fs", query="encryption", vector=_vec(0), k=5)  # type: ignore[arg-type]
    assert got == out.candidates
    assert [c.score for c in out.candidates] == sorted((c.score for c in out.candidates), reverse=True)
    assert out.candidates[0].scores["fused"] == 1.0 and "lexical" in out.candidates[0].scores
    assert server.calls[0]["pagination_depth"] == 5
    assert out.detail == {"mode": "server-hybrid", "fusion": "rrf"}
    # server_hybrid off: our own fusion even when the backend offers `hybrid`
    calls = len(server.calls)
    HybridRecall().run([], _recall_ctx(server, server_hybrid=False))
    assert len(server.calls) == calls
    # client mode (Serverless): the legs are fused here
    client = _ServerHybrid(backend, client_mode=True)
    fused_here = ServerHybridFirstStage().retrieve(client, "fs", query="encryption", vector=_vec(0), k=5)  # type: ignore[arg-type]
    assert fused_here.detail["mode"] == "hybrid"
    # the backend's legs are fused as they came (completion uses stored vectors, not the dense leg)
    assert client.dense_calls == 1
    assert fused_here.candidates
    assert all({"lexical", "dense", "fused"} <= set(c.scores) for c in fused_here.candidates)
    ours = _recall_ctx(backend, server_hybrid=True)  # no `hybrid` on this backend: our fusion
    HybridRecall().run([], ours)
    assert ours.trace.detail["mode"] == "hybrid" and ours.trace.detail["complete"] is True


def test_a_requested_fusion_is_run_here_on_every_backend(backend: EmbeddedBackend) -> None:
    """`fusion` (a request override): the first stage fuses with it, client-side even where the
    cluster's pipeline would fuse (that pipeline's method is fixed at deploy time)."""
    server = _ServerHybrid(backend)
    ctx = replace(
        _recall_ctx(server, server_hybrid=True), params=ProfileParams(first_stage_k=5, fusion="rrf")
    )
    got = HybridRecall().run([], ctx)
    assert not server.calls and ctx.trace.detail["fusion"] == "rrf"
    # RRF's scores are rank-based: 1/(60 + rank) per leg, so the best is at most 2/61.
    assert got and max(c.score for c in got) <= 2 / 61 + 1e-12
    default = _recall_ctx(backend, server_hybrid=False)
    HybridRecall().run([], default)
    assert default.trace.detail["fusion"] == "zscore"
    for method in ("minmax", "zscore"):
        mctx = replace(
            _recall_ctx(backend, server_hybrid=False), params=ProfileParams(first_stage_k=5, fusion=method)
        )
        HybridRecall().run([], mctx)
        assert mctx.trace.detail["fusion"] == method
