"""Ranking stages: small typed components composed into profiles.

Every stage has a `name`, structural configuration validated in `__init__`, and
`run(candidates, ctx) -> list[Candidate]` that returns a NEW list drawn from its input (order
may change; candidates are immutable, so scores are updated with `with_score`). Per-request knobs
(`top_k`, `followup_boost`, ...) are read from `ctx.params`, already validated by the profile.

Ordering convention: a stage that rescores (rerank, boost) re-sorts by `sort_key`; every other
stage keeps the order it was given, so prefix stages (top-k, budget) act on the ranking as the
previous stages left it (MMR's order included).

Side outputs go to `ctx.trace`: the extracted follow-ups, `degraded` markers, a per-stage
`detail` dict for telemetry and, with `explain`, why each candidate was dropped.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np

from evidence.errors import ConfigurationError, EvidenceError
from evidence.ids import content_hash, normalize_question
from evidence.rank.candidate import Candidate, sort_key
from evidence.rank.context import RankContext, Stage, Trace
from evidence.rank.dedup import (
    CollapseOverlaps,
    DedupContent,
    FocusHits,
    PerDocumentCap,
)
from evidence.rank.followups import (
    CRITERION_HASH_KEY,
    FOLLOWUP_DOCUMENT_TYPE,
    QUESTION_SIMILARITY,
    is_followup_response,
    question_similarity,
    round_of,
)
from evidence.rank.rerank import RerankError
from evidence.rank.similarity import cosines, mmr, unit_rows
from evidence.records import ChunkKind
from evidence.retry import deadline_scope

log = logging.getLogger(__name__)


def _note(ctx: RankContext, c: Candidate, note: str) -> Candidate:
    return c.with_note(note) if ctx.explain else c


def _annotate(c: Candidate, key: str, value: float) -> Candidate:
    """Record a score for `explain` without changing the score the list is ordered by."""
    scores = dict(c.scores)
    scores[key] = value
    return replace(c, scores=MappingProxyType(scores))


# --- seed 000: follow-up extraction ---------------------------------------------------------


class FollowupExtraction:
    """Pull the follow-ups linked to the criterion out of the list BEFORE reranking (seed 000).

    Linked = metadata `type` starts with "followup_response" and `criterion_question_hash`
    equals the criterion's hash. Besides scanning the first-stage list, the stage asks the
    backend for every chunk carrying that hash (a filtered lookup, no query), so a linked
    follow-up is found even when search ranks it below `first_stage_k`: recall of linked
    follow-ups is 100%.

    A follow-up *response* is one (document, round): a long answer split into several chunks
    is one response, its chunks joined in order with their overlap removed. The latest
    `followup_max_rounds` responses are kept (seed 000's "latest N"; ties in round go by
    document id); older linked responses are dropped, and no linked chunk is ever passed on
    as a hit. `followup_max_rounds = 0` switches extraction off (follow-ups then rank like
    any chunk), and so does a criterion with no words (it would link on the empty string).
    """

    name = "followup_extraction"

    def __init__(self, *, lookup: bool = True, lookup_limit: int = 500) -> None:
        if lookup_limit < 1:
            raise ConfigurationError("FollowupExtraction: lookup_limit must be >= 1")
        self.lookup = lookup
        self.lookup_limit = lookup_limit

    @staticmethod
    def linked(c: Candidate, criterion_hash: str) -> bool:
        return is_followup_response(c.metadata) and c.metadata.get(CRITERION_HASH_KEY) == criterion_hash

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        h = ctx.criterion_hash
        max_rounds = ctx.params.followup_max_rounds
        if ctx.criterion_question is not None and not normalize_question(ctx.criterion_question):
            ctx.trace.detail["skipped"] = "criterion has no words to link on"
            return list(candidates)
        if not h or max_rounds <= 0:
            ctx.trace.detail["skipped"] = "no criterion" if not h else "followup_max_rounds=0"
            return list(candidates)
        matched: dict[str, Candidate] = {}
        remaining: list[Candidate] = []
        for c in candidates:
            if self.linked(c, h):
                note = "follow-up: criterion hash matched in first stage"
                matched.setdefault(c.chunk_id, _note(ctx, c, note))
            else:
                remaining.append(c)
        in_first_stage = len(matched)
        for c in self._lookup(ctx, h):
            if self.linked(c, h) and c.chunk_id not in matched:
                matched[c.chunk_id] = _note(ctx, c, "follow-up: found by criterion-hash lookup")
        responses = group_responses(matched.values())
        latest = sorted(responses, key=lambda key: (-key[1], key[0]))[:max_rounds]
        for key, chunks in responses.items():
            if key not in latest:
                for c in chunks:
                    ctx.trace.drop(ctx, c, f"older follow-up response (round {key[1]})")
        kept = [self._with_question_similarity(merge_response(responses[key]), ctx) for key in latest]
        kept.sort(key=lambda c: (round_of(c.metadata), c.chunk.document_id))
        ctx.trace.followups = kept
        ctx.trace.detail.update(
            matched=len(matched),
            from_first_stage=in_first_stage,
            from_lookup=len(matched) - in_first_stage,
            responses=len(responses),
            kept_rounds=sorted({key[1] for key in latest}),
        )
        log.info(
            "Extracted follow-up responses",
            extra={"matched_count": len(kept), "remaining_count": len(remaining), "criterion_hash": h},
        )
        return remaining

    def _lookup(self, ctx: RankContext, criterion_hash: str) -> list[Candidate]:
        if not self.lookup:
            return []
        filters: dict[str, Any] = dict(ctx.filters or {})
        filters[CRITERION_HASH_KEY] = criterion_hash
        try:
            # passages only: a follow-up's fact spans carry the same document metadata
            found = ctx.backend.lookup(ctx.index, filters, limit=self.lookup_limit, kind=ChunkKind.PASSAGE)
        except EvidenceError as exc:
            log.warning("follow-up lookup by criterion hash failed: %s", exc)
            ctx.trace.degrade("followup_lookup:error")
            return []
        return [Candidate(chunk=hit.chunk, score=hit.score, first_stage_score=hit.score) for hit in found]

    @staticmethod
    def _with_question_similarity(c: Candidate, ctx: RankContext) -> Candidate:
        question = c.metadata.get("question")
        criterion = ctx.criterion_question
        if not question or not criterion:
            return c
        if normalize_question(str(question)) == normalize_question(criterion):
            return _annotate(c, QUESTION_SIMILARITY, 1.0)
        score = question_similarity(str(question), criterion)
        log.info(
            "Follow-up question differs from the criterion",
            extra={"chunk_id": c.chunk_id, "question_similarity_score": score},
        )
        return _annotate(c, QUESTION_SIMILARITY, score)


def group_responses(chunks: Iterable[Candidate]) -> dict[tuple[str, int], list[Candidate]]:
    """Follow-up chunks by response, (document id, round), each in document order."""
    groups: dict[tuple[str, int], list[Candidate]] = {}
    for c in chunks:
        groups.setdefault((c.chunk.document_id, round_of(c.metadata)), []).append(c)
    for members in groups.values():
        members.sort(key=lambda c: (c.chunk.char_start, c.chunk.sequence, c.chunk_id))
    return groups


def merge_response(chunks: Sequence[Candidate]) -> Candidate:
    """One candidate for a response split into chunks: their text in order, overlap removed.

    Chunk text is `document[char_start:char_end]`, so the overlap of two windows is known
    exactly from their offsets; a gap between windows (trimmed white space) becomes a newline.
    The merged candidate keeps the first chunk's id and the best score of its chunks.
    """
    first = chunks[0]
    if len(chunks) == 1:
        return first
    text, end = first.chunk.text, first.chunk.char_end
    for c in chunks[1:]:
        ch = c.chunk
        if ch.char_end <= end:
            continue  # wholly inside what is already there
        text += ch.text[end - ch.char_start :] if ch.char_start < end else "\n" + ch.text
        end = ch.char_end
    best = max(chunks, key=lambda c: c.score)
    merged = replace(first.chunk, text=text, char_end=end, content_hash=content_hash(text))
    notes = tuple(n for c in chunks for n in c.notes)
    return replace(
        first, chunk=merged, score=best.score, first_stage_score=best.first_stage_score, notes=notes
    )


# --- generic filters ------------------------------------------------------------------------


class MinSimilarity:
    """Seed 003's floor on similarity at recall (`min_similarity`; None or 0.0 = off), inclusive.

    The same floor as the guardrail's (`rank.guardrail.apply_floor`: the first stage's dense
    score, else the cosine of the stored vector, kept when neither exists), applied before the
    reranker's candidates are chosen, so that what is below it does not take their places."""

    name = "min_similarity"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        from evidence.rank.guardrail import apply_floor

        return apply_floor(candidates, ctx, ctx.params.min_similarity, stage=self.name)


