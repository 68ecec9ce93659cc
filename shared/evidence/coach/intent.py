"""Query understanding for the coach: intent (its content words and references to earlier turns are
`evidence.plan.conversation`'s, shared with `POST /retrieve`'s `conversation`).

Rules first (instant, deterministic, and the fallback): an intent is recognised by its cue
words; the strongest cue wins in the order troubleshooting > practice > comparison > definition
> tutoring, and a query with no cue is tutoring by default. A yes/no question ("does ...?") is a
weak definition cue: it sets the intent but does not count as the student saying what they want.
An optional Bedrock classifier (`BedrockIntentClassifier`) can replace the rules; on any failure
the rules answer and the failure is named in telemetry.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

from evidence.coach.contract import Intent
from evidence.coach.llm import ConverseClient, LLMError

log = logging.getLogger(__name__)

_CUES: tuple[tuple[Intent, re.Pattern[str]], ...] = (
    (
        Intent.TROUBLESHOOTING,
        re.compile(
            r"\b(keeps? (failing|going wrong|getting|coming out)|keep getting|wrong answers?|"
            r"(i'?m|i am) (stuck|confused|lost)|stuck|confused|doesn'?t work|not working|mistakes?|"
            r"what am i doing wrong|went wrong|can'?t get|fail(s|ed|ing)?|misconceptions?|errors? in)\b"
        ),
    ),
    (
        Intent.PRACTICE,
        re.compile(
            r"\b(practi[cs]e|exercises?|drills?|worksheets?|quiz me|test me|"
            r"(give|send|show) me (some |a few |more |another |an? )?(problems?|questions?|exercises?|one)|"
            r"(problems?|questions?) (on|about|for|with)|another one|more (problems|questions|exercises))\b"
        ),
    ),
    (
        Intent.COMPARISON,
        re.compile(r"\b(differences?|different from|compare[ds]?|comparison|vs\.?|versus|which is better)\b"),
    ),
    (
        Intent.DEFINITION,
        re.compile(
            r"(^\s*(what\s+(is|are|does)|what'?s|define|meaning of|when is|when are)\b)|"
            r"\b(defin(e|ition)|what does .{1,40} mean|stand for)\b"
        ),
    ),
    (
        Intent.TUTORING,
        re.compile(
            r"\b(explain|how (do|can|to|does|should|would|is)|show me|walk me|teach|help( me)?|why|"
            r"steps?|understand|solve|find|simplify|prove|evaluate|derive|compute|calculate)\b"
        ),
    ),
)
_POLAR = re.compile(r"^\s*(do|does|did|is|are|can|could|will|would|should)\b")
_WH = re.compile(r"\b(what|what's|whats|why|how|when|which|where|who)\b")


def asks_question(text: str) -> bool:
    """A wh-question ("when should I use ...") says more than a bare topic does."""
    return _WH.search(text.lower()) is not None


@dataclass(frozen=True, slots=True)
class IntentResult:
    intent: Intent
    #: "request" (the coach said), "rules", "bedrock", or "default" (no cue: tutoring).
    source: str
    #: Whether the query itself says what the student wants (a strong cue or the request's intent).
    explicit: bool
    cue: str | None = None


def classify_rules(query: str) -> IntentResult:
    low = query.lower()
    for intent, pattern in _CUES:
        m = pattern.search(low)
        if m:
            return IntentResult(intent, "rules", explicit=True, cue=m.group(0).strip())
    if _POLAR.search(low):
        return IntentResult(Intent.DEFINITION, "rules", explicit=False, cue="yes/no question")
    return IntentResult(Intent.TUTORING, "default", explicit=False)


class IntentClassifier(Protocol):
    name: str

    def classify(self, query: str, *, timeout_s: float) -> IntentResult: ...


_PROMPT = (
    "Classify the student's message for a maths tutor. Answer with JSON only: "
    '{"intent": one of "tutoring", "practice", "definition", "comparison", "troubleshooting", '
    '"explicit": true if the message itself says what kind of help is wanted, else false}.'
)


class BedrockIntentClassifier:
    """Intent from a Bedrock model through the Converse API (JSON answer, short timeout)."""

    name = "bedrock"

    def __init__(self, client: ConverseClient) -> None:
        self.client = client

    def classify(self, query: str, *, timeout_s: float) -> IntentResult:
        text = self.client.complete(_PROMPT, query, max_tokens=60, timeout_s=timeout_s)
        try:
            obj: Any = json.loads(text[text.index("{") : text.rindex("}") + 1])
            intent = Intent(str(obj["intent"]).strip().lower())
        except (ValueError, KeyError, TypeError) as exc:
            raise LLMError(f"unusable intent answer: {text[:80]!r}", reason="bad_response") from exc
        explicit = obj.get("explicit")
        return IntentResult(
            intent, "bedrock", explicit=bool(explicit) if isinstance(explicit, bool) else True
        )


def classify(
    query: str,
    requested: Intent | None,
    *,
    classifier: IntentClassifier | None = None,
    timeout_s: float = 0.2,
    degraded: list[str] | None = None,
) -> IntentResult:
    """The request's intent if given; else the classifier's, falling back to the rules."""
    if requested is not None:
        return IntentResult(requested, "request", explicit=True)
    if classifier is not None:
        try:
            return classifier.classify(query, timeout_s=timeout_s)
        except LLMError as exc:
            log.warning("intent classifier failed (%s); using the rules", exc.reason)
            if degraded is not None:
                degraded.append(f"intent:{classifier.name}_{exc.reason}")
    return classify_rules(query)
