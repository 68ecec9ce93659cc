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
import math
import re
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
from evidence.rank.followups import (
    CRITERION_HASH_KEY,
    FOLLOWUP_DOCUMENT_TYPE,
    QUESTION_SIMILARITY,
    is_followup_response,
    question_similarity,
    round_of,
)
from evidence.rank.rerank import RerankError
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
    """Seed 003's floor on dense cosine similarity (`min_similarity`; None or 0.0 = off).

    The similarity is `scores["dense"]` from the first stage. A candidate the dense leg did not
    return is judged by the cosine of its stored vector with the query vector (one batched
    `backend.vectors` call); if neither exists (no query vector, lexical-only index) it is KEPT:
    the floor removes what is known to be dissimilar, never what could not be measured.
    """

    name = "min_similarity"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        floor = ctx.params.min_similarity
        if not floor:  # seed 003: a threshold of 0.0 means off
            return list(candidates)
        missing = [c.chunk_id for c in candidates if "dense" not in c.scores]
        computed: dict[str, float] = {}
        if missing and ctx.query_vector is not None:
            try:
                stored = ctx.backend.vectors(ctx.index, missing)
            except EvidenceError as exc:
                log.warning("min_similarity: vectors unavailable: %s", exc)
                ctx.trace.degrade("min_similarity:vectors_unavailable")
                stored = {}
            q = np.asarray(ctx.query_vector, dtype=np.float32)
            qn = float(np.linalg.norm(q))
            for cid, vec in stored.items():
                vn = float(np.linalg.norm(vec))
                if qn > 0 and vn > 0:
                    computed[cid] = float(np.dot(q, vec) / (qn * vn))
        out: list[Candidate] = []
        for cand in candidates:
            c = cand
            sim = c.scores.get("dense")
            if sim is None and c.chunk_id in computed:
                sim = computed[c.chunk_id]
                c = _annotate(c, "dense", sim)
            if sim is None:
                out.append(_note(ctx, c, "min_similarity: kept, no dense similarity available"))
            elif sim >= floor:
                out.append(c)
            else:
                ctx.trace.drop(ctx, c, f"dense similarity {sim:.4f} < min_similarity {floor}")
        ctx.trace.detail["computed"] = len(computed)
        return out


