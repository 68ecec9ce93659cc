"""The quality gate: a fixed SciFact slice whose nDCG@10 must not fall below committed floors.

A fusion or scoring regression (dropping z-score's division by the standard deviation, flooring
a missing leg at 0, a broken analyzer) passes every unit test that checks shapes and orders on
toy data; it shows up as a lower nDCG. The full SciFact run takes minutes, so the gate scores a
slice (bench/quality_slice.py: 100 test queries, their relevant documents and each one's top-20
BM25 hard negatives) with the document vectors MiniLM gave them, stored, and the real model for
the queries. The floors sit a little under the slice's measured figures (slice.json): what the
code scores there is deterministic, so any drop is a change in ranking, not noise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.evaluation import run_eval, subset_dataset
from evidence.service import EvidenceService, build_embedder
from evidence.testing import PrecomputedEmbedder
from tests.prerequisites import missing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"
SLICE = ROOT / "tests" / "data" / "scifact_slice"
REBUILD = "rebuild the slice: .venv/bin/python bench/quality_slice.py"

#: Committed floors: the slice's figures when the gate was set (slice.json), less 0.005.
FLOORS = {"bm25": 0.7355, "hybrid": 0.7865}


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvidenceService, dict[str, dict[str, Any]]]:
    """The slice scored once per mode by `run_eval`, the same code as `evidence eval`."""
    if not SCIFACT.is_dir():
        missing("SciFact dataset", "put the BEIR SciFact files in ../shared/datasets/scifact")
    meta = json.loads((SLICE / "slice.json").read_text())
    tmp = tmp_path_factory.mktemp("quality-gate")
    folder = subset_dataset(SCIFACT, set(meta["documents"]), set(meta["queries"]), tmp / "slice")
    settings = Settings(store_dir=tmp / "store")
    stored = np.load(SLICE / "vectors.npz")
    embedder = PrecomputedEmbedder(list(stored["keys"]), stored["vectors"], build_embedder(settings), REBUILD)
    service = EvidenceService(settings, embedder=embedder)
    results = {mode: run_eval(service, folder, mode=mode) for mode in sorted(FLOORS)}
    assert all(r["queries"] == len(meta["queries"]) for r in results.values())
    return service, results


@pytest.mark.parametrize("mode", sorted(FLOORS))
def test_slice_ndcg_stays_above_its_floor(
    gate: tuple[EvidenceService, dict[str, dict[str, Any]]], mode: str
) -> None:
    result = gate[1][mode]
    assert result["ndcg_at_10"] >= FLOORS[mode], (mode, result)


def test_stored_vectors_are_the_models(gate: tuple[EvidenceService, dict[str, dict[str, Any]]]) -> None:
    """Two stored vectors against the live model: a model change makes the slice stale."""
    from evidence.search.embedded import EmbeddedBackend

    service = gate[0]
    backend = service.backend
    assert isinstance(backend, EmbeddedBackend)
    texts = []
    for doc, _ in backend.index_store("eval-slice").documents():
        texts.append(doc.chunks[0].search_text)
        if len(texts) == 2:
            break
    stored = service.embedder.embed_documents(texts)
    live = build_embedder(service.settings).embed_documents(texts)
    assert np.all(np.sum(stored * live, axis=1) > 0.999), REBUILD
