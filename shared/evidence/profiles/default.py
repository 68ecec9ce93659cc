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

        return default_profile()


def plugin() -> DefaultPlugin:
    return DefaultPlugin()
