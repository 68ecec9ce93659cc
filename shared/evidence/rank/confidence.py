"""Answerability: how likely the returned evidence answers the question, and a verdict.

Every retrieve reports `confidence` in [0, 1] and `can_answer` (docs/ranking.md, Answerability).
The signal reads two things about the first `HEAD` hits that mean the same on both backends, with
or without a reranker, whatever order the last stage left them in (the profile hands it the hits
in their fused order when `focus`'s `anchor_order` moved them, `RankOutcome.judged`):

- `cosine`: the best cosine between the query vector and a hit's stored vector (the first stage's
  dense score when it has one, else the vector looked up, as `min_similarity` does);
- `coverage`: the best share of the query's analysed terms (stop words out, stemmed) that one hit
  contains.

A logistic model over them gives the probability that the index holds an answer; it was fitted by
`bench/answerability.py` on SciFact's test questions (in-domain) against 155 questions from other
fields (`bench/data/answerability/out_of_domain.txt`), both run against the SciFact index.
`can_answer` when the probability reaches `EVIDENCE_ANSWER_MIN_CONFIDENCE` (0.3); `confidence` is
the probability mapped so that the bar lands on 0.5 (`on_bar`), the bar every profile shares.

A reranker's score is recorded (`features.rerank`) but never read: Cohere's and Bedrock's scores
are on scales of their own (and change with the model), and the reranker already acts through
its own `rerank_cutoff` stage. A cosine is only comparable with the embedder it was fitted on, so
an index embedded by another model (Titan) falls back to the coverage-only model, as does a
lexical-only index (`basis` says which).

Bases: `dense` (cosine and coverage), `lexical` (coverage only), `cascade` (the verbatim profile,
`verbatim.profile.cascade_signal`), `followups` (no hit, but follow-ups linked to the criterion:
the vendor answered it, 1.0), `none` (nothing returned, 0.0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evidence.names import MINILM_MODEL_ID
from evidence.rank.candidate import Candidate
from evidence.rank.similarity import cosines
from evidence.search.analysis import get_analyzer

#: Hits the signal reads: enough that a reranker reordering the top does not change it.
HEAD = 3


def sigmoid(z: float) -> float:
    """The logistic function, without overflow at either end (`math.exp` of a large positive
    number raises): every fitted logistic model here (answerability, refusal, the coach's) reads
    its probability through it."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True, slots=True)
class Calibration:
    """logit = dense * cosine + coverage * coverage + bias (fitted by bench/answerability.py)."""

    dense: float
    coverage: float
    bias: float

    def probability(self, cosine: float, coverage: float) -> float:
        return sigmoid(self.dense * cosine + self.coverage * coverage + self.bias)


#: Per embedder id: the cosine scale is the embedder's own.
DENSE_CALIBRATIONS: Mapping[str, Calibration] = {
    MINILM_MODEL_ID: Calibration(dense=29.617, coverage=4.3181, bias=-12.3397),
}
#: Coverage alone: embedder-independent, for lexical-only indexes and uncalibrated embedders.
LEXICAL_CALIBRATION = Calibration(dense=0.0, coverage=9.1773, bias=-4.2691)


@dataclass(frozen=True, slots=True)
class AnswerSignal:
    confidence: float
    can_answer: bool
    basis: str
    #: The inputs, for telemetry and calibration: cosine, coverage, top reranker score.
    features: dict[str, float]


def term_coverage(query: str, text: str) -> float:
    """Share of the query's distinct analysed terms (stop words out, stemmed) present in `text`."""
    return _coverage(frozenset(get_analyzer().analyze(query)), text)


def _coverage(terms: frozenset[str], text: str) -> float:
    if not terms:
        return 0.0
    return len(terms & set(get_analyzer().analyze(text))) / len(terms)


def head_cosines(
    hits: Sequence[Candidate], stored: Mapping[str, np.ndarray], query_vector: np.ndarray | None
) -> list[float]:
    """The cosine of each of the first `HEAD` hits with the query: its dense score, else the
    cosine with its stored vector (`stored`, by chunk id); hits with neither are left out."""
    out: list[float] = []
    computed = cosines(query_vector, stored)
    for c in hits[:HEAD]:
        dense = c.scores.get("dense")
        if dense is not None:
            out.append(float(dense))
        elif c.chunk_id in computed:
            out.append(computed[c.chunk_id])
    return [x for x in out if math.isfinite(x)]


def missing_cosines(hits: Sequence[Candidate]) -> list[str]:
    """Chunk ids among the first `HEAD` hits whose stored vector the signal must look up."""
    return [c.chunk_id for c in hits[:HEAD] if "dense" not in c.scores]


def answer_signal(
    query: str,
    hits: Sequence[Candidate],
    followups: Sequence[Candidate],
    *,
    cosines: Sequence[float] = (),
    embedder_id: str | None = None,
    min_confidence: float = 0.5,
) -> AnswerSignal:
    """The verdict on one response. `cosines`: `head_cosines` of the hits (empty when the index
    has no vectors); `embedder_id`: the index's embedder, which picks the calibration."""
    if not hits:
        if followups:
            return AnswerSignal(1.0, True, "followups", {})
        return AnswerSignal(0.0, False, "none", {})
    terms = frozenset(get_analyzer().analyze(query))
    # A focused hit (rank.stages.FocusHits) carries its whole passage's coverage: shortening the
    # evidence must not change the verdict.
    coverage = max(
        c.scores["coverage"] if "coverage" in c.scores else _coverage(terms, c.chunk.search_text)
        for c in hits[:HEAD]
    )
    features = {"coverage": round(coverage, 6)}
    if "rerank" in hits[0].scores:
        features["rerank"] = round(float(hits[0].scores["rerank"]), 6)
    calibration = DENSE_CALIBRATIONS.get(embedder_id or "")
    if cosines and calibration is not None:
        cosine = max(cosines)
        features["cosine"] = round(cosine, 6)
        p = calibration.probability(cosine, coverage)
        basis = "dense"
    else:
        p = LEXICAL_CALIBRATION.probability(0.0, coverage)
        basis = "lexical"
    return AnswerSignal(round(on_bar(p, min_confidence), 4), p >= min_confidence, basis, features)


def on_bar(p: float, bar: float) -> float:
    """A probability on the confidence scale every profile shares, whose `can_answer` bar is 0.5:
    piecewise linear, exactly 0.5 at `bar` (the identity when the bar is 0.5), so `can_answer`
    and `confidence` agree whatever bar a setting or a fit chose."""
    if bar <= 0:
        return 0.5 + 0.5 * p
    if p < bar:
        return 0.5 * p / bar
    return 0.5 + 0.5 * (p - bar) / (1 - bar) if bar < 1 else 1.0


def hit_relevance(
    query: str,
    hits: Sequence[Candidate],
    *,
    cosines: Mapping[str, float],
    embedder_id: str | None,
) -> list[float]:
    """A calibrated relevance per hit, for a relevancy cutoff when no reranker scored the hits.

    The answerability model read on one hit instead of the best of the head: the probability
    that this hit, by its own cosine with the query (`cosines`, by chunk id) and its own share
    of the query's terms, is answer-bearing evidence. Same calibration, same embedder rule: a
    hit without a cosine, or an index whose embedder has no fitted model, gets the coverage-only
    model. Measured on the demo vendor corpus and held-out vendor fixtures (docs/ranking.md).
    """
    terms = frozenset(get_analyzer().analyze(query))
    calibration = DENSE_CALIBRATIONS.get(embedder_id or "")
    out = []
    for c in hits:
        coverage = _coverage(terms, c.chunk.search_text)
        cosine = cosines.get(c.chunk_id)
        if calibration is not None and cosine is not None and math.isfinite(cosine):
            out.append(calibration.probability(cosine, coverage))
        else:
            out.append(LEXICAL_CALIBRATION.probability(0.0, coverage))
    return out
