"""The span scorer of `HYBRID_FACTSPAN`: a small logistic model over a handful of span features,
its weights kept as data (`data/span_rank.json`, written by `bench/span_rank_fit.py`).

The answer to a paraphrased question usually sits in a span the old fixed blend (`0.5 * passage
cosine + 0.5 * heading-aware BM25`) ranked 2nd-50th (`bench/qa/misses.py`): wording and the
passage's meaning alone do not say *which* sentence of the passage answers. The features here add
what does, each measured leave-one-family-out by the fitting script before it earned a weight:

- `passage`: cosine of the best passage holding the span, min-max over the scope's passages
  (without vectors: their BM25);
- `bm25`: BM25 of the span read with its section heading (a table row with its caption and
  header), max-normalised over the scope;
- `coverage`: the IDF-weighted share of the question's concepts the span (with its heading) holds;
- `quantity_match`: the question asks for a figure of a kind (a duration, a dose, a count, a
  rate…) and the span states one of that kind; `form_match`: the same for the other answer types
  (a definition, a reason, a condition, a procedure) — both from the answer-type lexicon the
  refusal signal reads too (`verbatim.answer_types`, `data/answer_types.json`), cross-domain,
  naming no document;
- `row_quantity`: the span is a table row and the question asks for a figure (dosage tables
  answer "how long" and "how much");
- `row`, `bullet`: the span's kind; `length`: log of its characters over a sentence's (~150);
  its dense weight is lowered after the fit until the most answers fit the 600-character budget
  on the training families (`bench/span_rank_fit.py`, `budgeted`): short spans first when unsure;
- `span_cosine`, `heading_cosine`: the question's cosine with the span's own text and with its
  section heading (intent by meaning). Spans have no stored vectors, so these are computed at
  query time for the best `top_n` spans of the lexical model only, through the store's
  embedding cache (a span embedded once is never embedded again).

Two models, one file: `lexical` (no cosine features) ranks every span of the scope and is the
whole ranking when the index has no vectors; `dense` re-ranks the lexical model's `top_n`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from evidence.errors import DeadlineExceededError, EvidenceError
from evidence.records import Chunk, SpanType
from evidence.verbatim.answer_types import AnswerType, answer_types

DATA = Path(__file__).parent / "data"
MODEL_FILE = DATA / "span_rank.json"

#: Features of the lexical model, then the two the dense model adds (computed for its top_n only).
LEXICAL_FEATURES = (
    "passage",
    "bm25",
    "coverage",
    "quantity_match",
    "form_match",
    "row_quantity",
    "row",
    "bullet",
    "length",
)
DENSE_FEATURES = (*LEXICAL_FEATURES, "span_cosine", "heading_cosine")

#: A sentence's typical length in characters: `length` is log(chars / this).
_SENTENCE_CHARS = 150.0

#: Embeds texts (rows of unit vectors), the store's embedding cache in front.
Embed = Callable[[Sequence[str]], Any]


def asked_types(question: str, types: Sequence[AnswerType] | None = None) -> tuple[AnswerType, ...]:
    """The answer types a question asks for (none, one or several; the lexicon's by default)."""
    if types is None:
        return answer_types().asked(question)
    return tuple(t for t in types if t.asked_by(question))


@dataclass(frozen=True)
class LinearModel:
    """`sigmoid(bias + sum of weight * feature)`; a feature without a weight counts 0."""

    weights: Mapping[str, float]
    bias: float = 0.0

    def score(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(columns.values()))) if columns else 0
        z = np.full(n, self.bias, dtype=np.float64)
        for name, w in self.weights.items():
            if w and name in columns:
                z += w * columns[name]
        return np.asarray(1.0 / (1.0 + np.exp(-z)))


