"""`coach`: seed 004 over knowledge-graph nodes (`evidence.coach`).

On `POST /retrieve` (`"profile": "coach"`) its stages are `coach.profile.coach_profile`: the
ranking layer's recall over graph nodes, graph expansion, MMR, top-k, and the shared answer
signal without the grounding check. On its own endpoint (`POST /v1/indexes/{index}/coach`, the
request in `env.payload`) the service runs the same path with one stage, `CoachAnswer`: the coach
engine (intent, HyDE, the same recall stages, LO ranking, prerequisites, compression, answer /
clarify / decline), whose `CoachResponse` comes back as the profile's extras.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from evidence.coach.contract import CoachRequest, CoachResponse
from evidence.profiles.base import Extras, PipelinePlugin, ProfileEnv
from evidence.rank.confidence import AnswerSignal
from evidence.rank.pipeline import Profile, RankOutcome

if TYPE_CHECKING:
    from evidence.coach.service import CoachAnswering
    from evidence.rank.candidate import Candidate
    from evidence.rank.context import RankContext


@dataclass(frozen=True)
class CoachAnswer:
    """The coach endpoint's one stage: seed 004's engine on the request; no hits of its own
    (the response is the `CoachResponse` it leaves on the trace)."""

    runtime: CoachAnswering
    request: CoachRequest
    name: str = "coach"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        response: CoachResponse = self.runtime.coach(
            ctx.index, self.request, guardrail=ctx.params, backend=ctx.backend
        )
        ctx.trace.response = response
        ctx.trace.path = "coach"
        ctx.trace.detail["mode"] = (
            "clarify" if response.needs_clarification else "answer" if response.can_answer else "decline"
        )
        return []


class CoachPlugin(PipelinePlugin):
    name = "coach"

    def build(self) -> Profile:
        from evidence.coach.profile import coach_profile

        return coach_profile()

    def pipeline(self, env: ProfileEnv | None = None) -> Profile:
        if env is None or not isinstance(env.payload, CoachRequest):
            return super().pipeline(env)
        if env.services is None:
            raise TypeError("a coach request needs the service's coach runtime (ProfileEnv.services)")
        # The service keeps the coach's runtime: its warm-up state and per-stage cost estimates
        # live as long as the process, and graph indexing shares them. The engine embeds the
        # query itself (with the conversation, inside its deadline).
        return replace(
            super().pipeline(env),
            stages=(CoachAnswer(env.services.coach_runtime(), env.payload),),
            embeds_query=False,
        )

    def answer_signal(self, query: str, outcome: RankOutcome, env: ProfileEnv) -> AnswerSignal:
        response = outcome.response
        if isinstance(response, CoachResponse):
            return AnswerSignal(response.confidence, response.can_answer, "coach", {})
        return super().answer_signal(query, outcome, env)

    def extras(self, outcome: RankOutcome) -> Extras:
        response = outcome.response
        if isinstance(response, CoachResponse):
            return Extras(outcome.path_used, response.needs_clarification, response)
        return super().extras(outcome)


def plugin() -> CoachPlugin:
    return CoachPlugin()
