"""The span scorer's structure features (`span_rank.structure_columns`: the span's place in its
section) and the model file's version (`SpanModel.from_dict`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from evidence.errors import ConfigurationError
from evidence.records import Chunk, SpanType
from evidence.verbatim import span_rank
from evidence.verbatim.span_rank import (
    LEXICAL_FEATURES,
    MODEL_VERSION,
    STRUCTURE_FEATURES,
    LinearModel,
    SpanModel,
    rank_spans,
    structure_columns,
)
from tests.unit.verbatim.verbatimkit import span


def test_structure_features_read_the_span_s_place_in_its_section() -> None:
    spans = [
        span(0, "Dosing is weight based.", section="Dosage"),
        span(1, "Give it with food.", section="Dosage"),
        span(2, "- adults: 10 mg", SpanType.BULLET, section="Dosage"),
        span(3, "- children: 5 mg", SpanType.BULLET, section="Dosage"),
        span(4, "| adults | 10 mg |", SpanType.TABLE_ROW, section="Dosage"),
        span(5, "| Week 1 | 5 mg |", SpanType.TABLE_ROW, section="Titration"),
        span(6, "| Week 2 | 10 mg |", SpanType.TABLE_ROW, section="Titration"),
        # the same heading in another document is another section
        replace(span(7, "Titrate slowly.", section="Titration"), document_id="e"),
    ]
    cols = structure_columns(spans)
    assert set(cols) == set(STRUCTURE_FEATURES)
    assert cols["section_first"].tolist() == [1, 0, 0, 0, 0, 1, 0, 1]
    assert cols["section_pos"].tolist() == pytest.approx(np.log1p([0, 1, 2, 3, 4, 0, 1, 0]).tolist())
    # a list starts at its first bullet; a table right after it starts again; a new section's
    # table starts at its first row
    assert cols["list_start"].tolist() == [0, 0, 1, 0, 1, 1, 0, 0]
    assert all(len(v) == 0 for v in structure_columns([]).values())


def test_the_dense_model_lifts_the_sentence_that_opens_its_section() -> None:
    spans = [
        span(0, "Intro.", section="A"),
        span(1, "More.", section="B"),
        span(2, "Even more.", section="B"),
    ]
    lexical = {f: np.zeros(len(spans)) for f in LEXICAL_FEATURES}
    lexical["bm25"] = np.asarray([1.0, 0.5, 0.9])

    def embed(texts: Sequence[str]) -> Any:
        return np.ones((len(texts), 2), dtype=np.float32)

    model = SpanModel(
        lexical=LinearModel({"bm25": 1.0}), dense=LinearModel({"bm25": 1.0, "section_first": 2.0}), top_n=3
    )
    out = rank_spans(
        spans, lexical, candidates=range(3), model=model, query_vector=np.asarray([1.0, 0.0]), embed=embed
    )
    # span 1 opens section B: it passes span 2, which the lexical model put ahead of it
    assert [i for _, i in out] == [0, 1, 2]
    lexical_only = rank_spans(spans, lexical, candidates=range(3), model=model)
    assert [i for _, i in lexical_only] == [0, 2, 1]


def test_the_scope_is_walked_for_structure_only_when_a_model_weighs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans = [span(i, f"Sentence {i}.", section="A") for i in range(3)]
    lexical = {f: np.zeros(len(spans)) for f in LEXICAL_FEATURES}
    walks: list[int] = []
    real = span_rank.structure_columns

    def counted(scope: Sequence[Chunk]) -> dict[str, np.ndarray]:
        walks.append(len(scope))
        return real(scope)

    monkeypatch.setattr(span_rank, "structure_columns", counted)

    def embed(texts: Sequence[str]) -> Any:
        return np.ones((len(texts), 2), dtype=np.float32)

    plain = SpanModel(lexical=LinearModel({"bm25": 1.0}), dense=LinearModel({"bm25": 1.0}), top_n=3)
    with_tokens = replace(plain, tokens=LinearModel({"list_start": 0.5}))
    assert not plain.reads_structure and with_tokens.reads_structure
    for model, expected in ((plain, []), (with_tokens, [3])):
        walks.clear()
        rank_spans(
            spans, lexical, candidates=range(3), model=model, query_vector=np.asarray([1.0, 0.0]), embed=embed
        )
        assert walks == expected


def model_file(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "top_n": 40,
        "lexical": {"bias": 0.0, "weights": {"bm25": 1.0}},
        "dense": {"bias": 0.0, "weights": {"bm25": 1.0, "section_first": 0.3}},
        "version": MODEL_VERSION,
    }
    return raw | over


def test_the_model_file_carries_its_version_and_round_trips() -> None:
    model = SpanModel.from_dict(model_file())
    assert model.dense.weights["section_first"] == 0.3
    assert model.to_dict()["version"] == MODEL_VERSION
    assert SpanModel.from_dict(model.to_dict()) == model
    # a file of the first format (no version field, no structure features) still reads
    old = {k: v for k, v in model_file(dense={"weights": {"bm25": 1.0}}).items() if k != "version"}
    assert SpanModel.from_dict(old).dense.weights == {"bm25": 1.0}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (model_file(version=99), "version 99 is not one this code reads"),
        # JSON's true and 2.0 equal 1 and 2 in Python, but are no version this code wrote
        (model_file(version=True), "version True is not one"),
        (model_file(version=2.0), "version 2.0 is not one"),
        ({k: v for k, v in model_file().items() if k != "dense"}, "no dense model"),
        (model_file(lexical={"bias": 0.0}), "no lexical model with a weights object"),
        # the first format had no structure features: a weight on one is not that format
        ({k: v for k, v in model_file().items() if k != "version"}, "dense model weighs features"),
        (model_file(lexical={"weights": {"bm25": 1.0, "section_first": 1.0}}), "section_first"),
        (model_file(tokens={"weights": {"bm25": 1.0, "made_up": 1.0}}), "made_up"),
    ],
)
def test_a_model_file_this_code_cannot_read_is_refused_with_the_reason(
    raw: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        SpanModel.from_dict(raw)
