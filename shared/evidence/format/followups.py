"""Follow-up helpers shared by the ranking stages and the formatter."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evidence.ids import normalize_question

_ROUND_IN_TYPE = re.compile(r"^followup_response:(\d+)$")


def round_of(metadata: Mapping[str, Any]) -> int:
    """A follow-up's round: `round_number`, else the suffix of `type` ("followup_response:2"), else 0.

    Indexers store `round_number` as a string as often as an int; an unparseable value counts
    as round 0 (oldest) rather than failing the request.
    """
    raw = metadata.get("round_number")
    if raw is not None and not isinstance(raw, bool):
        try:
            return int(str(raw).strip())
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