class CandidateLimit:
    """Seed 000: the top `rerank_k` by FIRST-STAGE score go on to the reranker."""

    name = "candidate_limit"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        k = ctx.params.rerank_k
        ordered = sorted(candidates, key=lambda c: (-c.first_stage_score, c.chunk_id))
        for c in ordered[k:]:
            ctx.trace.drop(ctx, c, f"beyond rerank_k={k} by first-stage score")
        return ordered[:k]


class Rerank:
    """Rescore with the reranker port; on failure keep first-stage order and mark `degraded`."""

    name = "rerank"

    def __init__(self, *, use_criterion: bool = False, budget_ms: float | None = None) -> None:
        # vrm reranks against the criterion question (seed 000) when one is given.
        self.use_criterion = use_criterion
        #: A hard time budget for the reranker call (seed 004: 250 ms); None = the client's own timeout.
        self.budget_ms = budget_ms

    def _call(self, ctx: RankContext, query: str, texts: list[str]) -> Any:
        reranker = ctx.reranker
        assert reranker is not None
        if self.budget_ms is None:
            return reranker.rerank(query, texts, len(texts))
        budget_s = max(self.budget_ms, 1.0) / 1000.0

        def call() -> Any:
            # Remote clients honour the deadline scope; the thread bounds any that would not.
            with deadline_scope(budget_s):
                return reranker.rerank(query, texts, len(texts))

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerank")
        future = pool.submit(contextvars.copy_context().run, call)
        try:
            return future.result(timeout=budget_s)
        except FutureTimeout:
            raise RerankError(f"cut at its {self.budget_ms:.0f} ms budget", reason="over_budget") from None
        finally:
            # Never wait for a call past its budget: its result, if any, is discarded.
            pool.shutdown(wait=False)

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        if ctx.reranker is None or not candidates:
            ctx.trace.detail["reranker"] = None if ctx.reranker is None else ctx.reranker.name
            return list(candidates)
        query = ctx.criterion_question if self.use_criterion and ctx.criterion_question else ctx.query
        ctx.trace.detail["reranker"] = ctx.reranker.name
        if self.budget_ms is not None:
            ctx.trace.detail["budget_ms"] = self.budget_ms
        try:
            results = self._call(ctx, query, [c.chunk.text for c in candidates])
        except RerankError as exc:
            log.warning("%s reranker fell back to first-stage order: %s", ctx.reranker.name, exc.message)
            # Under a budget, a client's own timeout (the deadline scope) is the budget's cut too.
            cut = self.budget_ms is not None and exc.reason in ("timeout", "over_budget")
            ctx.trace.degrade("rerank:over_budget" if cut else f"rerank:{exc.reason}")
            ctx.trace.detail["fallback"] = exc.message
            return list(candidates)
        out = []
        returned = set()
        for index, score in results:
            returned.add(index)
            out.append(candidates[index].with_score("rerank", score, "rerank" if ctx.explain else None))
        for i, c in enumerate(candidates):
            if i not in returned:
                ctx.trace.drop(ctx, c, "not returned by the reranker")
        ctx.trace.reranked = True
        out.sort(key=sort_key)
        return out


