"""The verbatim retrieval cascade (seed 002), over the SearchBackend port.

SECTION_EXACT → SECTION_FUZZY → ATTRIBUTE_LOOKUP → BM25_FACTSPAN → GLOBAL_FACTSPAN_SCAN →
VECTOR_SCOPED → NO_RESULT. Each path applies only to the plans it suits, is bounded (spans and
characters returned, spans scanned), and the first that finds evidence wins; `path_used` names
it and `tried` records every path that ran. The order is configuration (`CascadeConfig.order`).

Scope: the question's entity. Documents carry their subject's names in metadata
(`entity_names`, lower-cased, filterable), so the cascade works on that entity's spans only —
a few hundred for a label — which is what lets the scan paths look at every one of them. With
no entity (a plain index) the scan paths are skipped and only the backend's own searches run.

What comes back are fact spans as stored, or a later long span's verbatim part (`trim_spans`, its
own offsets into the same document): their text is the document's text at their offsets
(`verbatim.check` proves it before a response leaves).

Tenancy: the cascade reads only through the backend it is given; on a request that is the index
seen through the request's filters (`search.scoped.bind_filters`), so no read of it, the scope's
own filters included, needs the request's filters passed along.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from evidence.ingest.sections import ENTITY_KEY, ENTITY_NAMES_KEY, name_words
from evidence.plan.verbatim import VerbatimRules, content_words, default_rules, run_at, says_name
from evidence.records import ChunkKind, SpanType
from evidence.verbatim.cascade_model import (
    ATTRIBUTE_LOOKUP,
    BM25_FACTSPAN,
    ENTITY_OVERVIEW,
    GLOBAL_FACTSPAN_SCAN,
    HYBRID_FACTSPAN,
    MULTI_SECTION_EVIDENCE,
    NO_RESULT,
    PATHS,
    REPORTED_PATHS,
    SECTION_EXACT,
    SECTION_FUZZY,
    VECTOR_SCOPED,
    CascadeConfig,
    CascadeResult,
    PathRun,
    PlanLike,
    SpanHit,
)
from evidence.verbatim.cascade_paths import CascadePaths
from evidence.verbatim.hybrid import same_text
from evidence.verbatim.scoring import terms
from evidence.verbatim.spans import (
    Neighbours,
    _heading_key,
    best_sub_span,
    falling,
    header_rows,
    introduces,
    reading_order,
    scoring_texts,
    span_path,
    trigram_similarity,
)

if TYPE_CHECKING:
    from evidence.records import Chunk
    from evidence.search.base import SearchReader

__all__ = [
    "ANCHOR_SCORERS",
    "ATTRIBUTE_LOOKUP",
    "BM25_FACTSPAN",
    "ENTITY_OVERVIEW",
    "GLOBAL_FACTSPAN_SCAN",
    "HYBRID_FACTSPAN",
    "MULTI_SECTION_EVIDENCE",
    "NO_RESULT",
    "PATHS",
    "REPORTED_PATHS",
    "SECTION_EXACT",
    "SECTION_FUZZY",
    "VECTOR_SCOPED",
    "CascadeConfig",
    "CascadeResult",
    "HitSpans",
    "PathRun",
    "PlanLike",
    "SpanAnchors",
    "SpanHit",
    "VerbatimCascade",
    "header_rows",
    "question_groups",
    "scoring_texts",
    "span_path",
    "span_ranking",
    "spans_in_hits",
    "spans_within",
    "trigram_similarity",
]


#: Paths whose evidence is not followed by the safety net's: itself, and an overview (one span per
#: key section of a document the question only names: nothing more specific was asked).
_UNFILLED = frozenset({HYBRID_FACTSPAN, ENTITY_OVERVIEW})


#: A question word of this many letters or more that starts a subject's word stands for it
#: ("struct" for "structures", "config" for "configuration"); shorter ones ("arg", "doc") start too
#: many words to tell.
MIN_ABBREVIATION = 4


def abbreviates(asked: Sequence[str], name: Sequence[str]) -> bool:
    """Whether a run of consecutive question words (`name_words`) says every word of `name` (its
    `name_words`), each as written or clipped: a leading abbreviation of `MIN_ABBREVIATION` letters
    or more ("struct" for "structure"). An empty name is never said."""

    def says(q: str, n: str) -> bool:
        return q == n or (len(q) >= MIN_ABBREVIATION and n.startswith(q))

    return run_at(asked, name, says) is not None


#: Passages read to find a clipped subject's documents, and documents it adds at most.
MAX_CLIPPED_SCAN = 2000
MAX_CLIPPED_DOCUMENTS = 3


class VerbatimCascade:
    def __init__(self, config: CascadeConfig | None = None, rules: VerbatimRules | None = None) -> None:
        self.config = config or CascadeConfig()
        self.rules = rules or default_rules()

    # --- entity ------------------------------------------------------------------------------

    def resolve_entity(
        self, backend: SearchReader, index: str, question: str, plan: PlanLike
    ) -> tuple[str | None, dict[str, Any] | None]:
        """(entity name, filters scoping the search to it), or (None, None) for the whole index.

        The plan's entity when the index knows it; otherwise the subject of the passages that best
        match the question, if they agree on one (a single-label index needs no name in the question).
        A passage of a document without a subject is a vote against every subject: one cookie-RFC
        passage among nine of a subjectless TLS RFC does not make the cookie RFC the question's
        subject (docs/verbatim.md, #subjectless). A subject not in the question as written may be
        said once both are read as names (`says_name`: "lipitor®" by "Lipitor"); one as written
        comes first. A subject said only clipped scopes nothing (`clipped_documents`).
        """
        if plan.entity:
            name = plan.entity.lower().strip()
            if backend.lookup(index, {ENTITY_NAMES_KEY: name}, limit=1, kind=ChunkKind.SPAN):
                return plan.entity, {ENTITY_NAMES_KEY: name}
        hits = backend.lexical(index, question, k=10, kind=ChunkKind.PASSAGE)
        subjects: dict[str, list[str]] = {}
        subjectless = False
        for h in hits:
            names = h.chunk.metadata.get(ENTITY_NAMES_KEY)
            if isinstance(names, list) and names:
                subjects.setdefault(str(names[0]), [str(n) for n in names])
            else:
                subjectless = True
        low = question.lower()
        for first, names in subjects.items():
            if any(re.search(r"(?<![0-9a-z])" + re.escape(n) + r"(?![0-9a-z])", low) for n in names):
                return first, {ENTITY_NAMES_KEY: first}
        asked = name_words(question)
        for first, names in subjects.items():
            if any(says_name(asked, question, n) for n in names):
                return first, {ENTITY_NAMES_KEY: first}
        if len(subjects) == 1 and not subjectless:
            first = next(iter(subjects))
            return first, {ENTITY_NAMES_KEY: first}
        return None, None

    @staticmethod
    def clipped_documents(backend: SearchReader, index: str, question: str) -> list[str]:
        """The documents of the first subject of the question's 10 best BM25 passages that the
        question says clipped, word by word (`abbreviates`: "structs" for "Structures"), or []:
        not a scope (one page of a manual would shut out the sibling page that answers), but
        documents the unscoped run reads besides the best passages' (`RunState.also_documents`)."""
        asked = name_words(question)
        for h in backend.lexical(index, question, k=10, kind=ChunkKind.PASSAGE):
            names = h.chunk.metadata.get(ENTITY_NAMES_KEY)
            if isinstance(names, list) and any(abbreviates(asked, name_words(str(n))) for n in names):
                found = backend.lookup(
                    index, {ENTITY_NAMES_KEY: str(names[0])}, limit=MAX_CLIPPED_SCAN, kind=ChunkKind.PASSAGE
                )
                return list(dict.fromkeys(f.chunk.document_id for f in found))[:MAX_CLIPPED_DOCUMENTS]
        return []

    # --- the run -----------------------------------------------------------------------------

    def run(
        self,
        backend: SearchReader,
        index: str,
        question: str,
        plan: PlanLike,
        *,
        query_vector: Any = None,
        documents: Sequence[str] | None = None,
        embed: Any = None,
    ) -> CascadeResult:
        """`documents`: the documents the question names (`rank.scope`), which scope the run;
        `embed`: embeds span texts for the span scorer (the store's embedding cache in front).
        Every read goes through `backend`: a request's, seen through its filters (module docstring)."""
        scope: dict[str, Any] | None
        if documents:
            entity, scope = None, {"document_id": list(documents)}
            named = self._named_terms(backend, index, question, list(documents))
        else:
            entity, scope = self.resolve_entity(backend, index, question, plan)
            named = []
        entity_names = [entity] if entity else []
        names = scope and backend.lookup(index, scope, limit=1, kind=ChunkKind.SPAN)
        if names:
            meta = names[0].chunk.metadata
            listed = meta.get(ENTITY_NAMES_KEY)
            if isinstance(listed, list):
                entity_names = [str(n) for n in listed]
            entity = str(meta.get(ENTITY_KEY) or entity) if meta.get(ENTITY_KEY) or entity else None
        q_groups = self._question_terms(question, plan, [*entity_names, *named])
        state = CascadePaths(
            self,
            backend=backend,
            index=index,
            question=question,
            plan=plan,
            scope=scope,
            q_groups=q_groups,
            query_vector=query_vector,
            embed=embed,
        )
        if scope is None:
            state.also_documents = self.clipped_documents(backend, index, question)
        tried: list[PathRun] = []
        found: list[SpanHit] = []
        used = NO_RESULT
        for path in self.config.order:
            t0 = time.perf_counter()
            hits, note = state.run_path(path)
            tried.append(PathRun(path, len(hits), round((time.perf_counter() - t0) * 1000, 3), note))
            if hits:
                bundled = (
                    path == SECTION_EXACT
                    and plan.query_mode == "MULTI_SECTION"
                    and len({h.chunk.section for h in hits}) > 1
                )
                found, used = hits, (MULTI_SECTION_EVIDENCE if bundled else path)
                break
        else:
            if state.deferred:
                found, used = state.deferred, state.deferred[0].path
        if not found:
            return CascadeResult([], NO_RESULT, entity, tried)
        if used not in _UNFILLED and HYBRID_FACTSPAN in self.config.order and self.config.fill_spans:
            found = self._fill(state, found, tried, interleave=used in state.relevance_picked)
        bound = self._bound(found)
        g, missing = state.grounding(bound, used)
        if g < self.floor(used):
            return CascadeResult([], NO_RESULT, entity, tried, round(g, 4), missing, refused=used)
        hits = bound
        # An overview is one span per key section by design: a section's opening is no lead-in.
        if self.config.continue_intro > 0 and used != ENTITY_OVERVIEW:
            cfg = self.config
            placed = continue_intros(hits, state.spans, cfg.continue_intro, labels=cfg.continue_labels)
            hits = self._bound(placed)
        hits = self._reading_order(hits)
        if self.config.trim_spans_over > 0:
            hits = trim_spans(
                hits, state.stats.concepts(state.q_groups), self.config.trim_spans_over, keep=bound[0].chunk
            )
        return CascadeResult(hits, used, entity, tried, round(g, 4), missing)

    @staticmethod
    def _named_terms(backend: SearchReader, index: str, question: str, documents: list[str]) -> list[str]:
        """The question's words that name the scoped documents (spelling variants too: "licence"
        for "License"): not part of what is asked."""
        from evidence.ingest.sections import NAME_TERMS_KEY, name_words
        from evidence.verbatim.scoring import spelling_variant

        known: set[str] = set()
        found = backend.lookup(
            index, {"document_id": documents}, limit=50 * len(documents), kind=ChunkKind.PASSAGE
        )
        for h in found:
            listed = h.chunk.metadata.get(NAME_TERMS_KEY)
            if isinstance(listed, list):
                known.update(str(x) for x in listed)
        out = []
        for w in content_words(question):
            ws = name_words(w)
            if ws and all(t in known or any(spelling_variant(t, k) for k in known) for t in ws):
                out.append(w)
        return out

    def _question_terms(
        self, question: str, plan: PlanLike, entity_names: Sequence[str]
    ) -> list[tuple[str, ...]]:
        """The question's informative concepts: each content word (no question scaffolding, no
        entity name) as its analysed terms, a lay word grouped with its label words ("kidney" |
        "renal"), and the label words of lay phrases made only of question words ("too many")."""
        drop = {t for n in entity_names for t in terms(n)}
        groups: dict[str, list[str]] = {}
        for w in content_words(question):
            for t in terms(w):
                if t not in drop:
                    groups.setdefault(t, [t])
        for covered, label_words in self.rules.lay_groups(question):
            alts = [t for lw in label_words for t in terms(lw) if t not in drop]
            keys = [t for w in covered for t in terms(w) if t in groups]
            if keys:
                for k in keys:
                    groups[k].extend(a for a in alts if a not in groups[k])
            elif alts:
                groups.setdefault(alts[0], list(dict.fromkeys(alts)))
        return [tuple(dict.fromkeys(g)) for g in groups.values()]

    def floor(self, path: str) -> float:
        """The grounding a path's evidence needs: the safety net's is its own."""
        if path == HYBRID_FACTSPAN:
            return max(self.config.min_grounding, self.config.safety_net_grounding)
        return self.config.min_grounding

    def _fill(
        self, state: CascadePaths, found: list[SpanHit], tried: list[PathRun], *, interleave: bool = False
    ) -> list[SpanHit]:
        """A rule path's evidence with the safety net's best spans after it, up to the bound.

        A rule path (a section, an attribute) returns a few spans of the region it recognised; on
        the QA suite they often miss the answer the span scorer ranks first (the question named a
        section, but its answer sits in another). The rule's spans stay first; the budget they
        leave is filled by `HYBRID_FACTSPAN`'s ranking rather than left empty.

        `interleave` (the rule picked its spans by relevance, `RunState.relevance_picked`, and
        `CascadeConfig.interleave_fill` is on): the safety net's spans alternate with the rule's
        instead, the rule's first span first, even when the rule's spans fill the bound: a
        duration pattern matched by every figure of time, or a drug label's section cue on a
        question about another domain, no longer keeps the span scorer's best out of the first
        characters."""
        head = self._bound(found)
        chars = sum(len(h.chunk.text) for h in head)
        room = len(head) < self.config.max_spans and (
            not self.config.max_chars or chars < self.config.max_chars
        )
        interleave = interleave and self.config.interleave_fill
        if not room and not interleave:
            return found
        t0 = time.perf_counter()
        extra, note = state.run_path(HYBRID_FACTSPAN)
        tried.append(
            PathRun(HYBRID_FACTSPAN, len(extra), round((time.perf_counter() - t0) * 1000, 3), f"fill: {note}")
        )
        seen = {same_text(h.chunk.text) for h in head}
        if interleave:
            return _interleaved(head, list(extra[: self.config.fill_spans]), seen)
        out = list(head)
        # Scores stay in rank order: the safety net's probabilities and a rule's scores are on
        # different scales, so the fill is kept below the rule's lowest.
        low = min((h.score for h in head), default=1.0)
        for h in extra[: self.config.fill_spans]:
            key = same_text(h.chunk.text)
            if key not in seen:
                seen.add(key)
                low = min(low, h.score) * 0.999
                out.append(SpanHit(h.chunk, low, h.path))
        return out

    def _reading_order(self, hits: list[SpanHit]) -> list[SpanHit]:
        """The evidence with split sentences rejoined (`spans.reading_order`), after the grounding
        check (which reads the same spans in any order). Scores stay with the positions, so they
        still fall in the order the hits are returned."""
        if self.config.join_within_chars <= 0 or len(hits) < 2:
            return hits
        order = reading_order([h.chunk for h in hits], self.config.join_within_chars)
        return [replace(hits[j], score=hits[i].score) for i, j in enumerate(order)]

    def _bound(self, hits: Sequence[SpanHit]) -> list[SpanHit]:
        """The first `max_spans` that fit `max_chars` (0: any), as the guardrail counts them."""
        from evidence.rank.guardrail import within_chars

        head = list(hits[: self.config.max_spans])
        n, _ = within_chars([len(h.chunk.text) for h in head], self.config.max_chars)
        return head[:n]


def trim_spans(
    hits: Sequence[SpanHit], concepts: Sequence[tuple[float, frozenset[str]]], max_chars: int, *, keep: Chunk
) -> list[SpanHit]:
    """The evidence with every span but `keep` (the top-ranked one) that is longer than
    `max_chars` placed as its best verbatim part (`spans.best_sub_span`; a span with no such part
    stays whole). The part is a span of its own: `text == document[char_start:char_end]` (a slice
    of the span's text, its offsets moved by as much), id `<span id>@<start>-<end>`."""
    out: list[SpanHit] = []
    for h in hits:
        c = h.chunk
        cut = None if c.chunk_id == keep.chunk_id else best_sub_span(c.text, concepts, max_chars)
        if cut is None:
            out.append(h)
            continue
        a, b = cut
        start, end = c.char_start + a, c.char_start + b
        part = replace(
            c,
            chunk_id=f"{c.chunk_id}@{start}-{end}",
            text=c.text[a:b],
            char_start=start,
            char_end=end,
            content_hash="",
        )
        out.append(replace(h, chunk=part))
    return out


def continue_intros(
    hits: Sequence[SpanHit], scope: Sequence[Chunk], first: int, *, labels: bool = True
) -> list[SpanHit]:
    """The evidence with each of its first `first` spans that `introduces` followed by its
    document-next span (same document and section, the next `sequence`, looked up in `scope`):
    moved up when it is kept, added when it is not (the caller bounds the result again). The
    shipped reading order only moves a kept lead-in's or label's item; an introducer's item that
    was not kept left the first characters to a span that says nothing. Scores stay falling in
    the order returned (an added span scores just under the span it follows)."""
    heads = [h for h in hits[:first] if introduces(h.chunk, labels=labels)]
    if not heads:
        return list(hits)
    nexts = Neighbours(scope)
    out = list(hits)
    for h in heads:
        at = next(k for k, x in enumerate(out) if x.chunk.chunk_id == h.chunk.chunk_id)
        c = h.chunk
        i = nexts.of(c)
        if i is None:
            continue
        n = scope[i]
        key = same_text(n.text)
        kept = next((k for k, x in enumerate(out) if same_text(x.chunk.text) == key), None)
        if kept is not None and kept <= at + 1:
            continue  # already right after it (or ahead of it: left where the ranking put it)
        item = out.pop(kept) if kept is not None else SpanHit(n, h.score, h.path)
        out.insert(at + 1, item)
    scores = falling([h.score for h in out])
    return [h if sc == h.score else replace(h, score=sc) for h, sc in zip(out, scores, strict=True)]


def _interleaved(rule: Sequence[SpanHit], fill: Sequence[SpanHit], seen: set[str]) -> list[SpanHit]:
    """The rule's spans and the fill's alternating, the rule's first span first (`_fill`): a fill
    span whose text is already placed (`seen`: the rule's texts) is skipped and the next one takes
    its turn. Scores stay in rank order: each hit keeps its own score unless that is above the
    previous hit's, then it gets just under it (the two paths' scores are on different scales)."""
    fresh: list[SpanHit] = []
    for h in fill:
        key = same_text(h.chunk.text)
        if key not in seen:
            seen.add(key)
            fresh.append(h)
    order: list[SpanHit] = []
    for k in range(max(len(rule), len(fresh))):
        order.extend(x[k] for x in (rule, fresh) if k < len(x))
    out: list[SpanHit] = []
    for h in order:
        score = h.score if not out or h.score < out[-1].score else out[-1].score * 0.999
        out.append(SpanHit(h.chunk, score, h.path))
    return out


def question_groups(question: str, *, rules: VerbatimRules | None = None) -> list[tuple[str, ...]]:
    """The question's concepts as the cascade reads them (content words, lay words with their
    label words): what the grounding check asks the evidence of any profile to carry."""
    return VerbatimCascade(rules=rules)._question_terms(question, _NO_PLAN, [])


def spans_within(spans: Sequence[Chunk], passages: Sequence[Chunk]) -> list[Chunk]:
    """The spans that lie inside one of `passages` (`spans.inside`: the same document, within its
    offsets), in their order. Each document's spans are compared with its own passages at once
    (a span times every passage through `inside` was ~20 ms a question at 10 hits of one
    document of ~1,000 spans)."""
    keep = _within_mask(spans, passages)
    return [s for s, k in zip(spans, keep, strict=True) if k]


def _within_mask(spans: Sequence[Chunk], passages: Sequence[Chunk]) -> Any:
    """Whether each span lies inside one of `passages` (`spans_within`), as a boolean array."""
    import numpy as np

    bounds: dict[str, tuple[Any, Any]] = {}
    for doc in dict.fromkeys(p.document_id for p in passages):
        own = [p for p in passages if p.document_id == doc]
        bounds[doc] = (
            np.asarray([p.char_start for p in own], dtype=np.int64),
            np.asarray([p.char_end for p in own], dtype=np.int64),
        )
    by_document: dict[str, list[int]] = {}
    for i, s in enumerate(spans):
        if s.document_id in bounds:
            by_document.setdefault(s.document_id, []).append(i)
    keep = np.zeros(len(spans), dtype=np.bool_)
    for doc, idx in by_document.items():
        starts, ends = bounds[doc]
        s0 = np.asarray([spans[i].char_start for i in idx], dtype=np.int64)
        s1 = np.asarray([spans[i].char_end for i in idx], dtype=np.int64)
        keep[idx] = ((starts[None, :] <= s0[:, None]) & (s1[:, None] <= ends[None, :])).any(axis=1)
    return keep


@dataclass(frozen=True)
class HitSpans:
    """The fact spans inside some passages, as the span anchor reads them (`spans_in_hits`)."""

    #: The spans, in document order.
    spans: list[Chunk]
    #: Each span's text as its vector is keyed (`scoring_texts` over its whole document's spans:
    #: a table row with its caption and header), as `verbatim` and the indexer embed it.
    texts: list[str]
    #: Each document's content hash, read with its spans (`OrderedChunks.content_hash`; "" where
    #: the backend does not give it): what the spans' late vectors are keyed by.
    document_hashes: Mapping[str, str] = field(default_factory=dict, compare=False)


def spans_in_hits(
    backend: SearchReader, index: str, passages: Sequence[Chunk], *, max_scan: int = 5000
) -> HitSpans:
    """The spans inside `passages` that may be an answer (no table header row, no span that only
    repeats a heading of its document), with their scoring texts. The passages' documents' spans
    are read as `lookup` gives them (`base.ordered_lookup`: on the embedded store each document's
    spans in document order and their offsets are kept per write generation, so a question reads
    no row), but only the spans inside the hits, and the few before each run of them that their
    scoring text reads, are worked on: the same texts and the same spans as `scoring_texts`,
    `header_rows` and `heading_echoes` over the whole documents give them (tested), at a fraction
    of the cost (those three over every span of a long page took ~20 ms a question)."""
    if not passages:
        return HitSpans([], [])
    import numpy as np

    from evidence.search.base import ordered_lookup

    docs = list(dict.fromkeys(p.document_id for p in passages))
    documents = ordered_lookup(backend, index, {"document_id": docs}, limit=max_scan, kind=ChunkKind.SPAN)
    spans: list[Chunk] = []
    masks = []
    for doc in documents:
        spans.extend(doc.chunks)
        own = [p for p in passages if p.document_id == doc.document_id]
        p0 = np.asarray([p.char_start for p in own], dtype=np.int64)
        p1 = np.asarray([p.char_end for p in own], dtype=np.int64)
        masks.append(((p0[None, :] <= doc.starts[:, None]) & (doc.ends[:, None] <= p1[None, :])).any(axis=1))
    inner = np.concatenate(masks).nonzero()[0].tolist() if masks else []
    if not inner:
        return HitSpans([], [])
    # A heading echo repeats one of its document's headings: each distinct heading keyed once.
    headings = {doc.document_id: {_heading_key(h) for h in doc.sections} for doc in documents}

    def same_section(a: Chunk, b: Chunk) -> bool:
        return a.document_id == b.document_id and a.section == b.section

    texts: dict[int, str] = {}
    k = 0
    while k < len(inner):
        # A run of consecutive spans inside the hits, with what their scoring texts read before
        # it: the table (caption and rows) it starts in, and the span before that (it resets a
        # table's caption and header, and may be the label a continuation is read with).
        a = b = inner[k]
        while k + 1 < len(inner) and inner[k + 1] == b + 1:
            k += 1
            b = inner[k]
        k += 1
        start = a
        while (
            start > 0
            and same_section(spans[start - 1], spans[start])
            and spans[start - 1].span_type in (SpanType.TABLE_ROW, SpanType.CAPTION)
        ):
            start -= 1
        if start > 0 and same_section(spans[start - 1], spans[start]):
            start -= 1
        read = scoring_texts(spans[start : b + 1])
        for i in range(a, b + 1):
            texts[i] = read[i - start]
    keep = []
    for i in inner:
        c = spans[i]
        prev = spans[i - 1] if i else None
        if c.span_type is SpanType.TABLE_ROW and (
            prev is None or prev.span_type is not SpanType.TABLE_ROW or prev.section != c.section
        ):
            continue  # a table's header row (`header_rows`)
        if len(c.text) <= 200 and _heading_key(c.text) in headings.get(c.document_id, ()):
            continue  # a heading echo (`heading_echoes`)
        keep.append(i)
    return HitSpans(
        [spans[i] for i in keep],
        [texts[i] for i in keep],
        {doc.document_id: doc.content_hash for doc in documents},
    )


#: How a cache-only `SpanAnchors` (`vectors=…`) scores the spans inside a hit, cheapest first:
#: `cos` the span's cosine with the question; `cos_head` the `dense` span model's two cosine terms
#: (span and heading, its fitted weights); `cheap` the `dense` model without its three corpus
#: statistics (passage, BM25, coverage: cosines, answer type, row / bullet / length); `dense` the
#: whole `dense` model (its statistics over the spans inside the hits).
ANCHOR_SCORERS = ("cos", "cos_head", "cheap", "dense")
_STATISTICS = ("passage", "bm25", "coverage")


def span_ranking(
    backend: SearchReader,
    index: str,
    question: str,
    documents: Sequence[str],
    *,
    query_vector: Any = None,
    embed: Any = None,
    config: CascadeConfig | None = None,
    within: Sequence[Chunk] = (),
) -> list[tuple[float, Chunk]]:
    """(score, span) of the spans of `documents`, best first, as `HYBRID_FACTSPAN` ranks them (the
    fitted span scorer, `CascadePaths.hybrid_ranking`: lexical model, then its `top_n` re-ranked by
    the dense or tokens model when there is a query vector and `embed`), for a question with no
    plan; header rows and spans with neither a question word nor a scored passage left out. What
    `default`'s focus reads to anchor a hit's run (`SpanAnchors`, off by default). `within`: only
    the spans inside these passages are ranked (and the features' scope is theirs alone)."""
    if not documents:
        return []
    cascade = VerbatimCascade(config)
    state = CascadePaths(
        cascade,
        backend=backend,
        index=index,
        question=question,
        plan=_NO_PLAN,
        scope={"document_id": list(documents)},
        q_groups=cascade._question_terms(question, _NO_PLAN, []),
        query_vector=query_vector,
        embed=embed,
    )
    if within:
        state.keep_spans(spans_within(state.spans, within))
    if not state.spans:
        return []
    ranked, _, _ = state.hybrid_ranking()
    return [(sc, state.spans[i]) for sc, i in ranked]


@dataclass(frozen=True)
class SpanAnchors:
    """For `rank.dedup.FocusHits(anchors=…)`: in each passage hit, the character range of the
    best span inside the passage (same document, within its offsets).

    With `vectors` (what the `default` profile's setting uses): the spans inside the hits are
    scored by `scorer` (`ANCHOR_SCORERS`) from the question's vector and the spans' and their
    headings' vectors read from the store's embedding cache (`vectors`: texts -> a row or None,
    never embedding: indexing put them there). A span whose vector the cache does not hold is no
    candidate, and a heading's missing vector counts cosine 0; a hit with no candidate is focused
    as without the anchor. No question vector: no anchor.

    Without `vectors` (a bench lever, docs/ranking.md#focus-span-anchor): `span_ranking` ranks the
    spans of the hits' documents (`within_hits`: the spans inside the hits only) once a question,
    `embed` embedding span texts for the cosine features and word pieces at query time (the
    index's embedder behind the store's cache); `embed` None: the lexical model."""

    embed: Any = None
    config: CascadeConfig | None = None
    #: Rank only the spans inside the hits (cheaper; the features' scope is theirs), not every
    #: span of their documents.
    within_hits: bool = False
    #: A cache-only vector read (`span_rank.IndexVectors`); None: `embed` as above.
    vectors: Any = None
    #: How the cache-only anchor scores a span (`ANCHOR_SCORERS`).
    scorer: str = "dense"
    #: With `vectors`: the spans' late-chunked vectors (`span_rank.LateVectors`: spans and their
    #: documents' content hashes -> a row or None each) read instead of their own (`vectors` then
    #: reads the headings' only).
    late: Any = None
    #: With `vectors`: the vectors a backend keeps with its passages instead of a cache
    #: (`span_rank.StoredVectors`, OpenSearch): `(backend, index, passages)` -> the late and heading
    #: readers for this question's hits, or None (the embedded store: `late` and `vectors` above).
    stored: Any = None

    def __post_init__(self) -> None:
        if self.scorer not in ANCHOR_SCORERS:
            from evidence.errors import ConfigurationError

            raise ConfigurationError(f"span anchor: scorer must be one of {', '.join(ANCHOR_SCORERS)}")

    def find(self, hits: Sequence[Any], ctx: Any) -> dict[int, tuple[int, int]]:
        return self.find_with_cosines(hits, ctx)[0]

    def find_with_cosines(
        self, hits: Sequence[Any], ctx: Any
    ) -> tuple[dict[int, tuple[int, int]], list[float | None]]:
        """`find`'s anchors, and per hit the question's best cosine with the vectors of the
        candidate spans inside it (the cache-only anchor's `span_cosine`, already computed; None:
        no candidate, or not the cache-only anchor): what `FocusHits(anchor_order=…)` reorders the
        first hits by (docs/ranking.md#focus-anchor-order)."""
        passages = [(i, h.chunk) for i, h in enumerate(hits) if h.chunk.kind is ChunkKind.PASSAGE]
        if self.vectors is not None:
            return self._cached(passages, ctx, len(hits))
        return self._ranked(passages, ctx), [None] * len(hits)

    def _ranked(self, passages: Sequence[tuple[int, Chunk]], ctx: Any) -> dict[int, tuple[int, int]]:
        docs = list(dict.fromkeys(c.document_id for _, c in passages))
        ranked = span_ranking(
            ctx.backend,
            ctx.index,
            ctx.query,
            docs,
            query_vector=ctx.query_vector,
            embed=self.embed,
            config=self.config,
            within=[c for _, c in passages] if self.within_hits else (),
        )
        return _best_inside(passages, [s for _, s in ranked])

    def _cached(
        self, passages: Sequence[tuple[int, Chunk]], ctx: Any, n_hits: int
    ) -> tuple[dict[int, tuple[int, int]], list[float | None]]:
        import numpy as np

        from evidence.rank.similarity import cosine_rows
        from evidence.verbatim.span_rank import LinearModel, lexical_columns, load_model

        none: list[float | None] = [None] * n_hits
        if ctx.query_vector is None or not passages:
            return {}, none
        config = self.config or CascadeConfig()
        found = spans_in_hits(ctx.backend, ctx.index, [c for _, c in passages], max_scan=config.max_scan)
        headings = list(dict.fromkeys(c.section for c in found.spans if c.section))
        late, vectors = self.late, self.vectors
        if late is not None and self.stored is not None and found.spans:
            readers = self.stored(ctx.backend, ctx.index, [c for _, c in passages])
            if readers is not None:
                late, vectors = readers
        if late is not None:
            read = [*late(found.spans, found.document_hashes), *(vectors(headings) if headings else [])]
        else:
            read = list(vectors([*found.texts, *headings]))
        n = len(found.spans)
        have = [k for k in range(n) if read[k] is not None]
        if not have:
            return {}, none
        spans = [found.spans[k] for k in have]
        q = ctx.query_vector
        cols: dict[str, Any] = {"span_cosine": cosine_rows(np.stack([read[k] for k in have]), q)}
        heads = {h: v for h, v in zip(headings, read[n:], strict=True) if v is not None}
        by_heading = (
            dict(zip(heads, cosine_rows(np.stack(list(heads.values())), q).tolist(), strict=True))
            if heads
            else {}
        )
        cols["heading_cosine"] = np.asarray([by_heading.get(c.section, 0.0) for c in spans], dtype=np.float64)
        model = (config.span_model or load_model()).dense
        if self.scorer == "cos":
            scorer = LinearModel({"span_cosine": 1.0})
        elif self.scorer == "cos_head":
            scorer = LinearModel({f: model.weights.get(f, 0.0) for f in ("span_cosine", "heading_cosine")})
        elif self.scorer == "cheap":
            scorer = LinearModel({f: w for f, w in model.weights.items() if f not in _STATISTICS}, model.bias)
            zero = [0.0] * len(spans)
            cols.update(lexical_columns(spans, question=ctx.query, passage=zero, bm25=zero, coverage=zero))
        else:
            scorer = model
            cols.update(self._statistics(spans, ctx, config))
        score = scorer.score(cols).tolist()  # Python floats: the same order, compared faster
        order = sorted(range(len(spans)), key=lambda j: (-score[j], j))
        return _best_inside(passages, [spans[j] for j in order]), _best_cosines(
            passages, spans, cols["span_cosine"].tolist(), n_hits
        )

    @staticmethod
    def _statistics(spans: Sequence[Chunk], ctx: Any, config: CascadeConfig) -> dict[str, Any]:
        """The `dense` model's lexical features of `spans` (their scope: these spans alone)."""
        cascade = VerbatimCascade(config)
        state = CascadePaths.over_spans(
            cascade,
            spans,
            backend=ctx.backend,
            index=ctx.index,
            question=ctx.query,
            plan=_NO_PLAN,
            q_groups=cascade._question_terms(ctx.query, _NO_PLAN, []),
            query_vector=ctx.query_vector,
            headers=set(),  # the candidates it would drop are not read here
        )
        lexical, _, _ = state.hybrid_features()
        return lexical


def _best_cosines(
    passages: Sequence[tuple[int, Chunk]], spans: Sequence[Chunk], cosines: Sequence[float], n_hits: int
) -> list[float | None]:
    """Per hit position: the best of `cosines` over the `spans` inside that passage hit (same
    document, within its offsets, as `_best_inside` reads it); None for a hit holding none."""
    out: list[float | None] = [None] * n_hits
    by_doc = _by_document(passages)
    for s, cos in zip(spans, cosines, strict=True):
        for i, p0, p1 in by_doc.get(s.document_id, ()):
            if p0 <= s.char_start and s.char_end <= p1:
                best = out[i]
                out[i] = cos if best is None or cos > best else best
    return out


def _by_document(passages: Sequence[tuple[int, Chunk]]) -> dict[str, list[tuple[int, int, int]]]:
    """The passage hits by document: (hit position, char_start, char_end) each, in the hits'
    order. A span is inside a hit only within the same document, so it is compared with its own
    document's hits alone (in their order: the results are those of comparing with all)."""
    by_doc: dict[str, list[tuple[int, int, int]]] = {}
    for i, c in passages:
        by_doc.setdefault(c.document_id, []).append((i, c.char_start, c.char_end))
    return by_doc


def _best_inside(
    passages: Sequence[tuple[int, Chunk]], ranked: Sequence[Chunk]
) -> dict[int, tuple[int, int]]:
    """Hit position -> the character range of the first of `ranked` (best first) inside it."""
    out: dict[int, tuple[int, int]] = {}
    by_doc = _by_document(passages)
    for s in ranked:
        a, b = s.char_start, s.char_end
        for i, p0, p1 in by_doc.get(s.document_id, ()):
            if p0 <= a and b <= p1 and i not in out:
                out[i] = (a, b)
        if len(out) == len(passages):
            break
    return out


@dataclass(frozen=True)
class _NoPlan:
    entity: str | None = None
    query_mode: str = "GLOBAL"
    attribute: str | None = None
    candidate_sections: tuple[str, ...] = ()
    search_phrases: tuple[str, ...] = ()
    extraction_level: str = "sentence"


_NO_PLAN = _NoPlan()
