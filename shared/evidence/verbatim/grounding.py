"""The refusal signal every profile shares (docs/verbatim.md, Honest refusal).

Evidence answers a question only if it carries what the question asks about. Two readings of the
evidence, combined by a logistic model fitted leave-one-family-out on the QA suite
(`bench/refusal_fit.py`):

- `grounding`: the share of the question's concepts that some evidence text holds, each concept
  weighted by how specific its word is (`concept_weight`): "levorphanol", "arbitration" or
  "strftime" missing from the evidence weighs far more than "typically" or "under". Specificity
  is read from a generic resource, the embedder's WordPiece vocabulary (frequency-ordered: a word
  split into pieces, or with a late id, is rare in English), never from any document;
- `cosine`: the best cosine between the question and the passages the evidence comes from
  (MiniLM: the calibration is the embedder's own; other embedders and lexical-only indexes use
  the grounding-only model).

`Verdict.probability` is the model's probability that the evidence answers; evidence is refused
below a floor (`EVIDENCE_ANSWER_MIN_GROUNDING` for `default`/`vrm`, `CascadeConfig.min_grounding`
for `verbatim`). `confidence` maps the probability so that the floor lands on 0.5, `can_answer`'s
bar (`grounding_confidence`), so `can_answer`, `confidence` and `NO_RESULT` agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from evidence.names import MINILM_MODEL_ID
from evidence.rank.candidate import Candidate
from evidence.rank.confidence import HEAD, AnswerSignal


@dataclass(frozen=True, slots=True)
class RefusalModel:
    """logit = grounding * g + cosine * c + bias (fitted by bench/refusal_fit.py)."""

    grounding: float
    cosine: float
    bias: float

    def probability(self, g: float, cosine: float = 0.0) -> float:
        z = self.grounding * g + self.cosine * cosine + self.bias
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


#: Fitted on the five QA families of bench/qa, both profiles' evidence pooled, positive = the
#: evidence holds an expected answer (`bench/refusal_fit.py --max-loss 0.03 --default-cap 0.30`,
#: `final`; refitted on the evidence of the hybrid span ranking).
DENSE_MODEL = RefusalModel(grounding=2.011, cosine=1.9747, bias=-2.3881)
#: Grounding alone: lexical-only indexes and embedders without a fitted model.
LEXICAL_MODEL = RefusalModel(grounding=2.27, cosine=0.0, bias=-1.4129)
#: The embedders whose cosines the dense model was fitted on.
DENSE_EMBEDDERS = frozenset({MINILM_MODEL_ID})
#: The verbatim profile's floor: the probability below which its evidence is refused, fitted so
#: that at most 3 % of the evidence holding an answer is refused (the issue's false-refusal
#: budget, `bench/refusal_fit.py`); the safety net (HYBRID_FACTSPAN, no bar of its own) 0.30.
REFUSAL_FLOOR = 0.28
SAFETY_NET_FLOOR = 0.30
#: The same for the first hits of `default`/`vrm` (`EVIDENCE_ANSWER_MIN_GROUNDING`): capped at
#: 0.30 so that SciFact's in-domain questions stay answered (≥ 0.95: `bench/answerability.py`).
HITS_REFUSAL_FLOOR = 0.30

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
#: WordPiece ids below this are the most frequent English words; above the last, the vocabulary's
#: tail. A word's rarity is where its id falls between them, on a log scale.
_COMMON_ID, _RARE_ID = 2000, 30000
#: Even the commonest concept counts a little; an unknown term counts as middling.
_BASE_WEIGHT, _UNKNOWN_RARITY = 0.1, 0.5


@lru_cache(maxsize=16384)
def word_rarity(word: str) -> float:
    """How rare an English word is, in [0, 1], from the embedder's WordPiece vocabulary: a word the
    vocabulary splits into pieces is rare (1); a whole-word entry by its id (log-scaled)."""
    from evidence.embed.tokenizer import get_tokenizer

    ids = get_tokenizer().encode(word.lower(), add_special_tokens=False).ids
    if len(ids) != 1:
        return 1.0
    return min(1.0, max(0.0, math.log(ids[0] / _COMMON_ID) / math.log(_RARE_ID / _COMMON_ID)))


def concept_weights(question: str, groups: Sequence[Sequence[str]]) -> dict[str, float]:
    """Each concept term's weight: the rarity of the question word it comes from (a label word
    grouped with a lay word takes the group's), plus a small base."""
    from evidence.verbatim.scoring import terms

    rarity: dict[str, float] = {}
    for w in _WORD.findall(question):
        for t in terms(w):
            rarity[t] = max(rarity.get(t, 0.0), word_rarity(w))
    out: dict[str, float] = {}
    for g in groups:
        r = max((rarity[t] for t in g if t in rarity), default=_UNKNOWN_RARITY)
        for t in g:
            out[t] = max(out.get(t, 0.0), _BASE_WEIGHT + r)
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    probability: float
    grounding: float
    cosine: float | None
    missing: tuple[str, ...]

    def refused(self, floor: float) -> bool:
        return bool(floor) and self.probability < floor

    def features(self) -> dict[str, float]:
        """For telemetry (the cosine is the answerability signal's own `cosine` already)."""
        return {"grounding": round(self.grounding, 6), "answer_probability": round(self.probability, 6)}


