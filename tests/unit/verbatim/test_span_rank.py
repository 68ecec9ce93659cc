"""The span scorer of HYBRID_FACTSPAN (`verbatim/span_rank.py`): its features, its two-stage
ranking, and that the cascade ranks with the fitted weights file."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.errors import ServiceUnavailableError
from evidence.plan.verbatim import plan_question
from evidence.records import SpanType
from evidence.service import EvidenceService
from evidence.verbatim import span_rank
from evidence.verbatim.cascade import HYBRID_FACTSPAN, CascadeConfig, VerbatimCascade
from evidence.verbatim.span_rank import (
    DENSE_FEATURES,
    LEXICAL_FEATURES,
    MODEL_FILE,
    LinearModel,
    SpanModel,
    asked_types,
    cosine_columns,
    lexical_columns,
    load_model,
    rank_spans,
)
from tests.unit.verbatim.verbatimkit import span


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("For how many weeks should the infection be treated?", {"duration"}),
        ("What dose is given to children?", {"dose"}),
        ("How often must the audit log be rotated?", {"frequency"}),
        ("What is the maximum length of a string?", {"limit", "size"}),
        ("Why is the licence terminated automatically?", {"reason"}),
        ("What does 'Contribution' mean?", {"definition"}),
    ],
)
def test_the_answer_type_lexicon_reads_clinical_legal_and_technical_questions(
    question: str, expected: set[str]
) -> None:
    assert {t.name for t in asked_types(question)} >= expected


def test_a_table_row_stating_a_duration_matches_a_duration_question() -> None:
    spans = [
        span(0, "Patients should be treated with care.", SpanType.SENTENCE),
        span(1, "| Erosive esophagitis | 20 mg once daily | 4 to 8 weeks |", SpanType.TABLE_ROW),
        span(2, "- Take with food", SpanType.BULLET),
    ]
    cols = lexical_columns(
        spans,
        question="How long should esophagitis be treated?",
        passage=[0.5, 0.5, 0.5],
        bm25=[2.0, 1.0, 0.0],
        coverage=[0.5, 0.5, 0.0],
    )
    assert set(cols) == set(LEXICAL_FEATURES)
    assert cols["quantity_match"].tolist() == [0.0, 1.0, 0.0]
    assert cols["row_quantity"].tolist() == [0.0, 1.0, 0.0]
    assert cols["bullet"].tolist() == [0.0, 0.0, 1.0]
    assert cols["bm25"].tolist() == [1.0, 0.5, 0.0]  # max-normalised
    # a question asking for no figure: a row is still a row, but no row_quantity
    plain = lexical_columns(
        spans, question="Who wrote it?", passage=[0, 0, 0], bm25=[0, 0, 0], coverage=[0, 0, 0]
    )
    assert plain["row_quantity"].tolist() == [0.0, 0.0, 0.0] and plain["row"].tolist() == [0.0, 1.0, 0.0]


def fake_embed(texts: Sequence[str]) -> Any:
    """A vector per text: along x when it mentions "answer", along y otherwise."""
    return np.asarray([[1.0, 0.0] if "answer" in t else [0.0, 1.0] for t in texts], dtype=np.float32)


def test_cosines_are_of_the_span_and_of_its_heading() -> None:
    spans = [span(0, "the answer", section="Other"), span(1, "noise", section="The answer heading")]
    cols = cosine_columns(spans, np.asarray([1.0, 0.0]), fake_embed)
    assert cols["span_cosine"].tolist() == pytest.approx([1.0, 0.0])
    assert cols["heading_cosine"].tolist() == pytest.approx([0.0, 1.0])


def test_the_dense_model_reranks_only_the_lexical_top_n() -> None:
    spans = [span(i, t) for i, t in enumerate(["alpha", "beta", "the answer", "gamma", "another answer"])]
    lexical = {f: np.zeros(len(spans)) for f in LEXICAL_FEATURES}
    lexical["bm25"] = np.asarray([1.0, 0.9, 0.8, 0.7, 0.1])
    model = SpanModel(
        lexical=LinearModel({"bm25": 1.0}),
        dense=LinearModel({"bm25": 1.0, "span_cosine": 5.0}),
        top_n=4,
    )
    out = rank_spans(
        spans,
        lexical,
        candidates=range(5),
        model=model,
        query_vector=np.asarray([1.0, 0.0]),
        embed=fake_embed,
    )
    order = [i for _, i in out]
    # "the answer" (lexical 3rd) is lifted to first; "another answer" is outside the top 4: last
    assert order[0] == 2 and order[-1] == 4
    assert all(a >= b for (a, _), (b, _) in itertools.pairwise(out))
    # without a query vector (a lexical-only index) the lexical order stands
    assert [i for _, i in rank_spans(spans, lexical, candidates=range(5), model=model)] == [0, 1, 2, 3, 4]

    # an embedder that fails (a remote one throttled) leaves the lexical order, not an error
    def failing(texts: Sequence[str]) -> Any:
        raise ServiceUnavailableError("throttled")

    out = rank_spans(
        spans, lexical, candidates=range(5), model=model, query_vector=np.asarray([1.0, 0.0]), embed=failing
    )
    assert [i for _, i in out] == [0, 1, 2, 3, 4]


def test_the_weights_file_is_the_model_and_round_trips() -> None:
    raw = json.loads(MODEL_FILE.read_text())
    model = load_model()
    assert model.to_dict()["lexical"]["weights"] == raw["lexical"]["weights"]
    assert model.to_dict()["dense"]["weights"] == raw["dense"]["weights"]
    assert set(model.dense.weights) <= set(DENSE_FEATURES) and set(model.lexical.weights) <= set(
        LEXICAL_FEATURES
    )
    assert SpanModel.from_dict(model.to_dict()) == model


SCHEDULE = """# Orvadine tablets

