"""Intent: the request's intent (the request's, else the classifier's, else the rules), the
query embedding, and the optional HyDE blend.
"""

from __future__ import annotations

import numpy as np

from evidence.coach.common import (
    Vector,
    _Run,
    _stems,
)
from evidence.coach.contract import (
    Intent,
)
from evidence.coach.hyde import blend
from evidence.coach.intent import (
    IntentResult,
    classify,
)
from evidence.coach.llm import LLMError
from evidence.coach.respond import Responder
from evidence.plan.conversation import content_words, has_reference


class Understanding(Responder):
    """Intent, the query vector and HyDE."""

    def _understand(self, run: _Run) -> None:
        query = run.request.query
        snippet = (run.request.conversation_snippet or "").strip()
        run.words = content_words(query)
        reference = has_reference(query)
        if reference and snippet:
            # The question's topic is in the conversation ("that last step" of EX-342).
            run.followup = snippet
            run.words = list(dict.fromkeys([*run.words, *content_words(snippet)]))
        run.unresolved = reference and not snippet and len(run.words) <= 1
        run.terms = _stems(" ".join(run.words)) if run.words else frozenset()

    def _intent(self, run: _Run) -> IntentResult:
        req = run.request
        requested = Intent(req.intent) if req.intent is not None else None
        classifier = self.intent_classifier
        with run.stage("intent"):
            if classifier is None or requested is not None:
                return classify(req.query, requested)
            budget = min(self.settings.intent_budget_ms, run.deadline.remaining_ms / 4)
            if not run.affordable("intent", cost=min(self.costs.estimate("intent"), budget)):
                classifier = None
            return classify(
                req.query, requested, classifier=classifier, timeout_s=budget / 1000.0, degraded=run.degraded
            )

    def _embed(self, run: _Run, text: str, *, dense: bool) -> Vector | None:
        if not dense or self.embed_query is None:
            return None
        if not run.affordable("embed"):
            run.degraded.append("dense:skipped_timeout")
            return None
        with run.stage("embed"):
            vector = self.embed_query(text)
            return None if vector is None else np.asarray(vector, dtype=np.float32)

    def _hyde(self, run: _Run) -> Vector | None:
        vector = run.vector
        if self.hyde is None or vector is None or self.embed_query is None:
            return vector
        # Its own budget: at most `hyde_budget_ms`, and never more than a quarter of what is left.
        budget = min(self.settings.hyde_budget_ms, run.deadline.remaining_ms / 4)
        if not run.affordable(
            "hyde", cost=min(self.costs.estimate("hyde"), budget) + self.costs.estimate("embed")
        ):
            return vector
        with run.stage("hyde"):
            try:
                passage = self.hyde.passage(
                    run.request.query, subject=run.request.subject, timeout_s=budget / 1000.0
                )
            except LLMError as exc:
                run.degraded.append(f"hyde:{exc.reason}")
                return vector
            hyde_vector = self.embed_query(passage)
            if hyde_vector is None:
                return vector
            run.detail["hyde"] = True
            return blend(vector, np.asarray(hyde_vector, dtype=np.float32))
