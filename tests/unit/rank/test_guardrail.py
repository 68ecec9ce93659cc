"""The guardrail stage and its helpers: the inclusive floor, its order with top_k and the budget,
the similarity of a span without a vector, the withhold floor, deployment defaults, and the
verbatim cascade's caps as overridable defaults."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evidence.config import Settings
from evidence.errors import ConfigurationError
from evidence.ids import content_hash
from evidence.profiles import get_profile
from evidence.rank.candidate import Candidate
from evidence.rank.confidence import AnswerSignal
from evidence.rank.context import ProfileParams
from evidence.rank.guardrail import (
    Guardrail,
    at_or_above,
    deployment_defaults,
    similarities,
    withhold,
    within_chars,
)
from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.search.embedded import EmbeddedBackend
from evidence.verbatim.cascade import CascadeConfig
from tests.unit.rank.rankkit import DIM, INDEX, chunk, ctx, vec


def _cands(*pairs: tuple[str, float]) -> list[Candidate]:
    return [Candidate(chunk(f"c{i}", t), s, s, {"dense": s}) for i, (t, s) in enumerate(pairs)]


def _texts(out: list[Candidate]) -> list[str]:
    return [c.chunk.text for c in out]


def test_the_floor_is_inclusive() -> None:
    assert at_or_above(0.5, 0.5) and not at_or_above(0.4999, 0.5)
    out = Guardrail().run(_cands(("at", 0.5), ("below", 0.4999)), ctx(None, min_similarity=0.5))
    assert _texts(out) == ["at"]


def test_floor_then_top_k_then_budget() -> None:
    cands = _cands(("aaaa", 0.9), ("low", 0.1), ("bbbb", 0.8), ("cccc", 0.7))
    c = ctx(None, min_similarity=0.5, top_k=2, max_chars=8, explain=True)
    # the floor drops "low" first, so top_k=2 keeps two hits above it, and both fit 8 characters
    assert _texts(Guardrail().run(cands, c)) == ["aaaa", "bbbb"]
    reasons = [d["reason"] for d in c.trace.detail["dropped"]]
    assert reasons[0].startswith("similarity 0.1000 < min_similarity") and "beyond top_k=2" in reasons[1]
    assert _texts(Guardrail().run(cands, ctx(None, top_k=3, max_chars=6))) == ["aaaa"]


def test_defaults_change_nothing_but_top_k() -> None:
    cands = _cands(("a", 0.2), ("b", -0.3), ("c", 0.9))
    assert _texts(Guardrail().run(cands, ctx(None, params=ProfileParams(top_k=10)))) == ["a", "b", "c"]
    assert _texts(Guardrail().run(cands, ctx(None, min_similarity=0.0, max_chars=0, top_k=2))) == ["a", "b"]


def test_budget_is_seed_003s_exactly() -> None:
    assert within_chars([4, 8, 1], 6) == (1, 4)  # stops at the first overflow, never skips to "1"
    assert within_chars([4, 8, 1], None) == (3, 13) == within_chars([4, 8, 1], 0)
    assert within_chars([7], 6) == (0, 0)  # never cuts one


def _span(cid: str, start: int, end: int) -> Chunk:
    text = "x" * (end - start)
    return Chunk(
        cid, "doc", ChunkKind.SPAN, text, start, end, 0, source="doc.md", content_hash=content_hash(text)
    )


def _passage(cid: str, start: int, end: int, seq: int) -> Chunk:
    text = "p" * (end - start)
    return Chunk(
        cid, "doc", ChunkKind.PASSAGE, text, start, end, seq, source="doc.md", content_hash=content_hash(text)
    )


def test_a_span_without_a_vector_takes_the_best_cosine_of_its_passages(tmp_path: Path) -> None:
    backend = EmbeddedBackend(tmp_path / "s")
    backend.create_index(INDEX, embedder_id="test-hash", dimension=DIM)
    chunks = (
        _passage("p1", 0, 40, 0),
        _passage("p2", 30, 80, 1),
        _span("inside-p1", 5, 20),
        _span("straddles", 25, 45),
        _span("inside-p2", 60, 75),
    )
    vectors = np.full((len(chunks), DIM), np.nan, dtype=np.float32)
    vectors[0], vectors[1] = vec("alpha"), vec("beta")
    doc = DocumentChunks("doc", content_hash("doc"), "doc.md", chunks, {})
    backend.upsert(INDEX, [doc], [vectors])
    spans = [Candidate(c, 1.0, 1.0) for c in chunks[2:]]
    q = vec("alpha")
    sims = similarities(backend, INDEX, q, spans)
    beta = float(np.dot(q, vec("beta")))
    # Stored vectors are float16 (docs/scale.md): cosines read back are within ~1e-3.
    assert sims["inside-p1"] == pytest.approx(1.0, abs=1e-3)
    assert sims["straddles"] == pytest.approx(1.0, abs=1e-3)  # the better of its two passages
    assert sims["inside-p2"] == pytest.approx(beta, abs=1e-3)
    # the floor reads the computed similarity, inclusively, and records it
    out = Guardrail().run(spans, ctx(backend, query_vector=q, min_similarity=sims["inside-p2"]))
    assert [c.chunk_id for c in out] == ["inside-p1", "straddles", "inside-p2"]
    assert out[2].scores["dense"] == sims["inside-p2"]
    out = Guardrail().run(spans, ctx(backend, query_vector=q, min_similarity=0.99))
    assert [c.chunk_id for c in out] == ["inside-p1", "straddles"]
    # nothing to measure with (no query vector): kept, never guessed
    assert len(Guardrail().run(spans, ctx(backend, query_vector=None, min_similarity=0.99))) == 3
    backend.close()


def test_withhold_below_the_floor_and_keep_at_it() -> None:
    hits = _cands(("a", 0.9))

    def signal(confidence: float) -> AnswerSignal:
        return AnswerSignal(confidence, confidence >= 0.5, "dense", {})

    params = ProfileParams(withhold_below=0.5)
    assert withhold(params, signal(0.4999), hits) == ([], True)
    assert withhold(params, signal(0.5), hits) == (hits, False)
    assert withhold(params, signal(0.1), []) == ([], False)  # nothing to withhold
    assert withhold(ProfileParams(), signal(0.0), hits) == (hits, False)  # off by default
    assert withhold(ProfileParams(withhold_below=0.0), signal(0.0), hits) == (hits, False)


def test_deployment_defaults_layer_the_global_knobs_under_the_profiles(tmp_path: Path) -> None:
    s = Settings(
        store_dir=tmp_path,
        min_similarity=0.3,
        max_chars=900,
        profile_defaults={"coach": {"max_chars": 200}},
    )
    assert deployment_defaults(s, "coach") == {"min_similarity": 0.3, "max_chars": 200}
    assert deployment_defaults(s, "verbatim") == {"min_similarity": 0.3, "max_chars": 900}
    assert deployment_defaults(Settings(store_dir=tmp_path), "default") == {}
    bad = Settings(store_dir=tmp_path, profile_defaults={"vrm": {"top_k": 0}})
    with pytest.raises(ConfigurationError) as e:
        deployment_defaults(bad, "vrm")
    assert "EVIDENCE_PROFILE_DEFAULTS['vrm']" in e.value.message


def test_every_profile_ends_with_the_guardrail() -> None:
    for name in ("default", "vrm", "verbatim", "coach"):
        assert get_profile(name).stages[-1].name == "guardrail", name


def test_the_cascade_caps_are_defaults_a_request_overrides() -> None:
    cfg = CascadeConfig()
    verbatim = get_profile("verbatim").defaults
    assert (verbatim.top_k, verbatim.max_chars) == (cfg.max_spans, cfg.max_chars) == (8, 1500)
    # the defaults change nothing
    assert cfg.bounded(verbatim.top_k, verbatim.max_chars) == cfg
    wide = cfg.bounded(30, 0)
    assert (wide.max_spans, wide.max_chars) == (30, 0)
    # the hybrid span ranking returns a whole bundle (hybrid_spans = max_spans): it grows to top_k
    assert (wide.scan_spans, wide.attribute_spans, wide.hybrid_spans) == (19, 12, 30)
    assert wide.bm25_k >= 30 and wide.bm25_min_coverage == cfg.bm25_min_coverage
    narrow = cfg.bounded(2, 300)
    assert (narrow.max_spans, narrow.max_chars, narrow.scan_spans) == (2, 300, cfg.scan_spans)
    assert replace(narrow, max_spans=8, max_chars=1500) == cfg