class DedupContent:
    """Drop chunks whose content hash was already seen, keeping the best-scored copy."""

    name = "dedup"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        best: dict[str, str] = {}
        for c in sorted(candidates, key=sort_key):
            best.setdefault(c.chunk.content_hash or content_hash(c.chunk.text), c.chunk_id)
        out = []
        for c in candidates:
            if best[c.chunk.content_hash or content_hash(c.chunk.text)] == c.chunk_id:
                out.append(c)
            else:
                ctx.trace.drop(ctx, c, "duplicate content")
        return out


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

        cosines = {c.chunk_id: float(c.scores["dense"]) for c in candidates if "dense" in c.scores}
        missing = [c.chunk_id for c in candidates if c.chunk_id not in cosines]
        q = ctx.query_vector
        if missing and q is not None:
            try:
                stored = ctx.backend.vectors(ctx.index, missing)
            except EvidenceError as exc:
                log.warning("rerank_cutoff: vectors unavailable: %s", exc)
                stored = {}
            qn = float(np.linalg.norm(q))
            for cid, vec in stored.items():
                vn = float(np.linalg.norm(vec))
                if qn > 0 and vn > 0:
                    cosines[cid] = float(np.dot(q, vec) / (qn * vn))
        try:
            embedder_id: str | None = ctx.backend.get_index(ctx.index).embedder_id
        except EvidenceError:
            embedder_id = None
        ctx.trace.detail["score"] = "relevance"
        out = []
        for c, p in zip(
            candidates,
            hit_relevance(ctx.query, candidates, cosines=cosines, embedder_id=embedder_id),
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


#: Two passage windows (256 MiniLM word pieces run ~1,000-1,300 characters of prose): the most a
#: merged hit may grow to, so a hit stays a piece of a document, never a merged chapter.
DEFAULT_MAX_HIT_CHARS = 2500


class CollapseOverlaps:
    """Overlapping passages of one document become one hit, so the top hits do not repeat a sentence.

    Neighbouring passage windows share `overlap` tokens (docs/ingest.md), so when both match, the
    shared sentence fills two hits. A passage whose text overlaps a better-ranked passage of the
    same document is merged into it: the better one keeps its id, scores and rank and its text
    grows to the union of both (exact, since both are slices of one document text); the other
    is dropped. Passages that only touch, fact spans, and passages of other documents are left
    alone; the order is otherwise unchanged.

    A merged hit never grows past `max_chars` (issue 22: merging without a bound returned hits of
    24,630 characters): when the union would, the lower-ranked passage keeps only its part outside
    the better hit (a slice of the document still), or is dropped when nothing of it is new.
    """

    name = "collapse_overlaps"

    def __init__(self, *, max_chars: int = DEFAULT_MAX_HIT_CHARS) -> None:
        if max_chars < 1:
            raise ConfigurationError("collapse_overlaps: max_chars must be at least 1")
        self.max_chars = max_chars

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        out: list[Candidate | None] = []  # None: merged into a better-ranked hit
        kept: dict[str, list[int]] = {}  # document id -> positions in `out` of its passages
        merged = trimmed = 0
        for c in candidates:
            if c.chunk.kind is not ChunkKind.PASSAGE:
                out.append(c)
                continue
            positions = kept.setdefault(c.chunk.document_id, [])
            hit = [i for i in positions if _overlaps(out[i], c)]
            if not hit:
                positions.append(len(out))
                out.append(c)
                continue
            # `c` may bridge two kept passages: all of them become the best-ranked one.
            group = [g for i in hit if (g := out[i]) is not None]
            if _span_of([*group, c]) <= self.max_chars:
                out[hit[0]] = _union(group[0], [*group[1:], c])
                for i in hit[1:]:
                    out[i] = None
                    positions.remove(i)
                for g in [*group[1:], c]:
                    merged += 1
                    ctx.trace.drop(
                        ctx, g, f"overlaps {group[0].chunk_id} of the same document: merged into it"
                    )
                continue
            rest = _outside(c, group)
            if rest is None:
                ctx.trace.drop(ctx, c, f"inside {group[0].chunk_id}, which is at the size bound")
                continue
            trimmed += 1
            positions.append(len(out))
            out.append(rest)
        ctx.trace.detail["merged"] = merged
        if trimmed:
            ctx.trace.detail["trimmed"] = trimmed
        return [c for c in out if c is not None]


def _overlaps(a: Candidate | None, b: Candidate) -> bool:
    return a is not None and a.chunk.char_start < b.chunk.char_end and b.chunk.char_start < a.chunk.char_end


def _span_of(cands: Sequence[Candidate]) -> int:
    return max(c.chunk.char_end for c in cands) - min(c.chunk.char_start for c in cands)


def _outside(c: Candidate, kept: Sequence[Candidate]) -> Candidate | None:
    """`c` cut to its part that no kept passage covers, when that part is one contiguous piece."""
    start, end = c.chunk.char_start, c.chunk.char_end
    for k in sorted(kept, key=lambda x: x.chunk.char_start):
        ks, ke = k.chunk.char_start, k.chunk.char_end
        if ks <= start < ke:
            start = ke
        elif ks < end <= ke:
            end = ks
        elif start < ks and ke < end:
            return None  # both sides stick out: two pieces; the better hit already holds the middle
    if end - start < 1:
        return None
    return _slice(c, start, end)


def _slice(c: Candidate, start: int, end: int) -> Candidate:
    """The candidate's chunk narrowed to `[start, end)` of its document (a slice of its text)."""
    a, b = start - c.chunk.char_start, end - c.chunk.char_start
    text = c.chunk.text[a:b]
    chunk = replace(c.chunk, text=text, char_start=start, char_end=end, content_hash=content_hash(text))
    return replace(c, chunk=chunk)


def _union(best: Candidate, rest: Sequence[Candidate]) -> Candidate:
    """`best` with its text widened to cover `rest`; together they form one contiguous stretch."""
    pieces = sorted((c.chunk for c in (best, *rest)), key=lambda ch: ch.char_start)
    text, start, end = pieces[0].text, pieces[0].char_start, pieces[0].char_end
    for ch in pieces[1:]:
        if ch.char_end > end:
            text += ch.text[end - ch.char_start :]
            end = ch.char_end
    chunk = replace(
        best.chunk,
        text=text,
        char_start=start,
        char_end=end,
        page=pieces[0].page,
        content_hash=content_hash(text),
    )
    return replace(best, chunk=chunk)


_SENTENCE_END = re.compile(
    r"(?<=[.!?:;])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*(?:[-*\u2022|]|\d+[.)]\s))"
)


def _sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of the sentences, list items and table rows of a passage, whitespace trimmed:
    a plain splitter (ranking sits below ingestion's), enough to find where an answer starts."""
    out = []
    start = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.start() if m else len(text)
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
        start = m.end() if m else len(text)
    return out


class FocusHits:
    """Each passage hit starts at its sentence that best matches the question (minimal evidence).

    A 256-token passage is ~1,100 characters and the answer may sit at its end; read in rank
    order, the evidence then puts a window of context before every answer. This stage cuts a
    passage hit to start at its best sentence — the one holding most of the question's analysed
    terms, IDF-weighted over the passage's sentences, the earliest on a tie — and keeps the rest
    of the passage after it, so the hit stays a slice of the document and never grows. A passage
    whose first sentence is (one of) the best, or shorter than `min_chars`, is left whole. The
    full passage's term coverage is kept in `scores["coverage"]` for the answerability signal,
    which must not change because the evidence got shorter.
    """

    name = "focus"

    def __init__(self, *, min_chars: int = 400) -> None:
        self.min_chars = min_chars

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        from evidence.search.analysis import get_analyzer

        analyzer = get_analyzer()
        q = set(analyzer.analyze(ctx.query))
        if not q:
            return list(candidates)
        out: list[Candidate] = []
        focused = 0
        for given in candidates:
            ch = given.chunk
            if ch.kind is not ChunkKind.PASSAGE or len(ch.text) < self.min_chars:
                out.append(given)
                continue
            sents = _sentences(ch.text)
            bags = [set(analyzer.analyze(ch.text[a:b])) for a, b in sents]
            full = set().union(*bags) if bags else set()
            coverage = len(q & (full | set(analyzer.analyze(ch.title or "")))) / len(q)
            c = given
            if "coverage" not in c.scores:
                c = replace(c, scores=MappingProxyType({**c.scores, "coverage": coverage}))
            if len(sents) < 2:
                out.append(c)
                continue
            df: dict[str, int] = {}
            for bag in bags:
                for t in bag & q:
                    df[t] = df.get(t, 0) + 1
            n = len(bags)
            weight = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
            values = [sum(weight[t] for t in bag & q) for bag in bags]
            best = max(range(n), key=lambda i: (values[i], -i))
            if best == 0 or values[best] <= values[0]:
                out.append(c)
                continue
            focused += 1
            out.append(_slice(c, ch.char_start + sents[best][0], ch.char_end))
        ctx.trace.detail["focused"] = focused
        return out


class PerDocumentCap:
    """At most `max_chunks_per_document` chunks of one document (None = off), best first."""

    name = "per_document_cap"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        cap = ctx.params.max_chunks_per_document
        if cap is None:
            return list(candidates)
        seen: dict[str, int] = {}
        out = []
        for c in candidates:
            n = seen.get(c.chunk.document_id, 0)
            if n >= cap:
                ctx.trace.drop(ctx, c, f"more than {cap} chunks of document {c.chunk.document_id}")
                continue
            seen[c.chunk.document_id] = n + 1
            out.append(c)
        return out


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
        mat = np.zeros((n, max(dim, 1)), dtype=np.float32)
        for i, c in enumerate(candidates):
            v = stored.get(c.chunk_id)
            if v is not None and len(v) == dim:
                norm = float(np.linalg.norm(v))
                if norm > 0 and math.isfinite(norm):
                    mat[i] = np.asarray(v, dtype=np.float32) / norm
        redundancy = np.full(n, -math.inf)
        chosen = np.zeros(n, dtype=bool)
        picks: list[Candidate] = []
        for _ in range(min(n, ctx.params.top_k)):
            red = np.where(np.isfinite(redundancy), redundancy, 0.0)
            value = lam * rel - (1.0 - lam) * red
            value[chosen] = -math.inf
            i = int(np.argmax(value))  # first maximum: the earlier candidate wins ties
            chosen[i] = True
            redundancy = np.maximum(redundancy, (mat @ mat[i]).astype(np.float64))
            picks.append(_annotate(candidates[i], "mmr", float(value[i])))
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


class CharBudget:
    """Seed 003's budget: keep hits in order while the total `len(text)` fits `max_chars`.

    Exact seed algorithm: stop at the FIRST hit that would overflow (no skipping to a shorter
    one), never cut a chunk. None or 0 = unlimited. Follow-ups are not counted.
    """

    name = "max_chars"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        budget = ctx.params.max_chars
        if not budget:
            return list(candidates)
        used = 0
        out: list[Candidate] = []
        for i, c in enumerate(candidates):
            cost = len(c.chunk.text)
            if used + cost > budget:
                for d in candidates[i:]:
                    ctx.trace.drop(ctx, d, f"max_chars={budget} reached")
                break
            out.append(c)
            used += cost
        ctx.trace.detail["chars"] = used
        return out


__all__ = [
    "MMR",
    "CandidateLimit",
    "CharBudget",
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
