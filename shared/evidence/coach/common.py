"""What the coach's stages share: settings, the per-request run, scored LOs, text helpers."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from evidence.coach import compress as cmp
from evidence.coach.budget import Deadline, StageCosts
from evidence.coach.contract import (
    CoachRequest,
    Intent,
)
from evidence.coach.intent import (
    IntentResult,
)
from evidence.config import CoachGuard
from evidence.graph.documents import NodeView
from evidence.graph.store import GraphReader

Vector = np.ndarray
#: Node ids as graphs write them: "LO-ALG-021", "ex_342", "calc.lo.7", "LO42".
_ID_IN_TEXT = re.compile(r"\b(?:[A-Za-z][A-Za-z0-9]*(?:[-_.:/][A-Za-z0-9]+)+|[A-Z]{1,6}\d{1,6})\b")
_PITFALL = re.compile(
    r"\b(mistake|mistakes|misconception|pitfall|wrong|error|errors|incorrect)\b", re.IGNORECASE
)
#: A content vote counts for its LO at this fraction of the content's own relevance.
CONTENT_VOTE = 0.9
#: Prior LOs cited in the conversation are multiplied by this when the query refers back.
FOLLOWUP_BOOST = 1.25
#: ...and rated at least this relevant: a conversation that cites a node has settled the topic.
FOLLOWUP_FLOOR = 0.8
#: At most this many words make an utterance a bare topic.
BARE_TOPIC_WORDS = 4
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class CoachSettings:
    """Plain arguments (the service maps `Settings` onto them)."""

    first_stage_k: int = 40
    rerank_k: int = 40
    mmr_lambda: float = 0.7
    max_matched: int = 3
    #: Keep further LOs whose relevance is at least this share of the best one's...
    keep_ratio: float = 0.85
    #: ...or this share for practice and troubleshooting, which want the topic's neighbourhood
    #: (exercises across it; the pitfalls of the sibling skill that actually fails).
    broad_keep_ratio: float = 0.75
    min_relevance: float = 0.5
    intent_budget_ms: float = 200.0
    hyde_budget_ms: float = 200.0
    snippet_chars: int = 600
    #: Seed 004's re-rank budget: the reranker call is cut when it takes longer.
    rerank_budget_ms: float = 250.0
    #: Seed 004's guardrails for the index (subject allowlist, unsafe content types).
    guard: CoachGuard = field(default_factory=CoachGuard)
    #: The guardrail every profile shares (`rank.guardrail`), from the deployment's defaults for
    #: `coach`: a node below this cosine with the query is never recalled, linked or cited (None
    #: or 0: off; inclusive)...
    min_similarity: float | None = None
    #: ...and the quoted text (bullets and content snippets) fits this many characters (None or 0: off).
    max_chars: int | None = None


@dataclass
class _Scored:
    view: NodeView
    cos: float | None = None
    lexical: float = 0.0
    fused: float = 0.0
    cov_text: float = 0.0
    cov_title: float = 0.0
    rerank: float | None = None
    rel: float = 0.0
    reason: str = "semantic match"
    #: The content node whose match lifted this LO (parent-child attribution), if any.
    via: NodeView | None = None


@dataclass
class _Run:
    """Everything one request knows; the engine itself holds no per-request state (it is shared
    by the threads of a server)."""

    index: str
    request: CoachRequest
    deadline: Deadline
    costs: StageCosts
    reader: GraphReader
    intent: IntentResult = field(default_factory=lambda: IntentResult(Intent.TUTORING, "default", False))
    #: The query's topic words (and the conversation's, in a follow-up) and their stems.
    words: list[str] = field(default_factory=list)
    terms: frozenset[str] = frozenset()
    vector: Vector | None = None
    #: The conversation snippet when the query refers back to it, else "".
    followup: str = ""
    unresolved: bool = False
    scored: list[_Scored] = field(default_factory=list)
    los: list[_Scored] = field(default_factory=list)
    #: Nodes the conversation cites by id, when the query refers back.
    prior: dict[tuple[str, str], NodeView] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    #: Sentences of nodes loaded so far (node id → sentences): loaded once per request.
    sentences: dict[str, list[cmp.Sentence]] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - t0) * 1000.0
            self.stages[name] = round(self.stages.get(name, 0.0) + ms, 3)
            self.costs.observe(name, ms)

    def affordable(self, name: str, cost: float | None = None) -> bool:
        """Whether the stage fits the time left; if not, it is named in `degraded`."""
        need = self.costs.estimate(name) if cost is None else cost
        if self.deadline.allows(need):
            return True
        self.degraded.append(f"{name}:skipped_timeout")
        return False


@lru_cache(maxsize=8192)
def _stems(text: str) -> frozenset[str]:
    from evidence.search.analysis import get_analyzer

    return frozenset(get_analyzer().analyze(text))


def _analyze(text: str) -> list[str]:
    return list(_stems(text))


def _coverage(terms: frozenset[str], text: str) -> float:
    return len(terms & _stems(text)) / len(terms) if terms else 0.0


def content_family(node_type: str) -> str:
    """Content types as a graph names them, grouped by what they are for."""
    t = node_type.lower()
    # Quizzes and tests assess; seed 004's practice playbook asks for exercises, and tutoring's
    # "quick exercise" is one too: an assessment is only given when a request names its type.
    if re.search(r"quiz|\btests?\b|\bexams?\b|assessment", t):
        return "assessment"
    if re.search(r"exercise|problem|practi[cs]e|question|drill|worksheet|homework", t):
        return "practice"
    if re.search(r"mistake|misconception|pitfall|error", t):
        return "pitfall"
    if re.search(r"example|worked|demo|walkthrough|sample|illustration", t):
        return "example"
    return "explanation"


#: Content families wanted per intent, slot by slot (seed 004: tutoring gets "1 example + 1 quick
#: exercise", practice exercises, troubleshooting examples of common pitfalls).
SLOTS: Mapping[Intent, tuple[str, ...]] = {
    Intent.TUTORING: ("example", "practice"),
    Intent.PRACTICE: ("practice", "practice", "practice"),
    Intent.DEFINITION: ("explanation", "example"),
    Intent.COMPARISON: ("explanation", "example", "example"),
    Intent.TROUBLESHOOTING: ("pitfall", "example", "practice"),
}


def _is_pitfall(view: NodeView) -> bool:
    return content_family(view.type) == "pitfall" or bool(_PITFALL.search(view.title))
