"""One cascade run's state: the scope's spans, read once on first need, and the scoring every path
shares (relevance, coverage, meaning, table context, grounding).

Every read goes through `backend`, on a request the index seen through the request's filters
(`search.scoped`): the run's own filters (`scope`) only narrow within them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from evidence.errors import EvidenceError
from evidence.ingest.sections import SECTION_PARENT_KEY
from evidence.records import Chunk, ChunkKind, SpanType
from evidence.verbatim.cascade_model import ATTRIBUTE_LOOKUP, CascadeLike, PlanLike, SpanHit
from evidence.verbatim.grounding import (
    DENSE_EMBEDDERS,
    TermCounts,
    evidence_agreement,
    index_df,
    judge,
    passage_agreement,
)
from evidence.verbatim.scoring import SpanStats, terms
from evidence.verbatim.spans import (
    _DIGIT,
    _QUANTITY,
    _WHY,
    QUANTITY_BOOST,
    document_order,
    header_rows,
    heading_echoes,
    scoring_texts,
    span_path,
)

#: The canonical section of a bibliography (`ingest.sections`).
REFERENCES = "references"

if TYPE_CHECKING:
    from evidence.embed.pieces import EmbedTokens
    from evidence.search.base import SearchReader


class RunState:
    """One cascade run: the entity's spans are read once, on first need, and shared by the paths."""

    def __init__(
        self,
        cascade: CascadeLike,
        *,
        backend: SearchReader,
        index: str,
        question: str,
        plan: PlanLike,
        scope: Mapping[str, Any] | None,
        q_groups: list[tuple[str, ...]],
        query_vector: Any,
        embed: Any = None,
    ) -> None:
        self.c = cascade
        self.cfg = cascade.config
        self.backend = backend
        self.index = index
        self.question = question
        self.plan = plan
        #: The run's own filters (the entity's names, the named documents), within the backend's;
        #: None: everything the backend sees.
        self.scope = scope
        self.q_groups = q_groups
        self.q_terms = list(dict.fromkeys(t for g in q_groups for t in g))
        self.quantity = bool(_QUANTITY.search(question))
        self.vector = query_vector
        #: Embeds span texts for the span scorer (`verbatim.span_rank`), or None.
        self.embed = embed
        self._spans: list[Chunk] | None = None
        self._stats: SpanStats | None = None
        #: A section named by the question whose sentences did not match the rest of it.
        self.deferred: list[SpanHit] | None = None
        #: The rule paths that picked their spans by relevance inside a region they recognised
        #: (an attribute's pattern, a section's sentences holding the rest of the question): their
        #: fill is interleaved with them (`CascadeConfig.interleave_fill`).
        self.relevance_picked: set[str] = set()
        self._headers: set[int] | None = None
        self._raw_stats: SpanStats | None = None
        self._headed: SpanStats | None = None
        self._df: dict[str, int] = {}
        #: The terms of `_df` the index holds in another form (`TermCounts.variants`).
        self._variants: set[str] = set()

    @classmethod
    def over_spans(
        cls,
        cascade: CascadeLike,
        spans: Sequence[Chunk],
        *,
        backend: SearchReader,
        index: str,
        question: str,
        plan: PlanLike,
        q_groups: list[tuple[str, ...]],
        query_vector: Any,
        headers: set[int] | None = None,
    ) -> Self:
        """A run over `spans` as given (already read: nothing is looked up for them), scoped to
        their documents. `headers`: the spans set aside as never an answer alone (None: read from
        the spans as `headers` does; an empty set when the caller reads no candidates)."""
        state = cls(
            cascade,
            backend=backend,
            index=index,
            question=question,
            plan=plan,
            scope={"document_id": sorted({c.document_id for c in spans})},
            q_groups=q_groups,
            query_vector=query_vector,
        )
        state._spans = list(spans)
        state._headers = headers
        return state

    def keep_spans(self, spans: Sequence[Chunk]) -> None:
        """Read only `spans` (a part of `spans`, say) from here on; before anything is scored."""
        if any(x is not None for x in (self._stats, self._raw_stats, self._headed, self._headers)):
            raise RuntimeError("keep_spans: the run's spans were scored already")
        self._spans = list(spans)

    @property
    def spans(self) -> list[Chunk]:
        if self._spans is None:
            scope = self.scope if self.scope is not None else self._best_documents()
            if scope is None:
                self._spans = []
            else:
                hits = self.backend.lookup(self.index, scope, limit=self.cfg.max_scan, kind=ChunkKind.SPAN)
                self._spans = document_order([h.chunk for h in hits])
        return self._spans

    def _best_documents(self) -> dict[str, Any] | None:
        """No entity: the documents of the best passages (the hybrid first stage) are the scope
        the scan paths read, so an index of many subjects is still scanned, within bounds."""
        from evidence.rank.first_stage import FirstStage, RetrievalMode

        mode = RetrievalMode.HYBRID if self.vector is not None else RetrievalMode.LEXICAL
        found = FirstStage(mode=mode).retrieve(
            self.backend,
            self.index,
            query=self.question,
            vector=self.vector,
            k=self.cfg.unscoped_passages,
            filters=self.scope,
        )
        docs = list(dict.fromkeys(c.chunk.document_id for c in found.candidates))[
            : self.cfg.unscoped_documents
        ]
        return {"document_id": docs} if docs else None

    @property
    def stats(self) -> SpanStats:
        if self._stats is None:
            self._stats = SpanStats(scoring_texts(self.spans))
        return self._stats

    # --- shared scoring ------------------------------------------------------------------------

    def _query_terms_with_phrases(self) -> list[str]:
        extra = [t for p in self.plan.search_phrases for t in terms(p)]
        return list(dict.fromkeys([*self.q_terms, *extra]))

    def _relevance(self, i: int) -> float:
        """BM25 over the entity's spans; the planner's expansions count half as much as the
        question's own words (they widen recall; the question says what is asked)."""
        q = self._query_terms_with_phrases()
        own = set(self.q_terms) | self._reason_terms
        weights = {t: (1.0 if t in own else 0.5) for t in q}
        # A table row is scored with its caption and header, but what it states is its own text:
        # words found only in the context count half.
        with_context = self.stats.bm25(i, q, weights=weights)
        score = 0.5 * with_context + 0.5 * self.raw_stats.bm25(i, q, weights=weights)
        return score * self._figure_boost(self.spans[i])

    @property
    def _reason_terms(self) -> set[str]:
        """A "why" question asks for the reason: the words labels give reasons with weigh as much
        as the question's own."""
        if not hasattr(self, "_reasons"):
            why = self.plan.query_mode == "MULTI_SECTION" and bool(_WHY.search(self.question))
            self._reasons = {t for w in self.c.rules.why_terms for t in terms(w)} if why else set()
        return self._reasons

    def _figure_boost(self, chunk: Chunk) -> float:
        return QUANTITY_BOOST if self.quantity and _DIGIT.search(chunk.text) else 1.0

    @property
    def headed_stats(self) -> SpanStats:
        """`stats` with each span read with its section heading (the hybrid span ranking's)."""
        if self._headed is None:
            self._headed = self.stats.with_headings([c.section for c in self.spans])
        return self._headed

    @property
    def raw_stats(self) -> SpanStats:
        if self._raw_stats is None:
            self._raw_stats = SpanStats([c.text for c in self.spans])
        return self._raw_stats

    @property
    def headers(self) -> set[int]:
        """Spans that are never an answer on their own: table header rows (context for the rows
        under them), the spans that only repeat a heading (a table of contents' entries) and,
        unless the question asks for that section, a bibliography's entries (a guideline's
        hundreds of citations share every topic word with the question and state no answer)."""
        if self._headers is None:
            self._headers = header_rows(self.spans) | heading_echoes(self.spans)
            if REFERENCES not in self.plan.candidate_sections:
                self._headers |= {i for i, c in enumerate(self.spans) if REFERENCES in span_path(c)}
        return self._headers

    def _with_tables(self, hits: list[SpanHit], limit: int = 8) -> list[SpanHit]:
        """A caption found means its table was found: the rows under it follow the caption."""
        if not self.spans or not any(h.chunk.span_type is SpanType.CAPTION for h in hits):
            return hits
        seen = {h.chunk.chunk_id for h in hits}
        out: list[SpanHit] = []
        for h in hits:
            out.append(h)
            i = self._index_of(h.chunk) if h.chunk.span_type is SpanType.CAPTION else None
            if i is None:
                continue
            j, added = i + 1, 0
            while j < len(self.spans) and added < limit:
                row = self.spans[j]
                if row.span_type is not SpanType.TABLE_ROW or row.section != h.chunk.section:
                    break
                if row.chunk_id not in seen and j not in self.headers:
                    out.append(SpanHit(row, h.score, h.path))
                    seen.add(row.chunk_id)
                    added += 1
                j += 1
        return out

    def _coverage_of(self, chunk: Chunk, fallback: SpanStats, n: int) -> float:
        if self.spans:
            i = self._index_of(chunk)
            if i is not None:
                return self.stats.coverage(i, self.q_groups)
        return fallback.coverage(n, self.q_groups)

    def _index_of(self, chunk: Chunk) -> int | None:
        if not hasattr(self, "_ids"):
            self._ids = {c.chunk_id: i for i, c in enumerate(self.spans)}
        return self._ids.get(chunk.chunk_id)

    def _passage_cosines(self) -> list[tuple[str, int, int, float]]:
        """(document, start, end, cosine) of the scope's best passages by the query vector."""
        if not hasattr(self, "_pcos"):
            self._pcos: list[tuple[str, int, int, float]] = []
            if self.vector is not None:
                found = self.backend.dense(
                    self.index,
                    self.vector,
                    k=self.cfg.vector_pool,
                    filters=self.scope,
                    kind=ChunkKind.PASSAGE,
                )
                self._pcos = [
                    (h.chunk.document_id, h.chunk.char_start, h.chunk.char_end, float(h.dense or h.score))
                    for h in found
                ]
        return self._pcos

    def _by_meaning(
        self, scored: list[tuple[float, int]], chunks: Sequence[Chunk] | None = None
    ) -> list[tuple[float, int]]:
        """Lexical scores blended with meaning: `(1 - w) * score / max + w * cosine of the span's
        passage`, min-max over the scope's best passages (a span outside them counts 0). Wording
        decides which spans qualify; meaning helps order them (a paraphrase shares few words)."""
        w = self.cfg.meaning_weight
        pcos = self._passage_cosines() if w else []
        if not scored or not pcos:
            return scored
        lo, hi = min(c for *_, c in pcos), max(c for *_, c in pcos)
        top = max(sc for sc, _ in scored) or 1.0
        out = []
        for sc, i in scored:
            c = chunks[i] if chunks is not None else self.spans[i]
            cos = max(
                (x for d, a, b, x in pcos if d == c.document_id and a <= c.char_start and c.char_end <= b),
                default=None,
            )
            norm = (cos - lo) / (hi - lo) if cos is not None and hi > lo else 0.0
            out.append(((1 - w) * sc / top + w * norm, i))
        return out

    def _passage_spans(self, passage: Chunk) -> list[Chunk]:
        hits = self.backend.lookup(
            self.index, {"document_id": passage.document_id}, limit=self.cfg.max_scan, kind=ChunkKind.SPAN
        )
        return document_order([h.chunk for h in hits])

    def grounding(self, hits: Sequence[SpanHit], path: str = "") -> tuple[float, list[str]]:
        """The shared refusal signal's answer probability (`verbatim.grounding.judge`) and the concepts
        the evidence lacks: each span read with its section's heading (a section asked for by name
        is carried by its heading) and, for a table row, its caption and header."""
        ctx = dict(zip((c.chunk_id for c in self.spans), self.stats.texts, strict=True)) if self.spans else {}
        aliases: dict[str, list[str]] = {}
        for alias, name in self.c.rules.vocabulary.alias_table().items():
            aliases.setdefault(name, []).append(alias)
        texts, bodies = [], []
        for h in hits:
            c = h.chunk
            # The section a span sits in carries the question's section words: its heading, its
            # parent's, and the names its canonical sections go by ("precautions" for warnings).
            where = [c.section, str(c.metadata.get(SECTION_PARENT_KEY, ""))]
            where += [a for name in span_path(c) for a in aliases.get(name, ())]
            texts.append(" ".join([*where, ctx.get(c.chunk_id, c.text)]))
            bodies.append(ctx.get(c.chunk_id, c.text))
        groups = list(self.q_groups)
        given: list[str] = []
        attr = self.c.rules.attribute(self.plan.attribute) if self.plan.attribute else None
        if path == ATTRIBUTE_LOOKUP and attr is not None:
            # The attribute is a concept the spans carry by construction (its pattern matched);
            # the question's words that asked for it are that concept, not others.
            asked = {
                t
                for trig in attr.triggers
                if (m := re.search(trig, self.question, re.IGNORECASE))
                for t in terms(m.group())
            }
            groups = [g for g in groups if not asked & set(g)]
            concept = terms(attr.name.replace("_", " ")) or (attr.name,)
            groups.append(concept)
            given.append(" ".join(concept))
        cosine = self.evidence_cosine(hits)
        agreed = evidence_agreement(
            cosine,
            (h.chunk.document_id for h in hits),
            lambda docs: passage_agreement(self.backend, self.index, self.question, self.vector, docs),
        )
        verdict = judge(
            self.question,
            texts,
            cosine=cosine,
            groups=groups,
            given=given,
            bodies=bodies,
            agreement=agreed,
            df=self.index_df([t for g in groups for t in g]),
            tokens=self.refusal_tokens(),
        )
        return verdict.probability, list(verdict.missing)

    def refusal_tokens(self) -> EmbedTokens | None:
        """The word-piece embedder the refusal signal reads paraphrases in context with
        (`CascadeConfig.context_paraphrase`, a dense index's run), else None (the static table)."""
        if not self.cfg.context_paraphrase or self.vector is None:
            return None
        from evidence.verbatim.span_rank import tokens_of

        return tokens_of(self.embed)

    def index_df(self, words: Sequence[str]) -> TermCounts | None:
        """The refusal signal's passage counts of `words` in the index as the backend sees it
        (`index_df`, with its `variants`), each term counted once per question (the cascade
        judges several paths' evidence)."""
        todo = [w for w in dict.fromkeys(words) if w not in self._df]
        if todo:
            read = index_df(self.backend, self.index, todo, self.question)
            if read is None:
                return None
            self._df.update(read)
            self._variants.update(read.variants)
        return TermCounts({w: self._df[w] for w in words}, self._variants.intersection(words))

    def evidence_cosine(self, hits: Sequence[SpanHit]) -> float | None:
        """The question's best cosine with the passages the evidence spans sit in (spans have no
        vectors of their own); None without a query vector or an embedder the refusal model was
        fitted on."""
        if self.vector is None:
            return None
        try:
            if self.backend.get_index(self.index).embedder_id not in DENSE_EMBEDDERS:
                return None
            docs = sorted({h.chunk.document_id for h in hits})
            found = self.backend.dense(
                self.index,
                self.vector,
                k=self.cfg.vector_pool,
                filters={"document_id": docs},
                kind=ChunkKind.PASSAGE,
            )
        except EvidenceError:
            return None
        cos = [
            float(p.dense if p.dense is not None else p.score)
            for p in found
            if any(
                h.chunk.document_id == p.chunk.document_id
                and h.chunk.char_start < p.chunk.char_end
                and h.chunk.char_end > p.chunk.char_start
                for h in hits
            )
        ]
        if cos:
            return max(cos)
        # The evidence's passages rank below the pool: their cosine is at most the pool's lowest.
        return min((float(p.dense if p.dense is not None else p.score) for p in found), default=None)
