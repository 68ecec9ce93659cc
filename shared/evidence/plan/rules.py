"""The rule-based planner: deterministic, instant, and the fallback for the LLM planner."""

from __future__ import annotations

import re

from evidence.ids import criterion_hash, normalize_question
from evidence.model import Plan, PlanRequest
from evidence.names import HYPHENS

_WORD = re.compile(rf"[A-Za-z0-9][A-Za-z0-9'{HYPHENS}]*")  # a compound whole, any hyphen
# Question scaffolding that carries no retrieval signal in assessment criteria.
_FILLER = frozenset(
    "does do is are the a an of to in for on and or with by vendor vendors organization company "
    "please describe provide explain whether how what which who when where there their your you have "
    "has any all be been being this that these those it its can could should would will".split()
)


def key_phrases(text: str, limit: int = 8) -> list[str]:
    """Content words in order of appearance, de-duplicated: cheap search phrases."""
    seen: dict[str, None] = {}
    for m in _WORD.finditer(text):
        w = m.group().lower()
        if w not in _FILLER and len(w) > 2:
            seen.setdefault(w, None)
    return list(seen)[:limit]


def rule_plan(request: PlanRequest, *, criterion_from_query: bool = False) -> Plan:
    """The plan of `request`. `criterion_from_query`: a question with no criterion question is its
    own criterion (the assessment profile's follow-up cache key, seed 000)."""
    criterion = request.criterion_question or (request.query if criterion_from_query else None)
    phrases = [request.query]
    words = key_phrases(request.query)
    if len(words) > 1:
        phrases.append(" ".join(words))
    return Plan(
        query=request.query,
        normalized_query=normalize_question(request.query),
        criterion_hash=criterion_hash(criterion),
        profile=request.profile,
        query_mode="GLOBAL",
        search_phrases=phrases,
        extraction_level="block",
        filters=dict(request.filters or {}),
        planner="rules",
    )
