"""Ranking stages that remove repetition and shape hits: duplicate content, overlapping passages
of one document (merged), hits focused on their matching sentences, and more than
`max_chunks_per_document` chunks of one document.

They keep the order they are given (the convention of `rank/stages.py`, which re-exports them).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from evidence.errors import ConfigurationError
from evidence.ids import content_hash
from evidence.rank.candidate import Candidate, sort_key
from evidence.rank.context import RankContext
from evidence.records import ChunkKind

if TYPE_CHECKING:
    from evidence.search.analysis import EnglishAnalyzer


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
    r"(?<=[.!?:;])(?:[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])"
    # or a lower-case list marker after a sentence: "… this document. b. Nothing in …"
    r"|\s+(?=\(?(?:[a-z]|[ivx]{2,4})[.)]\s+[\"'(\[]?[A-Z0-9]))"
    r"|\n\s*\n|\n(?=\s*(?:[-*\u2022|]|\d+[.)]\s))"
)


#: A list marker standing alone ("a.", "(ii)", "8.", "4.2"): the start of the item after it.
_ENUMERATOR = re.compile(r"\(?(?:[A-Za-z]|[0-9]{1,3}(?:\.[0-9]{1,3})*|[ivxlIVXL]{1,5})[.)]?")


def _sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of the sentences, list items and table rows of a passage, whitespace trimmed:
    a plain splitter (ranking sits below ingestion's), enough to find where an answer starts.
    A list marker the splitter cut off ("a. No trademark…" splits after "a.") opens the next
    sentence, so the item is chosen whole."""
    out: list[tuple[int, int]] = []
    start = 0
    marker: int | None = None
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.start() if m else len(text)
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        start = m.end() if m else len(text)
        if b <= a:
            continue
        if _ENUMERATOR.fullmatch(text, a, b):
            marker = a if marker is None else marker
            continue
        out.append((a if marker is None else marker, b))
        marker = None
    if marker is not None:  # a marker closing the passage: part of the sentence before it
        last = len(text.rstrip())
        out[-1:] = [(out[-1][0], last)] if out else [(marker, last)]
    return out


class ValueKind(Protocol):
    """A kind of value a question may expect (`verbatim.answer_types.AnswerType`: a duration, a
    dose, a count…), which focus reads to raise the sentences that state one."""

    def reads_in(self, text: str) -> bool: ...


#: Focus windows, fitted leave-one-family-out on the QA suite (`bench/qa/focus_fit.py --fit`):
#: every hit is cut to its best run of sentences of at most `WINDOW` characters; the first hit,
#: which holds most answers, keeps up to `LEAD` characters of the sentences before its run and
#: runs on to `FIRST_WINDOW` characters, so more hits reach a reader's first 2,000 characters.
WINDOW = 200
FIRST_WINDOW = 1000
LEAD = 400
#: The second hit's run (it holds the answer for 16 % of the suite's questions, and 200
#: characters cut a third of those out); None: `WINDOW`.
SECOND_WINDOW: int | None = 400
#: What a sentence stating the kind of value asked for adds to its run's value, in IDF units (a
#: question term of middling rarity weighs ~1-2); the kinds come from `FocusHits(expected=…)`, the
#: answer-type lexicon in the `default` profile (`profiles.default`; ranking sits below it).
TYPE_WEIGHT = 1.5
#: Whether run sizes (`window`, `second_window`, `first_window`, `lead`) count a whitespace run as
#: one character, as a reader and the QA suite's 2,000-character budget do: indented plain text
#: and PDF line breaks (4.5 % of the contract family's hit characters are surplus whitespace, 2.5 %
#: of the standard's, 1.5 % of the clinical PDF's) otherwise shorten a run by text the budget does
#: not count. Fitted with the sizes, leave-one-family-out (issue 22; docs/ranking.md#focus-space).
COLLAPSE_SPACE = True


#: The evidence a reader takes in at once (issue 22's budget, not fitted), in characters counted
#: as the budget counts them (whitespace runs once): when the focused hits come to less, the runs
#: grow back, first hit first, over whole sentences of their passages until they reach it (None:
#: off). A question scoped to one short document gets a few hits (43 of the QA suite's 310
#: answerable questions get under 10), and focus cut 7 answers out of hits that left the budget
#: unspent (docs/ranking.md#focus-fill).
FILL: int | None = 2000

#: Whether a hit whose focused text (whitespace runs once) already occurs in the evidence before
#: it is dropped: repeated text spends the reader's budget on nothing new (docs/ranking.md#focus-repeats).
DROP_REPEATS = False

