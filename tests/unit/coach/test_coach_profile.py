"""The `coach` profile of the ranking layer: recall over graph nodes, then graph expansion."""

from __future__ import annotations

from pathlib import Path

from evidence.coach.profile import GraphExpansion, coach_profile, recall_profile
from evidence.graph import index_graph
from evidence.graph.documents import NodeView
from evidence.rank.context import RankContext
from evidence.search.embedded import EmbeddedBackend
from evidence.testing import HashingEmbedder
from tests.unit.graph.graphkit import small_graph

EMB = HashingEmbedder(32)


def _ctx(backend: EmbeddedBackend, query: str, *, explain: bool = True) -> RankContext:
    profile = coach_profile()
    return RankContext(
        index="kg",
        query=query,
        query_vector=EMB.embed_query(query),
        criterion_question=None,
        criterion_hash=None,
        params=profile.defaults,
        filters=None,
        explain=explain,
        backend=backend,
        reranker=None,
    )


def test_expansion_adds_prerequisites_and_content(tmp_path: Path) -> None:
    backend = EmbeddedBackend(tmp_path / "s")
    index_graph(backend, EMB, "kg", small_graph(), graph_id="g")
    outcome = coach_profile().run(_ctx(backend, "Solve linear equations"))
    ids = [v.id for c in outcome.hits if (v := NodeView.from_chunk(c.chunk)) is not None]
    assert ids[0] == "LO-C"
    assert {"LO-B", "LO-D", "EX-C1"} <= set(ids)
    assert [s.name for s in outcome.stages] == [
        "first_stage",
        "candidate_limit",
        "rerank",
        "graph",
        "mmr",
        "top_k",
        "guardrail",
    ]
    graph_stage = next(s for s in outcome.stages if s.name == "graph")
    assert graph_stage.detail is None or graph_stage.detail.get("added", 0) >= 0
    assert len(ids) == len(set(ids)) and len(ids) <= coach_profile().defaults.top_k
    backend.close()


def test_expansion_leaves_non_graph_hits_alone(tmp_path: Path) -> None:
    from tests.unit.rank.rankkit import chunk

    backend = EmbeddedBackend(tmp_path / "s")
    ctx = _ctx(backend, "x")
    from evidence.rank.candidate import Candidate

    plain = [Candidate(chunk=chunk("c1"), score=1.0, first_stage_score=1.0)]
    assert GraphExpansion().run(plain, ctx) == plain


def test_the_engines_recall_is_the_profiles_first_stages() -> None:
    assert [s.name for s in recall_profile(rerank=True).stages] == [
        "first_stage",
        "candidate_limit",
        "rerank",
    ]
    assert [s.name for s in recall_profile(rerank=False).stages] == ["first_stage", "candidate_limit"]


def test_recall_keeps_to_graph_nodes_when_the_index_holds_other_documents(tmp_path: Path) -> None:
    """A plain document that matches the question better than any node is still not recalled."""
    from evidence.ids import content_hash
    from evidence.records import DocumentChunks
    from tests.unit.rank.rankkit import chunk

    backend = EmbeddedBackend(tmp_path / "s")
    index_graph(backend, EMB, "kg", small_graph(), graph_id="g")
    text = "Solve linear equations. Solve linear equations step by step."
    plain = chunk("plain-1", text, doc="notes/plain.md")
    doc = DocumentChunks(
        document_id="notes/plain.md",
        content_hash=content_hash(text),
        source="plain.md",
        chunks=(plain,),
        metadata=dict(plain.metadata),
    )
    backend.upsert("kg", [doc], [EMB.embed_documents([text])])
    outcome = coach_profile().run(_ctx(backend, "Solve linear equations"))
    assert outcome.hits
    assert [h.chunk_id for h in outcome.hits if NodeView.from_chunk(h.chunk) is None] == []
    backend.close()


def test_the_coach_fuses_as_docs_seeds_says() -> None:
    """Issue 25 item 4: docs/seeds.md said the coach fuses with RRF while the code used z-scores.
    The doc now names the code's fusion (and why, measured); this keeps them together."""
    from pathlib import Path

    from evidence.coach.profile import NodeRecall
    from evidence.rank.fusion import FusionMethod

    recall = recall_profile(rerank=False).stages[0]
    assert isinstance(recall, NodeRecall)
    assert recall.inner.ours.fusion.method is FusionMethod.ZSCORE
    doc = (Path(__file__).resolve().parents[3] / "docs" / "seeds.md").read_text(encoding="utf-8")
    stages = doc[doc.index('<a id="seed-004-stages"></a>') : doc.index('<a id="seed-004-contract"></a>')]
    assert "we fuse by **z-score**" in stages and "fused with RRF" not in stages
