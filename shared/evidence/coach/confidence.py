"""Answer, clarify or decline: calibrated confidence and the decision built on it.

Node relevance: the probability that a node is what the query is about, a logistic model of its
dense cosine to the query and of the share of the query's topic words in its text and its title
(a reranker's score replaces it when a reranker ran). Query level, two logistic models over
generic features (no graph- or query-specific terms):

- `in_domain`: P(the graph covers the question) from the best cosine and the best word coverage;
- `confidence`: P(the retriever can answer without asking back) from the same two, the best
  node relevance and an ambiguity indicator.

Ambiguity is decided by rules and one fitted margin: the query has no topic words; it refers to
something earlier ("that step") with no conversation to resolve it; it names a topic but neither
asks a question nor says what the student wants ("derivatives?"); it names only a whole subject
("teach me algebra"); or two LOs that no prerequisite edge links each have a sentence that
answers it about equally well (a term with two meanings in the graph: "the product rule" of
exponents and of derivatives).

Decision: `can_answer` when confidence >= 0.5 and nothing is ambiguous; otherwise
`needs_clarification` when the query is ambiguous or in the domain (the low-confidence region);
otherwise out of scope. The coefficients live in `calibration.py`, fitted by
`bench/coach_calibrate.py` on the labelled queries of the sample graph (see docs/coach.md for
the figures and how to refit on another graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evidence.coach import calibration as cal
from evidence.rank.confidence import sigmoid


def logistic(weights: Sequence[float], features: Sequence[float]) -> float:
    """`weights[0]` is the intercept."""
    return sigmoid(weights[0] + sum(w * x for w, x in zip(weights[1:], features, strict=True)))


def node_relevance(cos: float | None, cov_text: float, cov_title: float) -> float:
    """P(node is what the query asks about). Without a dense score the cosine counts as 0."""
    return logistic(cal.NODE_WEIGHTS, (0.0 if cos is None else cos, cov_text, cov_title))


@dataclass(frozen=True, slots=True)
class QueryFeatures:
    #: Best dense cosine between the query and any node (0 when there is no dense leg).
    cos_max: float
    #: Best share of the query's topic words found in one of the top nodes.
    coverage: float
    #: Relevance of the best LO.
    top: float
    #: How much better the top LO's best sentence answers the query than the best sentence of a
    #: distinct LO (not linked to it by a prerequisite edge); 1 when there is none.
    sense_gap: float
    #: Number of topic words in the query.
    words: int
    vague: bool = False
    unresolved_reference: bool = False
    bare_topic: bool = False
    broad: bool = False
    seek_clarification: bool = False
    #: The query refers back to nodes the conversation cites, and they exist in the index.
    prior: bool = False

    def vector(self) -> tuple[float, ...]:
        return (self.cos_max, self.coverage, self.top, float(self.ambiguous))

    @property
    def split(self) -> bool:
        return self.sense_gap <= cal.SENSE_GAP

    @property
    def ambiguous(self) -> bool:
        return self.vague or self.unresolved_reference or self.bare_topic or self.broad or self.split

    @property
    def reasons(self) -> list[str]:
        out = []
        for name in ("vague", "unresolved_reference", "bare_topic", "broad", "split", "seek_clarification"):
            if getattr(self, name):
                out.append(name)
        return out


@dataclass(frozen=True, slots=True)
class Decision:
    #: "answer" | "clarify" | "out_of_scope" | "off_subject" (a subject the index lacks or its
    #: guard refuses: asked back) | "decline" (in scope, but no cited fact fits the budget)
    mode: str
    confidence: float
    in_domain: float
    reasons: list[str] = field(default_factory=list)

    @property
    def can_answer(self) -> bool:
        return self.mode == "answer"

    @property
    def needs_clarification(self) -> bool:
        return self.mode in ("clarify", "off_subject")


def in_domain(f: QueryFeatures) -> float:
    return logistic(cal.DOMAIN_WEIGHTS, (f.cos_max, f.coverage))


def confidence(f: QueryFeatures) -> float:
    return logistic(cal.CONFIDENCE_WEIGHTS, f.vector())


def decide(f: QueryFeatures) -> Decision:
    p_domain = in_domain(f)
    p_answer = confidence(f)
    reasons = f.reasons
    # With no topic words or an unresolved "that", there is nothing to judge the domain on, and a
    # query naming a subject of the graph is in its domain by definition: asking back is the answer.
    if f.vague or f.unresolved_reference or f.broad:
        return Decision("clarify", round(min(p_answer, 0.5), 4), round(p_domain, 4), reasons)
    if p_domain < cal.DOMAIN_THRESHOLD and not f.prior:
        return Decision("out_of_scope", round(p_answer, 4), round(p_domain, 4), ["out_of_domain"])
    if f.ambiguous or f.seek_clarification or p_answer < cal.ANSWER_THRESHOLD:
        if not reasons:
            reasons = ["low_confidence"]
        return Decision("clarify", round(p_answer, 4), round(p_domain, 4), reasons)
    return Decision("answer", round(p_answer, 4), round(p_domain, 4), reasons)