#: Whether the first hit, when focus cut some of its sentences away (a merged hit of two windows
#: keeps ~1,000 of up to 2,500 characters), is followed by a second run of it: the best run of
#: `window` characters, by the same value, among the sentences it left out, as a hit of its own
#: right after it (docs/ranking.md#focus-second-run).
SECOND_RUN = True

#: Whether the first hit, when its kept text and its second run still leave sentences out, gets a
#: third run as well: the best run of `window` characters among those, as a hit of its own after
#: the second hit (not before it: the grounding check reads the first three hits, and three
#: slices of one passage there refused 7 more answerable questions). With `second_run` only
#: (docs/ranking.md#focus-third-run).
THIRD_RUN = True

#: With anchors that give each hit's best span cosine (`verbatim.cascade.SpanAnchors`, the cache-only
#: anchor on late span vectors): before focus cuts them, the first hit stays first and hits 2 to
#: `ANCHOR_ORDER_HITS` are reordered by z(score) + `ANCHOR_ORDER_WEIGHT` x z(the question's best late
#: cosine with a candidate span inside the hit), z-scores over those hits (a hit with no candidate
#: counts the lowest cosine among them); ties keep the fused order. Fitted leave-one-family-out on
#: the 19 development families (session 47, `anchor19`, variant H2b: N in 3/5/10 x weight in
#: 0/0.1/0.25/0.5/1/2, each fold choosing by its 18 training families' recall@2000; every fold and
#: the all-family fit chose 10 and 1.0; bench/data/session47/anchor19.md,
#: docs/ranking.md#focus-anchor-order). Fewer than 3 hits or weight 0: off.
ANCHOR_ORDER_HITS = 10
ANCHOR_ORDER_WEIGHT = 1.0

#: Whether, when `anchor_order` moved hits, the answer signal (the cosine/coverage model and the
#: grounding check, which read the first three hits) reads the hits in their fused order, cut as
#: focus cuts them in that order (the order its models were fitted on), while the evidence keeps
#: the anchor order: `Trace.judged`, `RankOutcome.judged` (session 48, `refgate20`;
#: docs/ranking.md#focus-anchor-order-judged). Each hit's run is found once per window for both.
JUDGE_FUSED = True


def anchor_order(
    hits: Sequence[Candidate], cosines: Sequence[float | None], n: int, weight: float
) -> list[int] | None:
    """The positions of `hits` with the first kept first and hits 2..`n` ordered by z(score) +
    `weight` x z(cosine), the z-scores over those hits (population deviation; a constant column
    counts 0), a hit with no cosine counting the lowest of them, ties in the given order; the rest
    as given. None: no change to make (fewer than two hits to order, or no cosine among them)."""
    import numpy as np

    k = min(n, len(hits))
    if k < 3 or weight <= 0:
        return None
    got = [c for c in cosines[1:k] if c is not None]
    if not got:
        return None
    low = min(got)

    def z(x: Sequence[float]) -> Any:
        a = np.asarray(x, dtype=np.float64)
        sd = a.std()
        return np.zeros_like(a) if sd == 0 else (a - a.mean()) / sd

    key = z([h.score for h in hits[1:k]]) + weight * z([low if c is None else c for c in cosines[1:k]])
    rest = sorted(range(k - 1), key=lambda j: (-key[j], j))
    return [0, *(j + 1 for j in rest), *range(k, len(hits))]


def _rounded(x: float | None) -> float | None:
    """A cosine as the trace's JSON holds it (a numpy float is none)."""
    return None if x is None else round(float(x), 4)


class Paraphrase(Protocol):
    """How near each sentence of a text comes to each question term it may lack: per sentence,
    question term -> similarity in (0, 1] (terms at or below the similarity floor left out)."""

    def credit(
        self, query: str, terms: set[str], text: str, spans: Sequence[tuple[int, int]]
    ) -> list[dict[str, float]]: ...


class Anchors(Protocol):
    """Where in each passage hit a span scorer puts the answer: hit position -> the document
    character range of its best span (`verbatim.cascade.SpanAnchors`: the `verbatim` profile's
    fitted span scorer); hits it says nothing of are focused as usual."""

    def find(self, hits: Sequence[Candidate], ctx: RankContext) -> Mapping[int, tuple[int, int]]: ...


