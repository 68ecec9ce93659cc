"""The grounding check every profile shares (docs/verbatim.md, Honest refusal).

Evidence that does not carry enough of the question's concepts cannot answer it, whatever the
similarity says. Refusing lowers `confidence` below 0.5 together with `can_answer`, so the two
always agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from evidence.rank.candidate import Candidate
from evidence.rank.confidence import HEAD, AnswerSignal


def apply_grounding(
    query: str, hits: Sequence[Candidate], signal: AnswerSignal, floor: float
) -> AnswerSignal:
    """`signal` with the grounding feature added, refused when grounding falls below `floor`
    (0 switches the refusal off; the feature is still reported)."""
    from evidence.verbatim.cascade import question_groups
    from evidence.verbatim.profile import grounding_confidence
    from evidence.verbatim.scoring import grounding

    texts = [f"{c.chunk.section} {c.chunk.search_text}" for c in hits[:HEAD]]
    g, _missing = grounding(question_groups(query), texts)
    features = {**signal.features, "grounding": round(g, 6)}
    if g >= floor or not floor:
        return replace(signal, features=features)
    return AnswerSignal(
        round(min(signal.confidence, grounding_confidence(g, floor)), 4), False, signal.basis, features
    )
