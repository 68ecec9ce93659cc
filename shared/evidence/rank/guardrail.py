"""The guardrail: what a caller may demand of any profile's hits, enforced last in every profile.

Four knobs, one meaning and one default (off, or the profile's own cap) in every profile:

- `min_similarity` (seed 003): a hit whose similarity to the question is below the floor is
  dropped; a hit exactly at the floor stays (`>=`, as seed 003's filter is written); 0 = off.
- `top_k`: the first `top_k` hits in the profile's order.
- `max_chars` (seed 003's budget): hits in order while their total `len(text)` fits; stop at the
  first that would overflow, never cut one; 0 = off.
- `withhold_below`: all hits withheld when the answer signal's confidence is below it (`withhold`,
  called by the service once the signal is known); 0 = off.

**Similarity** is one number for every kind of hit, so one floor means the same everywhere: the
cosine of the query vector with the hit's stored vector (the first stage's `dense` score when it
has one; else `backend.vectors`). A fact span stored without a vector (the verbatim profile's
spans) takes the cosine of the passage it was cut from — the best one, where windows overlap —
which is what the dense leg would have said of that text. A coach node is a passage with a vector
of its own. A hit with no measurable similarity (no query vector, a lexical-only index) is kept:
the floor removes what is known to be dissimilar, never what could not be measured.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from evidence.errors import ConfigurationError, EvidenceError, RequestValidationError
from evidence.rank.candidate import Candidate
from evidence.rank.context import ProfileParams, RankContext
from evidence.rank.similarity import cosines
from evidence.records import ChunkKind

if TYPE_CHECKING:
    from evidence.config import Settings
    from evidence.rank.confidence import AnswerSignal
    from evidence.search.base import SearchReader

log = logging.getLogger(__name__)

#: The score key a hit's similarity is recorded under (the first stage's name for it).
SIMILARITY = "dense"
#: Passages read per guardrail call to find the passages fact spans were cut from.
_PASSAGE_LOOKUP_LIMIT = 5000


def at_or_above(similarity: float, floor: float) -> bool:
    """Seed 003's floor is inclusive: `kept = [m for m in matches if m.similarity >= min]`."""
    return similarity >= floor


def within_chars(lengths: Sequence[int], budget: int | None) -> tuple[int, int]:
    """(how many of the hits, of these lengths in order, fit `budget`; their characters): seed
    003's budget exactly — stop at the first that would overflow, never cut one. None or 0: all."""
    used = 0
    for i, n in enumerate(lengths):
        if budget and used + n > budget:
            return i, used
        used += n
    return len(lengths), used


def similarities(
    backend: SearchReader, index: str, query_vector: Any, candidates: Sequence[Candidate]
) -> dict[str, float]:
    """The similarity of every candidate that has a measurable one (module docstring), by id.

    Raises EvidenceError when the backend cannot give stored vectors (callers degrade)."""
    out = {c.chunk_id: float(c.scores[SIMILARITY]) for c in candidates if SIMILARITY in c.scores}
    missing = [c for c in candidates if c.chunk_id not in out]
    if not missing or query_vector is None:
        return out
    out.update(cosines(query_vector, backend.vectors(index, [c.chunk_id for c in missing])))
    spans = [c for c in missing if c.chunk_id not in out and c.chunk.kind is ChunkKind.SPAN]
    if spans:
        out.update(_span_similarities(backend, index, query_vector, spans))
    return out


def _span_similarities(
    backend: SearchReader, index: str, query_vector: Any, spans: Sequence[Candidate]
) -> dict[str, float]:
    """A span without a vector: the best cosine of the passages its characters lie in."""
    documents = sorted({c.chunk.document_id for c in spans})
    found = backend.lookup(
        index, {"document_id": documents}, limit=_PASSAGE_LOOKUP_LIMIT, kind=ChunkKind.PASSAGE
    )
    holders: dict[str, list[str]] = {}
    for c in spans:
        s = c.chunk
        holders[c.chunk_id] = [
            h.chunk.chunk_id
            for h in found
            if h.chunk.document_id == s.document_id
            and h.chunk.char_start < s.char_end
            and s.char_start < h.chunk.char_end
        ]
    wanted = sorted({p for ids in holders.values() for p in ids})
    passage_cos = cosines(query_vector, backend.vectors(index, wanted)) if wanted else {}
    out: dict[str, float] = {}
    for span_id, ids in holders.items():
        values = [passage_cos[p] for p in ids if p in passage_cos]
        if values:
            out[span_id] = max(values)
    return out


def with_similarity(c: Candidate, value: float) -> Candidate:
    """`c` with its similarity recorded (shown with `explain`; the order is not changed)."""
    if SIMILARITY in c.scores:
        return c
    return replace(c, scores=MappingProxyType({**c.scores, SIMILARITY: value}))