#: How an anchor places a run: "contain" (the best run, by focus's own value, among those holding
#: the anchor's first sentence; none with a question word: the run from the anchor sentence) or
#: "start" (the run from the anchor sentence).
ANCHOR_MODES = ("contain", "start")


class FocusHits:
    """Each passage hit is cut to the sentences that best match the question (minimal evidence).

    A 256-token passage is ~1,100 characters (a merged hit up to 2,500) and its answer may sit
    anywhere in it; read in rank order, the evidence then spends a reader's budget on text around
    the answers. This stage finds in each passage hit its **best run**: the run of whole
    sentences, at most `window` characters long (one longer sentence alone), that holds the most
    of the question's analysed terms, each counted once and weighted by its IDF over the
    sentences of all the hits (a word in every sentence says little), the earliest on a tie.

    - Every hit but the first is cut to its best run (the second's may run to `second_window`).
    - With `expected` (the question's expected kinds of value, e.g. a duration for "how long"), a
      run holding a sentence that states one gains `type_weight`.
    - A list marker the splitter cut off ("a." before "No trademark…") opens its item's sentence.
    - The first hit (it holds the answer for most questions: 59 % of the QA suite's, the next
      hits 16 %, 6 %, 5 %…) starts up to `lead` characters earlier, at a sentence start (a
      question's words are often in the sentence before or after its answer), and runs on over
      whole sentences to `first_window` characters from there.
    - With `collapse_space` (the default) those sizes count a whitespace run as one character,
      as the reader's budget does, so indented or line-broken text gets as much text as prose.
    - With `paraphrase` and `paraphrase_weight` > 0 (off by default; a bench lever,
      docs/ranking.md#focus-static), a question term a run lacks is credited by how near the
      run's words come to it (`Paraphrase.credit`), times its IDF and `paraphrase_weight`.
    - With `anchors` (off by default; docs/ranking.md#focus-span-anchor), a hit whose best span
      by the `verbatim` profile's span scorer is known keeps a run holding that span's first
      sentence (`anchor_mode`).
    - With `fill` (the default: 2,000), when the cut hits come to less than `fill` characters
      (few hits: a short document), the runs grow back over whole sentences, first hit first, on
      after the run before back, up to `fill` (capped by a caller's `max_chars`, counted raw).
    - With `drop_repeats` (off by default; a bench lever, docs/ranking.md#focus-repeats), a hit
      whose kept text is already in the evidence before it is dropped, before the fill.
    - With `second_run` (the default), when the first hit's kept text leaves some of its sentences
      out (a hit `collapse_overlaps` merged from two windows keeps ~1,000 of up to 2,500
      characters), its best run of `window` characters among them (before or after the kept
      text, the same value) follows it as a hit of its own: a slice of the same passage, with the
      first hit's id and scores; none when they hold no question word, and none when the fill
      grew the first hit over it. The guardrail's `top_k` then cuts the last hit
      (docs/ranking.md#focus-second-run).
    - With `third_run` as well (the default; docs/ranking.md#focus-third-run), the best run of
      `window` characters among the first hit's sentences that neither its kept text nor its
      second run holds is a hit of its own the same way, placed after the second hit, so the
      first three hits (which the grounding check reads) stay the first hit, its second run and
      the second hit; the guardrail's `top_k` then cuts one more hit at the end.
    - With anchors that give cosines, hits 2 to `anchor_order` are reordered by them before the
      cut (`ANCHOR_ORDER_HITS`); with `judge_fused` (the default) the hits in their fused order,
      cut as they would be in that order, are left in `ctx.trace.judged` for the answer signal
      (`JUDGE_FUSED`), the returned hits keeping the anchor order.

    Why a run and not the best sentence: a paraphrased question shares few words with its answer,
    and the sentence with most question words is often next to it, not it. A hit stays a slice of
    its document and never grows past its passage; a passage shorter than `min_chars` or of one
    sentence is left whole. The full passage's term coverage is kept in `scores["coverage"]` for
    the answerability signal, which must not change because the evidence got shorter.
    """

    name = "focus"

    def __init__(
        self,
        *,
        min_chars: int = 400,
        window: int = WINDOW,
        first_window: int = FIRST_WINDOW,
        lead: int = LEAD,
        second_window: int | None = SECOND_WINDOW,
        type_weight: float = TYPE_WEIGHT,
        expected: Callable[[str], Sequence[ValueKind]] | None = None,
        collapse_space: bool = COLLAPSE_SPACE,
        fill: int | None = FILL,
        paraphrase: Paraphrase | None = None,
        paraphrase_weight: float = 0.0,
        drop_repeats: bool = DROP_REPEATS,
        anchors: Anchors | None = None,
        anchor_mode: str = "contain",
        second_run: bool = SECOND_RUN,
        third_run: bool = THIRD_RUN,
        anchor_order: int = ANCHOR_ORDER_HITS,
        anchor_order_weight: float = ANCHOR_ORDER_WEIGHT,
        judge_fused: bool = JUDGE_FUSED,
    ) -> None:
        second = window if second_window is None else second_window
        if min(min_chars, window, first_window, second) < 1 or lead < 0 or type_weight < 0:
            raise ConfigurationError(
                "focus: min_chars, window, second_window and first_window must be at least 1,"
                " lead and type_weight at least 0"
            )
        if fill is not None and fill < 1:
            raise ConfigurationError("focus: fill must be at least 1 (or None: off)")
        if paraphrase_weight < 0:
            # Below 0 would not switch the credit off but turn it into a penalty for paraphrases.
            raise ConfigurationError("focus: paraphrase_weight must be at least 0 (0: off)")
        if anchor_mode not in ANCHOR_MODES:
            raise ConfigurationError(f"focus: anchor_mode must be one of {', '.join(ANCHOR_MODES)}")
        if anchor_order < 0 or anchor_order_weight < 0:
            raise ConfigurationError("focus: anchor_order and anchor_order_weight must be at least 0")
        self.anchors = anchors
        self.anchor_mode = anchor_mode
        self.min_chars = min_chars
        self.window = window
        self.first_window = first_window
        self.lead = lead
        self.second_window = second
        self.type_weight = type_weight
        self.expected = expected
        self.collapse_space = collapse_space
        self.fill = fill
        self.paraphrase = paraphrase if paraphrase_weight > 0 else None
        self.paraphrase_weight = paraphrase_weight
        self.drop_repeats = drop_repeats
        self.second_run = second_run
        self.third_run = third_run
        self.anchor_order = anchor_order
        self.anchor_order_weight = anchor_order_weight
        self.judge_fused = judge_fused

    def _anchored(
        self, candidates: Sequence[Candidate], ctx: RankContext
    ) -> tuple[list[int] | None, Mapping[int, tuple[int, int]]]:
        """The hits' order, as positions in `candidates` (the first kept first and the next up to
        `anchor_order` reordered by their best span cosine when the anchors give one:
        `ANCHOR_ORDER_HITS`; None: as given), and the anchors by position in `candidates`."""
        if self.anchors is None:
            return None, {}
        with_cosines = getattr(self.anchors, "find_with_cosines", None)
        if self.anchor_order < 2 or self.anchor_order_weight <= 0 or not callable(with_cosines):
            return None, self.anchors.find(candidates, ctx)
        fixed, cosines = with_cosines(candidates, ctx)
        order = anchor_order(candidates, cosines, self.anchor_order, self.anchor_order_weight)
        if order is None:
            return None, fixed
        # The trace says which hits the span cosines moved, so `explain` shows why a hit with a
        # lower fused score is shown before another (positions from 1, as the hits are numbered).
        ctx.trace.detail["anchor_order"] = [
            {
                "chunk_id": candidates[old].chunk.chunk_id,
                "from": old + 1,
                "to": new + 1,
                "cosine": _rounded(cosines[old]),
            }
            for new, old in enumerate(order)
            if new != old
        ]
        return order, fixed

    def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
        from evidence.search.analysis import get_analyzer

        analyzer = get_analyzer()
        q = set(analyzer.analyze(ctx.query))
        if not q:
            return list(candidates)
        order, fixed = self._anchored(candidates, ctx)
        cuts = self._cuts(candidates, fixed, q, ctx, analyzer)
        fused = range(len(candidates))
        out, focused = self._focus(cuts, fused if order is None else order, ctx)
        ctx.trace.detail["focused"] = focused
        if self.judge_fused and order is not None and order != list(fused):
            # The answer signal reads the hits as focus cut them in the fused order, the order its
            # models were fitted on (`JUDGE_FUSED`); the guardrail cuts them as it cuts the hits.
            ctx.trace.judged = self._focus(cuts, fused, replace(ctx, explain=False))[0]
        return out

    def _cuts(
        self,
        candidates: Sequence[Candidate],
        fixed: Mapping[int, tuple[int, int]],
        q: set[str],
        ctx: RankContext,
        analyzer: EnglishAnalyzer,
    ) -> _Cuts:
        """What each hit's run depends on but its place (everything but its window), read once:
        both orders `_focus` cuts (the returned and the judged) share it. `analyzer`: the one
        `run` analysed the question with (the titles are analysed alike)."""
        cut = [c.chunk.kind is ChunkKind.PASSAGE and len(c.chunk.text) >= self.min_chars for c in candidates]
        read = {i: _sentence_terms(c.chunk.text) for i, c in enumerate(candidates) if cut[i]}
        sents = {i: list(spans) for i, (spans, _) in read.items()}
        bags = {i: [set(ts) for ts in terms] for i, (_, terms) in read.items()}
        weight = _idf([bag & q for listed in bags.values() for bag in listed])
        kinds = self.expected(ctx.query) if self.expected is not None and self.type_weight > 0 else ()
        if self.paraphrase is not None:
            # A question term no sentence holds weighs as a term in one sentence would.
            top = _bm25_idf(sum(len(b) for b in bags.values()), 1)
            qweight = {t: self.paraphrase_weight * weight.get(t, top) for t in q}
        cuts = _Cuts(shown=list(candidates), sents=sents, weight=weight)
        for i in read:
            ch = candidates[i].chunk
            full = set().union(*bags[i]) if bags[i] else set()
            coverage = len(q & (full | set(analyzer.analyze(ch.title or "")))) / len(q)
            c = cuts.shown[i]
            if "coverage" not in c.scores:
                cuts.shown[i] = replace(c, scores=MappingProxyType({**c.scores, "coverage": coverage}))
            if len(sents[i]) < 2:
                continue
            # Sentence by sentence only where the hit states such a value at all (most do not).
            said = [k for k in kinds if k.reads_in(ch.text)]
            stating = (
                [self.type_weight * any(k.reads_in(ch.text[a:b]) for k in said) for a, b in sents[i]]
                if said
                else None
            )
            soft = None
            if self.paraphrase is not None:
                soft = [
                    {t: qweight[t] * v for t, v in sim.items() if t in qweight}
                    for sim in self.paraphrase.credit(ctx.query, q, ch.text, sents[i])
                ]
            anchor = None
            if i in fixed:
                # The sentence holding the anchor span's start (or the first after it).
                rel = fixed[i][0] - ch.char_start
                anchor = next((k for k, (_, b) in enumerate(sents[i]) if b > rel), len(sents[i]) - 1)
            reading = _Reading(ch.text) if self.collapse_space else None
            cuts.inputs[i] = ([bag & q for bag in bags[i]], stating, reading, soft, anchor)
        return cuts

    def _best(self, cuts: _Cuts, i: int, size: int) -> tuple[int, int]:
        """Hit `i`'s best run of `size` characters (found once per size)."""
        if (i, size) not in cuts.best:
            found, stating, at, soft, anchor = cuts.inputs[i]
            cuts.best[i, size] = _best_run(
                cuts.sents[i],
                found,
                cuts.weight,
                size,
                stating,
                at=at,
                soft=soft,
                anchor=anchor,
                from_anchor=self.anchor_mode == "start",
            )
        return cuts.best[i, size]

    def _first(self, cuts: _Cuts, i: int) -> tuple[int, int, list[tuple[int, int]]]:
        """The first hit's kept run (widened) and its further runs (found once)."""
        if i not in cuts.first:
            found, stating, at, _, _ = cuts.inputs[i]
            start, end = _widen(
                cuts.sents[i], *self._best(cuts, i, self.window), self.lead, self.first_window, at=at
            )
            extra = _runs_outside(
                cuts.sents[i],
                found,
                cuts.weight,
                self.window,
                stating=stating,
                kept=(start, end),
                at=at,
                count=(1 + self.third_run) if self.second_run else 0,
            )
            cuts.first[i] = (start, end, extra)
        return cuts.first[i]

    def _focus(self, cuts: _Cuts, order: Sequence[int], ctx: RankContext) -> tuple[list[Candidate], int]:
        """The hits in `order` (positions in the stage's input) cut, and how many were."""
        out: list[Candidate] = []
        # position in `out` -> (its sentences, the run kept, how its characters are counted)
        runs: dict[int, _Run] = {}
        extra: list[tuple[int, int]] = []  # the first hit's second (and third) run
        for rank, i in enumerate(order):
            if i in cuts.inputs:
                if rank == 0:
                    start, end, extra = self._first(cuts, i)
                else:
                    start, end = self._best(cuts, i, self.second_window if rank == 1 else self.window)
                runs[len(out)] = (cuts.sents[i], start, end, cuts.inputs[i][2])
            out.append(cuts.shown[i])
        if self.drop_repeats:
            out, runs = _drop_repeats(out, runs, ctx)
        out, runs = _second_hit(out, runs, extra)
        if self.fill is not None:
            # A caller's `max_chars` (counted raw by the guardrail) caps the fill, so no hit the
            # guardrail would have kept is pushed out by a grown run.
            cap = ctx.params.max_chars or None
            _fill(out, runs, self.fill if cap is None else min(self.fill, cap), raw=cap is not None)
        out, runs = _second_hit(out, runs, extra, grown=True)
        focused = 0
        for k, (_, start, end, _) in runs.items():
            ch = out[k].chunk
            if start == 0 and end == len(ch.text):
                continue
            focused += 1
            out[k] = _slice(out[k], ch.char_start + start, ch.char_start + end)
        return out, focused


