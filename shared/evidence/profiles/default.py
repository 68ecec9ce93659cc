"""`default`: hybrid first stage, rerank, top 10 (stages: `rank.profiles.default_profile`).

A question naming a document is scoped to it; the grounding check may refuse.
"""

from __future__ import annotations

from evidence.profiles.base import PipelinePlugin, ProfileEnv
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

    def pipeline(self, env: ProfileEnv | None = None) -> Profile:
        """The profile; with the `focus_span_anchor` setting, an index and a service, `focus` keeps
        in each hit a run holding its best span by the span scorer's `dense` model (its lexical
        features and the question's cosines with the span's and its heading's vectors), the
        vectors read from the store's embedding cache only, where indexing put them: nothing is
        embedded at query time (on by default since session 46; docs/ranking.md#focus-span-anchor-r2-46);
        the same spans' cosines with the question order hits 2-10 before focus cuts them
        (`FocusHits(anchor_order=…)`, docs/ranking.md#focus-anchor-order), while the answer signal
        reads them in their fused order, cut as focus cuts them there (`RankOutcome.judged`,
        docs/ranking.md#focus-anchor-order-judged)."""
        base = super().pipeline(env)
        if env is None or not env.settings.focus_span_anchor or env.index is None or env.services is None:
            return base
        import copy
        from dataclasses import replace

        from evidence.config import SpanVectors
        from evidence.rank.dedup import FocusHits
        from evidence.verbatim.cascade import SpanAnchors
        from evidence.verbatim.span_rank import IndexVectors, LateVectors, StoredVectors

        index, embedder = env.index, env.services.document_embedder
        # Under `EVIDENCE_EMBED_SPANS_AT_INDEX=late` the spans' late-chunked vectors, their own
        # otherwise (docs/ranking.md#focus-span-anchor-late); on a backend that keeps them with
        # its passages (OpenSearch), read from there (docs/opensearch.md#anchor-vectors).
        late = (
            LateVectors(lambda: embedder(index))
            if env.settings.embed_spans_at_index is SpanVectors.LATE
            else None
        )
        stages = list(base.stages)
        for k, s in enumerate(stages):
            if isinstance(s, FocusHits):
                anchored = copy.copy(s)
                anchored.anchors = SpanAnchors(
                    vectors=IndexVectors(lambda: embedder(index)),
                    scorer=ANCHOR_SCORER,
                    late=late,
                    stored=StoredVectors() if late is not None else None,
                )
                stages[k] = anchored
        return replace(base, stages=tuple(stages))


#: How the setting's anchor scores the spans inside a hit (`verbatim.cascade.ANCHOR_SCORERS`),
#: chosen on the 19 development families (bench/data/session42/anchor14.md).
ANCHOR_SCORER = "dense"


def plugin() -> DefaultPlugin:
    return DefaultPlugin()
