"""`default`: hybrid first stage, rerank, top 10 (stages: `rank.profiles.default_profile`).

A question naming a document is scoped to it; the grounding check may refuse.
"""

from __future__ import annotations

from evidence.profiles.base import PipelinePlugin
from evidence.rank.pipeline import Profile


class DefaultPlugin(PipelinePlugin):
    name = "default"
    scopes = True
    grounded = True

    def build(self) -> Profile:
        from evidence.rank.profiles import default_profile
        from evidence.verbatim.answer_types import answer_types

        # `focus` raises the sentences stating the kind of value asked for (a duration, a dose…).
        return default_profile(expected=answer_types().expected)


def plugin() -> DefaultPlugin:
    return DefaultPlugin()