@lru_cache(maxsize=4096)
def _sentence_terms(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[str, ...], ...]]:
    """A passage's sentences and each one's analysed terms: a function of its text alone, and
    the same passages come back query after query (the stage's largest cost under load was
    re-reading them: docs/scale.md#serving-cpu). Bounded: ~2.5 kB a SciFact passage with its
    text, so at most ~10 MB; tuples, so no caller can change what the next one reads."""
    from evidence.search.analysis import get_analyzer

    analyzer = get_analyzer()
    spans = tuple(_sentences(text))
    return spans, tuple(tuple(analyzer.analyze(text[a:b])) for a, b in spans)


def _idf(bags: Sequence[set[str]]) -> dict[str, float]:
    """BM25's IDF of each term over `bags` (the sentences of every hit)."""
    df: dict[str, int] = {}
    for bag in bags:
        for t in bag:
            df[t] = df.get(t, 0) + 1
    n = len(bags)
    return {t: _bm25_idf(n, d) for t, d in df.items()}


def _bm25_idf(n: int, d: int) -> float:
    """BM25's IDF of a term in `d` of `n` sentences."""
    return math.log(1 + (n - d + 0.5) / (d + 0.5))


def _best_run(
    sents: Sequence[tuple[int, int]],
    bags: Sequence[set[str]],
    weight: dict[str, float],
    size: int,
    stating: Sequence[float] | None = None,
    *,
    at: _Reading | None = None,
    soft: Sequence[dict[str, float]] | None = None,
    anchor: int | None = None,
    from_anchor: bool = False,
) -> tuple[int, int]:
    """(start, end) of the run of whole sentences, at most `size` characters (a longer sentence
    alone), starting at a sentence with a question term, whose distinct terms weigh most, plus
    the `stating` bonus of its best sentence (one that states the kind of answer asked); the
    earliest on a tie. No sentence with a question term: the first sentences. With `soft` (per
    sentence, question term -> weighted similarity), a question term the run lacks adds its best
    similarity among the run's sentences. With `anchor` (a sentence's position), only runs that
    hold that sentence; none with a question word, or `from_anchor`: the run from it."""
    best = (-1.0, 0, 0)
    for i, (start, first_end) in enumerate(sents):
        if anchor is not None and (i > anchor or (from_anchor and i < anchor)):
            continue
        if not bags[i] and (i or any(bags)) and not (from_anchor and i == anchor):
            continue  # a run starts at a question word: text before it only delays the answer
        end, seen, last = first_end, set(bags[i]), i
        bonus = stating[i] if stating else 0.0
        near: dict[str, float] = dict(soft[i]) if soft else {}
        for j in range(i + 1, len(sents)):
            if _span(at, start, sents[j][1]) > size:
                break
            end, last = sents[j][1], j
            seen |= bags[j]
            if stating:
                bonus = max(bonus, stating[j])
            if soft:
                for t, v in soft[j].items():
                    if v > near.get(t, 0.0):
                        near[t] = v
        if anchor is not None and last < anchor:
            continue
        value = sum(weight.get(t, 0.0) for t in seen) + bonus
        if near:
            # A question term the run lacks, credited by its nearest word in the run.
            value += sum(v for t, v in near.items() if t not in seen)
        if value > best[0] + 1e-9:
            best = (value, start, end)
    if anchor is not None and best[0] < 0 and not from_anchor:
        return _best_run(
            sents, bags, weight, size, stating, at=at, soft=soft, anchor=anchor, from_anchor=True
        )
    return best[1], best[2]