class RelevancyCutoff:
    """Seed 000's relevancy cutoff: drop reranker scores (boosted, after seed 001) below `rerank_cutoff`.

    Acts on candidates that carry a reranker score. Without one (no reranker, or after a reranker
    failure) fused scores are on another scale: with `calibrated=True` (the vrm profile) the
    cutoff then applies to a calibrated relevance instead (`confidence.hit_relevance`: the
    answerability model read per hit, boosted like seed 001's follow-up documents, capped at 1),
    recorded as the `relevance` score; otherwise it cuts nothing.
    """

    name = "rerank_cutoff"

    def __init__(self, *, calibrated: bool = False) -> None:
        self.calibrated = calibrated

    def _relevance(self, candidates: Sequence[Candidate], ctx: RankContext, cutoff: float) -> list[Candidate]:
        from evidence.rank.confidence import hit_relevance

        found = {c.chunk_id: float(c.scores["dense"]) for c in candidates if "dense" in c.scores}
        missing = [c.chunk_id for c in candidates if c.chunk_id not in found]
        q = ctx.query_vector
        if missing and q is not None:
            try:
                stored = ctx.backend.vectors(ctx.index, missing)
            except EvidenceError as exc:
                log.warning("rerank_cutoff: vectors unavailable: %s", exc)
                stored = {}
            found.update(cosines(q, stored))
        try:
            embedder_id: str | None = ctx.backend.get_index(ctx.index).embedder_id
        except EvidenceError:
            embedder_id = None
        ctx.trace.detail["score"] = "relevance"
        out = []
        for c, p in zip(
            candidates,
            hit_relevance(ctx.query, candidates, cosines=found, embedder_id=embedder_id),
            strict=True,
        ):
            boosted = c.chunk.metadata.get("type") == FOLLOWUP_DOCUMENT_TYPE
            rel = min(1.0, p * ctx.params.followup_boost) if boosted else p
            if rel < cutoff:
                ctx.trace.drop(ctx, c, f"relevance {rel:.4f} < rerank_cutoff {cutoff} (no reranker)")
            else:
                out.append(replace(c, scores=MappingProxyType({**c.scores, "relevance": round(rel, 6)})))
        return out

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        cutoff = ctx.params.rerank_cutoff
        if (
            self.calibrated
            and cutoff > 0
            and candidates
            and not any("rerank" in c.scores for c in candidates)
        ):
            return self._relevance(candidates, ctx, cutoff)
        out = []
        for c in candidates:
            # Seed 001 cuts the boosted list (`boosted[:n] if r.score >= cutoff`), so a boosted
            # follow-up document just under the cutoff survives; unboosted items use the rerank score.
            r = c.scores.get("boosted", c.scores["rerank"]) if "rerank" in c.scores else None
            if r is not None and r < cutoff:
                ctx.trace.drop(ctx, c, f"rerank score {r:.4f} < rerank_cutoff {cutoff}")
            else:
                out.append(c)
        return out