## Dosage and administration

Orvadine is taken by mouth with water, and the tablets should not be crushed or chewed.

| Infection | Dose | Treatment length |
|---|---|---|
| Uncomplicated cystitis | 100 mg twice daily | 5 days |
| Pyelonephritis | 200 mg twice daily | 14 days |

Treatment of the infection should continue as long as the prescriber advises.

## Storage

Store the tablets below 25 °C.
"""


@pytest.fixture(scope="module")
def schedule(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    root = tmp_path_factory.mktemp("schedule")
    (root / "orvadine.md").write_text(SCHEDULE)
    service = EvidenceService(Settings(store_dir=root / "store"))
    assert not service.index_paths("sched", [root / "orvadine.md"], embed=False).failed
    return service


def hybrid_order(service: EvidenceService, question: str, model: SpanModel | None) -> list[str]:
    cfg = CascadeConfig(
        order=(HYBRID_FACTSPAN,), min_grounding=0.0, safety_net_grounding=0.0, span_model=model
    )
    res = VerbatimCascade(cfg).run(service.backend, "sched", question, plan_question(question))
    assert res.path_used == HYBRID_FACTSPAN
    return [h.chunk.text for h in res.hits]


def test_the_cascade_ranks_with_the_fitted_weights_file(
    schedule: EvidenceService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = "How long should treatment of pyelonephritis be continued?"
    fitted = hybrid_order(schedule, question, None)
    # the default (span_model None) is exactly the file's model ...
    assert fitted == hybrid_order(schedule, question, load_model(MODEL_FILE))
    # ... and the file is what the cascade reads: weights file negated, ranking changed
    model = load_model(MODEL_FILE)
    flip = SpanModel(
        LinearModel({k: -v for k, v in model.lexical.weights.items()}),
        LinearModel({k: -v for k, v in model.dense.weights.items()}),
        model.top_n,
    )
    other = tmp_path / "span_rank.json"
    other.write_text(json.dumps(flip.to_dict()))
    monkeypatch.setattr(span_rank, "MODEL_FILE", other)
    assert load_model() == replace(flip, fitted_on="")
    flipped = hybrid_order(schedule, question, None)
    assert flipped == hybrid_order(schedule, question, flip) != fitted


def test_table_rows_answer_a_duration_question_on_the_general_path(schedule: EvidenceService) -> None:
    """Not through an attribute rule: HYBRID_FACTSPAN alone, the fitted weights, no vectors."""
    order = hybrid_order(schedule, "How long should treatment of pyelonephritis be continued?", None)
    assert order[0].startswith("| Pyelonephritis |"), order


def test_the_verbatim_profile_hands_its_cascade_the_index_s_embedder(schedule: EvidenceService) -> None:
    """The span cosines are embedded by the index's document embedder (its cache scope), built on
    first use only: a lexical-only index never loads the model."""
    from evidence.profiles import ProfileEnv, ProfileServices
    from evidence.profiles.verbatim import VerbatimPlugin
    from evidence.verbatim.profile import VerbatimCascadeStage

    asked: list[tuple[str, list[str]]] = []

    class Embedder:
        def __init__(self, index: str) -> None:
            self.index = index

        def embed_documents(self, texts: Sequence[str]) -> Any:
            asked.append((self.index, list(texts)))
            return fake_embed(texts)

    def no_coach() -> Any:
        raise AssertionError("the verbatim profile needs no coach runtime")

    services = ProfileServices(document_embedder=Embedder, coach_runtime=no_coach)  # type: ignore[arg-type]
    env = ProfileEnv(backend=schedule.backend, settings=schedule.settings, index="sched", services=services)
    stage = VerbatimPlugin().pipeline(env).stages[0]
    assert isinstance(stage, VerbatimCascadeStage) and stage.embed is not None
    assert not asked  # nothing built or embedded until a span needs it
    assert stage.embed(["the answer"]).shape == (1, 2)
    assert asked == [("sched", ["the answer"])]
    # an embedder without word pieces: the span scorer's tokens model is not used
    assert span_rank.tokens_of(stage.embed) is None
    # no index (tools listing the profile): no embedder
    bare = VerbatimPlugin().pipeline(None).stages[0]
    assert isinstance(bare, VerbatimCascadeStage) and bare.embed is None