def apply_floor(
    candidates: Sequence[Candidate], ctx: RankContext, floor: float | None, *, stage: str
) -> list[Candidate]:
    """The candidates at or above `floor` (None or 0: all), measured as the module says."""
    if not floor:  # seed 003: a threshold of 0.0 means off
        return list(candidates)
    try:
        sims = similarities(ctx.backend, ctx.index, ctx.query_vector, candidates)
    except EvidenceError as exc:
        log.warning("%s: vectors unavailable: %s", stage, exc)
        ctx.trace.degrade(f"{stage}:vectors_unavailable")
        sims = {c.chunk_id: float(c.scores[SIMILARITY]) for c in candidates if SIMILARITY in c.scores}
    out: list[Candidate] = []
    unmeasured = 0
    for c in candidates:
        sim = sims.get(c.chunk_id)
        if sim is None:
            unmeasured += 1
            out.append(c.with_note(f"{stage}: kept, no dense similarity available") if ctx.explain else c)
        elif at_or_above(sim, floor):
            out.append(with_similarity(c, sim))
        else:
            ctx.trace.drop(ctx, c, f"similarity {sim:.4f} < min_similarity {floor}")
    ctx.trace.detail.update(min_similarity=floor, below_floor=len(candidates) - len(out))
    if unmeasured:
        ctx.trace.detail["unmeasured"] = unmeasured
    return out


class Guardrail:
    """The last stage of every profile: `min_similarity`, then `top_k`, then `max_chars`.

    It changes nothing a profile's own stages already enforced (a floor applied at recall, a
    top-k cut), so with the defaults every profile returns what it returned before the stage
    existed; what it adds is that the caller's bounds hold whatever the profile did before it
    (graph expansion, a cascade path, a merged passage)."""

    name = "guardrail"

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        p = ctx.params
        floored = kept = apply_floor(candidates, ctx, p.min_similarity, stage=self.name)
        for c in kept[p.top_k :]:
            ctx.trace.drop(ctx, c, f"beyond top_k={p.top_k}")
        kept = kept[: p.top_k]
        n, used = within_chars([len(c.chunk.text) for c in kept], p.max_chars)
        for c in kept[n:]:
            ctx.trace.drop(ctx, c, f"max_chars={p.max_chars} reached")
        ctx.trace.detail.update(top_k=p.top_k, chars=used)
        if p.max_chars:
            ctx.trace.detail["max_chars"] = p.max_chars
        if ctx.trace.judged is not None:
            ctx.trace.judged = _judged(ctx.trace.judged, floored, p)
        return kept[:n]


def _judged(judged: Sequence[Candidate], floored: Sequence[Candidate], p: ProfileParams) -> list[Candidate]:
    """`Trace.judged` cut as the guardrail cut the hits: the floor by chunk (`floored`: the hits
    it kept, with the similarity it read), then `top_k`, then `max_chars`."""
    kept = {c.chunk_id: c for c in floored}
    out = []
    for c in judged:
        seen = kept.get(c.chunk_id)
        if seen is not None:
            out.append(with_similarity(c, float(seen.scores[SIMILARITY])) if SIMILARITY in seen.scores else c)
    out = out[: p.top_k]
    n, _ = within_chars([len(c.chunk.text) for c in out], p.max_chars)
    return out[:n]


def withhold(
    params: ProfileParams, signal: AnswerSignal, hits: Sequence[Candidate]
) -> tuple[list[Candidate], bool]:
    """(the hits that leave, whether they were withheld): all of them are withheld when the
    answer signal's confidence is below `withhold_below` (None or 0: never). A confidence exactly
    at the floor keeps them, as the similarity floor does."""
    floor = params.withhold_below
    withheld = bool(floor) and bool(hits) and signal.confidence < (floor or 0.0)
    return ([] if withheld else list(hits)), withheld


def deployment_defaults(settings: Settings, profile: str) -> dict[str, Any]:
    """Knob defaults this deployment sets for `profile`: `EVIDENCE_MIN_SIMILARITY` and
    `EVIDENCE_MAX_CHARS` for every profile, `EVIDENCE_PROFILE_DEFAULTS[profile]` over them; a
    request's overrides go over these, these over the profile's own defaults."""
    from evidence.rank.pipeline import validate_overrides

    out: dict[str, Any] = {}
    if settings.min_similarity:
        out["min_similarity"] = settings.min_similarity
    if settings.max_chars:
        out["max_chars"] = settings.max_chars
    try:
        out.update(validate_overrides(settings.profile_defaults.get(profile, {})))
    except RequestValidationError as exc:
        raise ConfigurationError(
            f"EVIDENCE_PROFILE_DEFAULTS[{profile!r}]: {exc.message}", field="profile_defaults"
        ) from None
    return out


__all__ = [
    "Guardrail",
    "apply_floor",
    "at_or_above",
    "deployment_defaults",
    "similarities",
    "withhold",
    "within_chars",
]
