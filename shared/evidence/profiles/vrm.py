"""`vrm`: vendor risk assessment, seeds 000/001/003 (stages: `rank.profiles.vrm_profile`).

The question is its own criterion (the follow-up cache key) and is never scoped to a document it
names: seed 003's defaults must not change which references are selected.
"""

from __future__ import annotations

from evidence.profiles.base import PipelinePlugin
from evidence.rank.pipeline import Profile


class VrmPlugin(PipelinePlugin):
    name = "vrm"
    grounded = True
    criterion_from_query = True

    def build(self) -> Profile:
        from evidence.rank.profiles import vrm_profile

        return vrm_profile()


def plugin() -> VrmPlugin:
    return VrmPlugin()