@dataclass(frozen=True)
class SpanModel:
    lexical: LinearModel
    dense: LinearModel
    #: Spans of the lexical ranking the dense model re-ranks (their texts and headings embedded).
    top_n: int = 40
    #: Where the weights came from (the fitting script's summary), for docs and telemetry.
    fitted_on: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SpanModel:
        def linear(m: Mapping[str, Any]) -> LinearModel:
            return LinearModel({str(k): float(v) for k, v in m["weights"].items()}, float(m.get("bias", 0.0)))

        return cls(
            lexical=linear(raw["lexical"]),
            dense=linear(raw["dense"]),
            top_n=int(raw.get("top_n", 40)),
            fitted_on=str(raw.get("fitted_on", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "fitted_on": self.fitted_on,
            "top_n": self.top_n,
            "lexical": {"bias": self.lexical.bias, "weights": dict(self.lexical.weights)},
            "dense": {"bias": self.dense.bias, "weights": dict(self.dense.weights)},
        }


def load_model(path: Path | None = None) -> SpanModel:
    """The model in `path`, by default the fitted one (`MODEL_FILE`, read once)."""
    return _read_model(path or MODEL_FILE)


@lru_cache(maxsize=4)
def _read_model(path: Path) -> SpanModel:
    return SpanModel.from_dict(json.loads(path.read_text(encoding="utf-8")))


def lexical_columns(
    spans: Sequence[Chunk],
    *,
    question: str,
    passage: Sequence[float],
    bm25: Sequence[float],
    coverage: Sequence[float],
    types: Sequence[AnswerType] | None = None,
) -> dict[str, np.ndarray]:
    """The lexical model's features for every span (`bm25` raw: max-normalised here)."""
    asked = asked_types(question, types)
    quantity = [t for t in asked if t.quantity]
    form = [t for t in asked if not t.quantity]
    top = max(bm25, default=0.0) or 1.0
    n = len(spans)
    q_match = np.zeros(n)
    f_match = np.zeros(n)
    row = np.zeros(n)
    bullet = np.zeros(n)
    length = np.zeros(n)
    for i, c in enumerate(spans):
        text = c.text
        if quantity and any(t.reads_in(text) for t in quantity):
            q_match[i] = 1.0
        if form and any(t.reads_in(text) for t in form):
            f_match[i] = 1.0
        row[i] = 1.0 if c.span_type is SpanType.TABLE_ROW else 0.0
        bullet[i] = 1.0 if c.span_type is SpanType.BULLET else 0.0
        length[i] = math.log(max(len(text), 10) / _SENTENCE_CHARS)
    return {
        "passage": np.asarray(passage, dtype=np.float64),
        "bm25": np.asarray(bm25, dtype=np.float64) / top,
        "coverage": np.asarray(coverage, dtype=np.float64),
        "quantity_match": q_match,
        "form_match": f_match,
        "row_quantity": row * (1.0 if quantity else 0.0),
        "row": row,
        "bullet": bullet,
        "length": length,
    }


def cosine_columns(
    spans: Sequence[Chunk], query_vector: Any, embed: Embed, *, context: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """`span_cosine` and `heading_cosine` of some spans: their texts (`context`: the texts to
    embed instead, e.g. a table row with its header) and distinct headings, embedded in one call."""
    texts = list(context) if context is not None else [c.text for c in spans]
    headings = list(dict.fromkeys(c.section for c in spans if c.section))
    vectors = np.asarray(embed([*texts, *headings]), dtype=np.float32)
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    cos = vectors @ q / ((np.linalg.norm(vectors, axis=1) * (np.linalg.norm(q) or 1.0)) + 1e-12)
    span_cos = cos[: len(texts)].astype(np.float64)
    by_heading = dict(zip(headings, cos[len(texts) :].tolist(), strict=True))
    head_cos = np.asarray([by_heading.get(c.section, 0.0) for c in spans], dtype=np.float64)
    return {"span_cosine": span_cos, "heading_cosine": head_cos}


def rank_spans(
    spans: Sequence[Chunk],
    lexical: Mapping[str, np.ndarray],
    *,
    candidates: Sequence[int],
    model: SpanModel,
    query_vector: Any = None,
    embed: Embed | None = None,
    embed_texts: Sequence[str] | None = None,
) -> list[tuple[float, int]]:
    """(score, position) of the candidate spans, best first: every candidate by the lexical
    model; with a query vector and an embedder, its `top_n` re-ranked by the dense model (above
    the rest, which keep their lexical order)."""
    if not candidates:
        return []
    idx = np.asarray(candidates, dtype=np.int64)
    lex = model.lexical.score({k: v[idx] for k, v in lexical.items()})
    order = sorted(range(len(idx)), key=lambda j: (-lex[j], int(idx[j])))
    ranked = [(float(lex[j]), int(idx[j])) for j in order]
    if query_vector is None or embed is None or model.top_n <= 0:
        return ranked
    head = [i for _, i in ranked[: model.top_n]]
    cols = {k: v[np.asarray(head, dtype=np.int64)] for k, v in lexical.items()}
    try:
        cosines = cosine_columns(
            [spans[i] for i in head],
            query_vector,
            embed,
            context=[embed_texts[i] for i in head] if embed_texts is not None else None,
        )
    except DeadlineExceededError:
        raise
    except EvidenceError:
        # The embedder failed (a remote one throttled or down): the lexical ranking still
        # answers; the cosines only refine its head.
        return ranked
    cols.update(cosines)
    dense = model.dense.score(cols)
    top = sorted(range(len(head)), key=lambda j: (-dense[j], head[j]))
    # The re-ranked head stays above the tail: its dense probabilities and the tail's lexical
    # ones are on different scales, so the tail is kept below the head's lowest score.
    floor = float(min(dense, default=0.0))
    tail = [(min(sc, floor) * 0.999, i) for sc, i in ranked[model.top_n :]]
    return [(float(dense[j]), head[j]) for j in top] + tail
