"""The coach endpoint's stage reads through the request's view of the index, as every profile does."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from evidence.coach.contract import CoachRequest, CoachResponse
from evidence.profiles.coach import CoachAnswer
from evidence.rank.context import ProfileParams
from evidence.search.base import SearchReader
from tests.unit.rank.rankkit import ctx


class _Runtime:
    """Records what the stage hands the coach; answers with a decline."""

    def __init__(self) -> None:
        self.backends: list[SearchReader] = []

    def coach(
        self, index: str, request: CoachRequest, *, guardrail: ProfileParams, backend: SearchReader
    ) -> CoachResponse:
        self.backends.append(backend)
        # The stage reads only these two fields of the response.
        return cast(CoachResponse, SimpleNamespace(can_answer=False, needs_clarification=False))


def test_the_coach_reads_the_view_it_is_handed_not_the_services_backend() -> None:
    view: Any = object()  # stands for `bind_filters(backend, request filters)`
    runtime = _Runtime()
    stage = CoachAnswer(runtime, CoachRequest(query="what is a closure?"))
    context = ctx(view)
    assert stage.run([], context) == []
    assert runtime.backends == [view]
    assert context.trace.detail["mode"] == "decline"
