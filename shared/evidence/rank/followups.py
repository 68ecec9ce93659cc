"""Follow-up responses (seed 000) and follow-up documents (seed 001): how they are recognised.

Shared by the ranking stages and the evidence formatter (which imports them from here: the
formatter depends on the ranking layer, never the reverse).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evidence.ids import normalize_question

CRITERION_HASH_KEY = "criterion_question_hash"
FOLLOWUP_RESPONSE_PREFIX = "followup_response"
FOLLOWUP_DOCUMENT_TYPE = "followup_document"
#: Key under which follow-up extraction records a modified question's similarity to the criterion.
QUESTION_SIMILARITY = "question_similarity"

_ROUND_IN_TYPE = re.compile(r"^followup_response:(\d+)$")


def parse_round(value: Any) -> int:
    """A round number as seed 000 reads it (`int(...)` of an integral value): 2, 2.0, "2", "2.0" → 2.

    ValueError for anything else (a boolean, 2.5, "two", ""): ingestion turns that into a
    validation error naming the field, so a bad round never reaches an index.
    """
    if isinstance(value, bool):
        raise ValueError("a round number must be an integer, not a boolean")
    if isinstance(value, int):
        return value
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"a round number must be an integer, got {value!r}") from None
    if not number.is_integer():
        raise ValueError(f"a round number must be an integer, got {value!r}")
    return int(number)


def round_of(metadata: Mapping[str, Any]) -> int:
    """A follow-up's round: `round_number`, else the suffix of `type` ("followup_response:2"), else 0.

    Ingestion validates rounds (`parse_round`); an index built before that may still hold an
    unparseable value, which counts as round 0 (oldest) rather than failing the request.
    """
    raw = metadata.get("round_number")
    if raw is not None:
        try:
            return parse_round(raw)
        except ValueError:
            pass
    m = _ROUND_IN_TYPE.match(str(metadata.get("type", "")))
    return int(m.group(1)) if m else 0


def question_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the normalised word sets of two questions, in [0, 1].

    Cheap and deterministic (no model call in the hot path): it uses the same normalisation
    as the criterion hash, so two questions that hash alike score 1.0. Two empty questions
    score 1.0 (identical), one empty question 0.0.
    """
    ta = set(normalize_question(a).split())
    tb = set(normalize_question(b).split())
    if not ta and not tb:
        return 1.0
    return len(ta & tb) / len(ta | tb)


def is_followup_response(metadata: Mapping[str, Any]) -> bool:
    return str(metadata.get("type", "")).startswith(FOLLOWUP_RESPONSE_PREFIX)