def judge(
    question: str,
    texts: Sequence[str],
    *,
    cosine: float | None = None,
    groups: Sequence[Sequence[str]],
) -> Verdict:
    """The one refusal signal: does evidence (`texts`: spans or hits with their headings) carry
    what `question` asks? `groups`: the question's concepts (`verbatim.cascade.question_groups`,
    passed in so that this module sits below the cascade); `cosine`: the question's best cosine
    with the evidence's passages, None when the index has no fitted embedder (then the
    grounding-only model)."""
    from evidence.verbatim.scoring import grounding

    g, missing = grounding(groups, texts, concept_weights(question, groups))
    model = DENSE_MODEL if cosine is not None else LEXICAL_MODEL
    p = model.probability(g, cosine or 0.0)
    return Verdict(p, g, cosine, tuple(missing))


def grounding_confidence(p: float, floor: float) -> float:
    """The answer probability on the confidence scale every profile shares (`can_answer` at 0.5):
    piecewise linear, 0.5 exactly at the refusal floor, so `confidence`, `can_answer` and
    NO_RESULT agree."""
    if floor <= 0:
        return 0.5 + 0.5 * p
    if p < floor:
        return 0.5 * p / floor
    return 0.5 + 0.5 * (p - floor) / (1 - floor) if floor < 1 else 1.0


def hit_texts(hits: Sequence[Candidate]) -> list[str]:
    """What the signal reads of ranked hits: the first `HEAD`, each with its section heading."""
    return [f"{c.chunk.section} {c.chunk.search_text}" for c in hits[:HEAD]]


def apply_grounding(
    query: str,
    hits: Sequence[Candidate],
    signal: AnswerSignal,
    floor: float,
    groups: Sequence[Sequence[str]],
) -> AnswerSignal:
    """`signal` (the cosine/coverage answerability of `default`/`vrm`) with the refusal signal's
    features added, refused when the answer probability falls below `floor` (0 switches the
    refusal off; the features are still reported). The cosine is the one `signal` read (the
    first hits' best cosine with the query), used only when `signal` read it on a calibrated
    embedder (`basis` dense)."""
    # `dense` is set only for an embedder with a fitted answerability model (MiniLM).
    cosine = signal.features.get("cosine") if signal.basis == "dense" else None
    verdict = judge(query, hit_texts(hits), cosine=cosine, groups=groups)
    features = {**signal.features, **verdict.features()}
    if not verdict.refused(floor):
        return replace(signal, features=features)
    return AnswerSignal(
        round(min(signal.confidence, grounding_confidence(verdict.probability, floor)), 4),
        False,
        signal.basis,
        features,
    )