_SPACE_RUN = re.compile(r"\s{2,}")


class _Reading:
    """Offsets of a text counted as a reader (and the QA suite's evidence budget) counts them,
    whitespace runs as one character: `count(x)` is the characters before offset `x`."""

    def __init__(self, text: str) -> None:
        self.ends: list[int] = []  # a run's end, and the surplus characters up to it
        self.surplus: list[int] = []
        self.starts: list[int] = []
        total = 0
        for m in _SPACE_RUN.finditer(text):
            self.starts.append(m.start())
            self.ends.append(m.end())
            total += m.end() - m.start() - 1
            self.surplus.append(total)

    def count(self, x: int) -> int:
        k = bisect.bisect_right(self.ends, x)  # runs wholly before x
        before = self.surplus[k - 1] if k else 0
        if k < len(self.starts) and self.starts[k] < x:  # x inside a run: its first char counts
            before += x - self.starts[k] - 1
        return x - before


#: A focused hit: its sentences (start, end), the run kept (start, end offsets in its text), and
#: how its characters are counted (None: raw).
_Run = tuple[list[tuple[int, int]], int, int, _Reading | None]
#: What a hit's best run depends on besides its window: per sentence the question terms it holds,
#: the stating bonus (None: none), how its characters are counted, the paraphrase credit (None:
#: off) and the anchor's sentence (None: no anchor).
_RunInputs = tuple[
    list[set[str]], list[float] | None, _Reading | None, list[dict[str, float]] | None, int | None
]