class FollowupDocumentBoost:
    """Seed 001: boost `type == "followup_document"` by `followup_boost`, after rerank, before top-k.

    The boost scales a candidate's height above a floor: `floor + (score - floor) * factor`,
    with `floor = min(0, lowest score in the list)`. On reranker scores (never negative) the
    floor is 0 and this is seed 001's plain multiplication; on fused scores (no reranker, or
    after a reranker failure: z-scores, often negative) plain multiplication would push a
    negative score DOWN, while the shifted form always lifts, keeps the order of the boosted
    among themselves, and never moves a boosted candidate below an unboosted one it was above.
    On reranker scores the result is capped at `followup_boost_cap` (None = uncapped) and never
    falls below the unboosted score; candidates tied at the cap keep their unboosted order.
    The unboosted score stays in `scores`. Logs when the order changed.
    """

    name = "followup_boost"

    def __init__(self, *, doc_type: str = FOLLOWUP_DOCUMENT_TYPE) -> None:
        if not doc_type:
            raise ConfigurationError("FollowupDocumentBoost: doc_type must be non-empty")
        self.doc_type = doc_type

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        factor = ctx.params.followup_boost
        cap = ctx.params.followup_boost_cap
        if factor == 1.0 or not candidates:
            return list(candidates)
        floor = min(0.0, *(c.score for c in candidates))
        rescored: list[tuple[Candidate, float]] = []
        n = 0
        for c in candidates:
            if c.metadata.get("type") == self.doc_type:
                new = floor + (c.score - floor) * factor
                if cap is not None and "rerank" in c.scores:
                    new = max(c.score, min(new, cap))
                note = f"boost x{factor}" if ctx.explain else None
                rescored.append((c.with_score("boosted", new, note), c.score))
                n += 1
            else:
                rescored.append((c, c.score))
        # Ties (at the cap, typically) go to the higher unboosted score, then the chunk id.
        rescored.sort(key=lambda pair: (-pair[0].score, -pair[1], pair[0].chunk_id))
        boosted = [c for c, _ in rescored]
        before = [c.chunk_id for c in candidates]
        after = [c.chunk_id for c in boosted]
        changed = before != after
        if changed and n:
            log.info(
                "Follow-up document boost changed the ranking",
                extra={"boosted_count": n, "before": before[:10], "after": after[:10]},
            )
        ctx.trace.detail.update(boosted=n, order_changed=changed and n > 0, floor=round(floor, 6))
        return boosted