@dataclass
class _Cuts:
    """One `focus` run's reading of its hits, shared by the orders it cuts them in: each hit as it
    enters the evidence (`shown`, with its coverage), the sentences and `_RunInputs` of those that
    get a run, the IDF weights, and the runs found so far (by hit and window; the first hit's)."""

    shown: list[Candidate]
    sents: dict[int, list[tuple[int, int]]]
    weight: dict[str, float]
    inputs: dict[int, _RunInputs] = field(default_factory=dict)
    best: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    first: dict[int, tuple[int, int, list[tuple[int, int]]]] = field(default_factory=dict)


def _span(at: _Reading | None, a: int, b: int) -> int:
    """Characters of `[a, b)`: raw, or as `at` counts them (whitespace runs once)."""
    return b - a if at is None else at.count(b) - at.count(a)


def _widen(
    sents: Sequence[tuple[int, int]],
    start: int,
    end: int,
    lead: int,
    size: int,
    *,
    at: _Reading | None = None,
) -> tuple[int, int]:
    """The run `[start, end)` moved back over the whole sentences within `lead` characters before
    it, then run on over whole sentences to `size` characters from its new start (never shorter
    than the run)."""
    new = start
    for a, _ in reversed(sents):
        if a >= start:
            continue
        if _span(at, a, start) > lead:
            break
        new = a
    for _, b in sents:
        if b <= end:
            continue
        if _span(at, new, b) > size:
            break
        end = b
    return new, end


def _run_outside(
    sents: Sequence[tuple[int, int]],
    bags: Sequence[set[str]],
    weight: dict[str, float],
    size: int,
    *,
    stating: Sequence[float] | None,
    kept: Sequence[tuple[int, int]],
    at: _Reading | None = None,
) -> tuple[int, int] | None:
    """The best run (`_best_run`'s value, at most `size` characters) among the sentences outside
    the `kept` ranges (each `[start, end)` of whole sentences): the sentences between them form
    stretches (one kept range: those before it and those after it), a run lies in one of them;
    the earlier on a tie. None when no stretch has a sentence with a question term."""
    best: tuple[float, int, int] | None = None
    sides: list[list[int]] = []
    for k, (a, b) in enumerate(sents):
        if any(s <= a and b <= e for s, e in kept):
            continue
        if sides and sides[-1][-1] == k - 1:
            sides[-1].append(k)
        else:
            sides.append([k])
    for side in sides:
        if not any(bags[k] for k in side):
            continue
        a, b = _best_run(
            [sents[k] for k in side],
            [bags[k] for k in side],
            weight,
            size,
            [stating[k] for k in side] if stating else None,
            at=at,
        )
        held = [k for k in side if sents[k][0] >= a and sents[k][1] <= b]
        value = sum(weight.get(t, 0.0) for t in set().union(*(bags[k] for k in held)))
        value += max((stating[k] for k in held), default=0.0) if stating else 0.0
        if best is None or value > best[0] + 1e-9:
            best = (value, a, b)
    return None if best is None else (best[1], best[2])