class MMR:
    """Maximal marginal relevance over stored embeddings (`mmr_lambda`; None or 1.0 = off).

    Relevance is the current score min-max normalised over the list (zero variance: all 0), so
    it respects rerank and boost; redundancy is the max cosine to an already selected chunk.
    The first `top_k` positions are chosen greedily (all top-k can keep); the rest follow in
    their previous order. Ties go to the earlier candidate, so the order is deterministic.
    Candidates without a usable stored vector (absent, zero or NaN) have zero redundancy.
    `score` is unchanged; the marginal value of each selected chunk is recorded as `scores["mmr"]`.
    Similarities are computed one selected row at a time: a full n x n product costs more (and
    wakes BLAS threads) for rows that are never needed.
    """

    name = "mmr"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        lam = ctx.params.mmr_lambda
        if lam is None or lam >= 1.0 or len(candidates) < 2:
            return list(candidates)
        try:
            stored = ctx.backend.vectors(ctx.index, [c.chunk_id for c in candidates])
        except EvidenceError as exc:
            log.warning("mmr: vectors unavailable: %s", exc)
            ctx.trace.degrade("mmr:vectors_unavailable")
            return list(candidates)
        n = len(candidates)
        scores = np.array([c.score for c in candidates], dtype=np.float64)
        span = float(scores.max() - scores.min())
        rel = (scores - scores.min()) / span if span > 0 else np.zeros(n)
        dim = next((len(v) for v in stored.values()), 0)
        mat = unit_rows([stored.get(c.chunk_id) for c in candidates], dim)
        chosen = np.zeros(n, dtype=bool)
        picks: list[Candidate] = []
        for i, value in mmr(rel, lambda j: mat @ mat[j], lam=lam, k=ctx.params.top_k):
            chosen[i] = True
            picks.append(_annotate(candidates[i], "mmr", value))
        rest = [c for c, used in zip(candidates, chosen, strict=True) if not used]
        ctx.trace.detail["vectors"] = len(stored)
        return picks + rest


class TopK:
    """The first `top_k` in the current order."""

    name = "top_k"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        k = ctx.params.top_k
        for c in candidates[k:]:
            ctx.trace.drop(ctx, c, f"beyond top_k={k}")
        return list(candidates[:k])


__all__ = [
    "MMR",
    "CandidateLimit",
    "CollapseOverlaps",
    "DedupContent",
    "FocusHits",
    "FollowupDocumentBoost",
    "FollowupExtraction",
    "MinSimilarity",
    "PerDocumentCap",
    "RelevancyCutoff",
    "Rerank",
    "Stage",
    "TopK",
    "Trace",
]