def _runs_outside(
    sents: Sequence[tuple[int, int]],
    bags: Sequence[set[str]],
    weight: dict[str, float],
    size: int,
    *,
    stating: Sequence[float] | None,
    kept: tuple[int, int],
    at: _Reading | None,
    count: int,
) -> list[tuple[int, int]]:
    """Up to `count` further runs of a hit whose kept text is `kept`: each the best run
    (`_run_outside`) among the sentences that neither the kept text nor the runs before it hold."""
    out: list[tuple[int, int]] = []
    for _ in range(count):
        more = _run_outside(sents, bags, weight, size, stating=stating, kept=[kept, *out], at=at)
        if more is None:
            break
        out.append(more)
    return out


def _second_hit(
    hits: list[Candidate], runs: dict[int, _Run], extra: Sequence[tuple[int, int]], *, grown: bool = False
) -> tuple[list[Candidate], dict[int, _Run]]:
    """The first hit's further runs `extra` (offsets in its text), slices of the same passage, put
    among the hits: the second run right after the first hit, a third after the hit that followed
    it (so the first three hits, which the grounding check reads, are the same with or without a
    third run). Not runs (the fill would grow them into the first hit's text); `runs` re-keyed.
    With `grown` (after the fill), those the first run grew over taken out again."""
    if not extra or 0 not in runs:
        return hits, runs
    out = list(hits)
    if grown:
        _, start, end, _ = runs[0]
        first = out[0].chunk
        placed = [k for k in range(1, len(out)) if k not in runs and out[k].chunk_id == out[0].chunk_id]
        for k in reversed(placed):
            a, b = out[k].chunk.char_start - first.char_start, out[k].chunk.char_end - first.char_start
            if start < b and a < end:  # once is enough
                del out[k]
                runs = {(j - 1 if j > k else j): r for j, r in runs.items()}
        return out, runs
    first = out[0].chunk
    for n, (a, b) in enumerate(extra):
        at = min(2 * n + 1, len(out))
        out.insert(at, _slice(out[0], first.char_start + a, first.char_start + b))
        runs = {(j + 1 if j >= at else j): r for j, r in runs.items()}
    return out, runs


def _drop_repeats(
    hits: Sequence[Candidate],
    runs: dict[int, _Run],
    ctx: RankContext,
) -> tuple[list[Candidate], dict[int, _Run]]:
    """The hits without those whose kept text (their run, or the whole hit), whitespace runs
    read as one space, already occurs in the kept hits before them; `runs` re-keyed to match."""
    out: list[Candidate] = []
    kept: dict[int, _Run] = {}
    seen = ""
    for k, c in enumerate(hits):
        text = c.chunk.text[runs[k][1] : runs[k][2]] if k in runs else c.chunk.text
        flat = " ".join(text.split())
        if out and flat and flat in seen:
            ctx.trace.drop(ctx, c, "focus: its text is already in the evidence before it")
            continue
        if k in runs:
            kept[len(out)] = runs[k]
        out.append(c)
        seen += " " + flat
    return out, kept


def _fill(
    hits: Sequence[Candidate],
    runs: dict[int, _Run],
    budget: int,
    *,
    raw: bool = False,
) -> None:
    """Grow the runs in `runs` (keyed by position in `hits`), in rank order, over whole sentences
    of their own passages, while the hits come to less than `budget` characters (a hit kept whole
    counts whole, one character joins two hits; `raw`: every character counts, as the
    guardrail's `max_chars` counts them). A run grows on after itself first, so what the reader
    meets first stays where it was; back before itself only by what is left when its passage
    ends (or its next sentence alone is longer than what is left)."""

    def count(at: _Reading | None) -> _Reading | None:
        return None if raw else at

    def size(k: int) -> int:
        if k in runs:
            _, start, end, at = runs[k]
            return _span(count(at), start, end)
        text = hits[k].chunk.text
        return len(text) if raw else len(_SPACE_RUN.sub(" ", text))

    slack = budget - sum(size(k) for k in range(len(hits))) - max(len(hits) - 1, 0)
    for k in sorted(runs):
        if slack <= 0:
            return
        sents, start, end, at = runs[k]
        by = count(at)
        had = _span(by, start, end)
        new = _widen(sents, start, end, 0, had + slack, at=by)
        if (grown := _span(by, *new) - had) < slack:
            new = _widen(sents, *new, slack - grown, _span(by, *new) + slack - grown, at=by)
        runs[k] = (sents, *new, at)
        slack -= _span(by, *new) - had


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
