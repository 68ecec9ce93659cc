"""The cascade's paths, one method each, over a run's state (`run_state.RunState`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from evidence.ingest.sections import normalise_heading
from evidence.records import ChunkKind
from evidence.verbatim.cascade_model import (
    ATTRIBUTE_LOOKUP,
    BM25_FACTSPAN,
    ENTITY_OVERVIEW,
    GLOBAL_FACTSPAN_SCAN,
    HYBRID_FACTSPAN,
    SECTION_EXACT,
    SECTION_FUZZY,
    VECTOR_SCOPED,
    SpanHit,
)
from evidence.verbatim.hybrid import passage_scores, same_text
from evidence.verbatim.run_state import RunState
from evidence.verbatim.scoring import SpanStats, terms
from evidence.verbatim.span_rank import lexical_columns, load_model, rank_spans, tokens_of
from evidence.verbatim.spans import scoring_texts, span_path, trigram_similarity


class CascadePaths(RunState):
    """A run's state with its paths: `run_path` runs one by name."""

    def run_path(self, path: str) -> tuple[list[SpanHit], str]:
        fn = {
            SECTION_EXACT: self.section_exact,
            SECTION_FUZZY: self.section_fuzzy,
            ATTRIBUTE_LOOKUP: self.attribute_lookup,
            BM25_FACTSPAN: self.bm25_factspan,
            GLOBAL_FACTSPAN_SCAN: self.global_scan,
            VECTOR_SCOPED: self.vector_scoped,
            ENTITY_OVERVIEW: self.entity_overview,
            HYBRID_FACTSPAN: self.hybrid_factspan,
        }[path]
        return fn()

    # --- paths ---------------------------------------------------------------------------------

    def section_exact(self) -> tuple[list[SpanHit], str]:
        mode = self.plan.query_mode
        if (
            mode not in ("SECTION", "MULTI_SECTION", "GENERIC")
            or not self.plan.candidate_sections
            or not self.spans
        ):
            return [], "not applicable"
        wanted = [s for s in self.plan.candidate_sections if s]
        if mode == "SECTION":
            for name in wanted:
                chosen = [i for i, c in enumerate(self.spans) if name in span_path(c)]
                if chosen:
                    return self._section_block(chosen, name, SECTION_EXACT), name
            return [], "no span in " + ",".join(wanted)
        return self._multi(wanted)

    def _section_term(self, term: str) -> bool:
        if not hasattr(self, "_sec_terms"):
            words = {w for alias in self.c.rules.vocabulary.alias_table() for w in alias.split()}
            self._sec_terms = {t for w in words for t in terms(w)}
        return term in self._sec_terms

    def _section_block(self, idx: Sequence[int], canonical: str, path: str) -> list[SpanHit]:
        """The spans of a section in document order, the heading that best matches the question first."""
        by_heading: dict[str, list[int]] = {}
        for i in idx:
            by_heading.setdefault(self.spans[i].section, []).append(i)
        qnorm = " ".join(w for w in normalise_heading(self.question).split() if len(w) > 2)
        vocab = self.c.rules.vocabulary

        def rank(heading: str) -> tuple[float, int]:
            own = 0.5 if vocab.canonical(heading) == canonical else 0.0
            sim = trigram_similarity(normalise_heading(heading), qnorm)
            return (-(own + sim), by_heading[heading][0])

        headings = sorted(by_heading, key=rank)
        ordered = [i for h in headings for i in by_heading[h]]
        if self.plan.extraction_level == "sentence" and self.q_terms:
            # The question says more than the section's name: its sentences that match the rest of
            # it, and only those that hold enough of it (else a later path looks wider).
            rest = [g for g in self.q_groups if not all(self._section_term(t) for t in g)]
            pos = {i: n for n, i in enumerate(ordered)}
            scored = [
                (self._relevance(i), i)
                for i in ordered
                if i not in self.headers
                and (not rest or self.stats.coverage(i, rest) >= self.cfg.section_min_coverage)
            ]
            scored = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], pos[x[1]]))
            if not scored and self.deferred is None:
                # Nothing in the section holds the rest of the question: let the wider paths look,
                # and come back to the section itself only if they find nothing either.
                self.deferred = [SpanHit(self.spans[i], 1.0 / (n + 1), path) for n, i in enumerate(ordered)]
            if scored:
                self.relevance_picked.add(path)
            return [SpanHit(self.spans[i], s, path) for s, i in scored]
        return [SpanHit(self.spans[i], 1.0 / (n + 1), path) for n, i in enumerate(ordered)]

    def _multi(self, wanted: Sequence[str]) -> tuple[list[SpanHit], str]:
        """A few sections, each with its spans most relevant to the question (GENERIC: its first)."""
        generic = self.plan.query_mode == "GENERIC"
        groups: list[tuple[float, list[tuple[float, int]]]] = []
        for name in wanted:
            idx = [i for i, c in enumerate(self.spans) if name in span_path(c)]
            if not idx:
                continue
            if generic:
                scored = [(1.0 / (n + 1), i) for n, i in enumerate(idx[: self.cfg.multi_spans_per_section])]
            else:
                per = self.cfg.multi_spans_per_section
                if len(wanted) == 1:
                    per += 1  # one section: its share of the bundle is the whole bundle
                ranked = ((self._relevance(i), i) for i in idx if i not in self.headers)
                scored = sorted(
                    ranked,
                    key=lambda x: (-x[0], x[1]),
                )
                scored = [x for x in scored if x[0] > 0][:per]
            if scored:
                groups.append((max(s for s, _ in scored), scored))
            if len(groups) >= self.cfg.multi_sections:
                break
        if not groups:
            return [], "no relevant span in " + ",".join(wanted)
        if not generic:
            groups.sort(key=lambda g: -g[0])
        hits = [SpanHit(self.spans[i], s, SECTION_EXACT) for _, g in groups for s, i in g]
        return hits, f"{len(groups)} sections"

    def section_fuzzy(self) -> tuple[list[SpanHit], str]:
        if self.plan.query_mode not in ("SECTION", "MULTI_SECTION") or not self.spans:
            return [], "not applicable"
        known = set(self.plan.candidate_sections)
        if known and any(known & set(span_path(c)) for c in self.spans):
            return [], "the section exists by name"  # SECTION_EXACT already looked there
        targets = [s.replace("_", " ") for s in self.plan.candidate_sections] or [
            " ".join(w for w in normalise_heading(self.question).split() if len(w) > 2)
        ]
        best: tuple[float, str] | None = None
        for heading in {c.section for c in self.spans if c.section}:
            h = normalise_heading(heading)
            sim = max(trigram_similarity(h, t) for t in targets)
            if best is None or sim > best[0]:
                best = (sim, heading)
        if best is None or best[0] < self.cfg.fuzzy_threshold:
            return [], f"best heading similarity {best[0] if best else 0:.2f}"
        idx = [i for i, c in enumerate(self.spans) if c.section == best[1]]
        return [SpanHit(self.spans[i], best[0], SECTION_FUZZY) for i in idx], best[1]

    def attribute_lookup(self) -> tuple[list[SpanHit], str]:
        name = self.plan.attribute
        if not name or not self.spans:
            return [], "not applicable"
        pattern = self.c.rules.evidence_pattern(name)
        attr = self.c.rules.attribute(name)
        if pattern is None or attr is None:
            return [], f"unknown attribute {name}"
        home = set(attr.sections) | set(self.plan.candidate_sections)
        texts = self.stats.texts
        scored = []
        for i, c in enumerate(self.spans):
            if i in self.headers or not pattern.search(texts[i]):
                continue
            # The attribute's own sections first (a half-life quoted in an interaction table is not
            # the drug's half-life), then how well the span matches the question.
            in_home = bool(home & set(span_path(c)))
            scored.append((in_home, self._relevance(i), i))
        if self.cfg.attribute_needs_home and scored and not any(h for h, _, _ in scored):
            # No span stating it sits where the attribute lives: the document has no region that
            # holds it (a drug label's duration pattern in a licence), and the pattern alone is only
            # a filter over everything. The next path (the span scorer) reads the whole question.
            return [], f"{len(scored)} spans state {name}, none in its sections"
        scored.sort(key=lambda x: (not x[0], -x[1], x[2]))
        hits = [
            SpanHit(self.spans[i], rel, ATTRIBUTE_LOOKUP) for _, rel, i in scored[: self.cfg.attribute_spans]
        ]
        if hits:
            self.relevance_picked.add(ATTRIBUTE_LOOKUP)
        return hits, f"{len(scored)} spans state {name}"

    def bm25_factspan(self) -> tuple[list[SpanHit], str]:
        phrases = [p for p in self.plan.search_phrases if p.strip()]
        text = " ".join([self.question, *phrases])
        found = self.backend.lexical(
            self.index, text, k=self.cfg.bm25_k, filters=self.scope, kind=ChunkKind.SPAN
        )
        if not found or not self.q_terms:
            return [], "no lexical hit"
        stats = SpanStats([h.chunk.text for h in found])
        # Coverage against the hits' own statistics underrates rare words; use the entity's when known.
        keep = []
        for n, h in enumerate(found):
            i = self._index_of(h.chunk) if self.spans else None
            if i is not None and i in self.headers:
                continue
            cov = self._coverage_of(h.chunk, stats, n)
            if cov >= self.cfg.bm25_min_coverage:
                keep.append(SpanHit(h.chunk, float(h.score) * self._figure_boost(h.chunk), BM25_FACTSPAN))
        if self.cfg.meaning_weight and self.vector is not None:
            ranked = self._by_meaning(
                [(h.score, n) for n, h in enumerate(keep)], chunks=[h.chunk for h in keep]
            )
            keep = [replace(keep[n], score=sc) for sc, n in ranked]
        keep.sort(key=lambda h: -h.score)
        return self._with_tables(keep[: self.cfg.max_spans]), f"{len(found)} hits, {len(keep)} above coverage"

    def global_scan(self) -> tuple[list[SpanHit], str]:
        if not self.spans or not self.q_terms:
            return [], "not applicable"
        q = self._query_terms_with_phrases()
        scored = []
        for i in range(len(self.spans)):
            if i in self.headers:
                continue
            cov = self.stats.coverage(i, self.q_groups)
            if cov >= self.cfg.global_min_coverage:
                scored.append(((cov + 0.1 * self.stats.bm25(i, q)) * self._figure_boost(self.spans[i]), i))
        scored = self._by_meaning(scored)
        scored.sort(key=lambda x: (-x[0], x[1]))
        hits = self._with_tables(
            [SpanHit(self.spans[i], s, GLOBAL_FACTSPAN_SCAN) for s, i in scored[: self.cfg.scan_spans]]
        )
        return hits, f"{len(self.spans)} spans scanned, {len(scored)} relevant"

    def vector_scoped(self) -> tuple[list[SpanHit], str]:
        if self.vector is None:
            return [], "no query vector"
        found = self.backend.dense(
            self.index, self.vector, k=self.cfg.vector_pool, filters=self.scope, kind=ChunkKind.PASSAGE
        )
        if not found:
            return [], "no passage"
        # Every passage of a label mentions its drug, and so does the question: absolute cosines
        # run high for all of them. What marks the answer is standing out from the entity's own
        # passages, so the top passage must clear both a floor and a margin over their mean.
        cos = [float(h.dense if h.dense is not None else h.score) for h in found]
        mean = sum(cos) / len(cos)
        top = found[0]
        if cos[0] < self.cfg.vector_min_cosine or (
            len(cos) > 2 and cos[0] - mean < self.cfg.vector_min_margin
        ):
            return [], f"best cosine {cos[0]:.2f}, margin {cos[0] - mean:.2f}"
        p = top.chunk
        inside = [
            c for c in (self.spans or self._passage_spans(p))
            if c.document_id == p.document_id and c.char_start >= p.char_start and c.char_end <= p.char_end
        ]  # fmt: skip
        if not inside:
            return [], "passage without spans"
        stats = SpanStats(scoring_texts(inside))
        q = self._query_terms_with_phrases()
        # Minimum relevance: a span must share a word with the question or its expansions.
        ranked = sorted(
            (i for i in range(len(inside)) if stats.bm25(i, q) > 0), key=lambda i: (-stats.bm25(i, q), i)
        )
        if not ranked:
            return [], f"cosine {cos[0]:.2f} but no span shares a word with the question"
        hits = [
            SpanHit(inside[i], float(top.score), VECTOR_SCOPED) for i in ranked[: self.cfg.attribute_spans]
        ]
        return hits, f"cosine {float(top.score):.2f}"

    def entity_overview(self) -> tuple[list[SpanHit], str]:
        """The seed's drug-only path: nothing asked but the subject ("Lipravex", "the MPL") → the
        first span of each key section, else (a document without them) of its first sections."""
        if (
            self.q_terms
            or self.plan.attribute
            or self.plan.query_mode not in ("GLOBAL", "GENERIC")
            or self.scope is None
            or not self.spans
        ):
            return [], "not applicable"
        picked: list[int] = []
        for name in self.cfg.overview_sections:
            i = next(
                (i for i, c in enumerate(self.spans) if name in span_path(c) and i not in self.headers), None
            )
            if i is not None:
                picked.append(i)
        if not picked:
            seen: set[tuple[str, str]] = set()
            for i, c in enumerate(self.spans):
                key = (c.document_id, c.section)
                if key in seen or i in self.headers:
                    continue
                seen.add(key)
                picked.append(i)
                if len(picked) >= self.cfg.overview_spans:
                    break
        picked = picked[: self.cfg.overview_spans]
        hits = [SpanHit(self.spans[i], 1.0 / (n + 1), ENTITY_OVERVIEW) for n, i in enumerate(picked)]
        return hits, f"{len(hits)} sections"

    def hybrid_factspan(self) -> tuple[list[SpanHit], str]:
        """The safety net, and the general path when no rule path fired: every span of the scope
        ranked by the fitted span scorer (`verbatim.span_rank`: passage cosine, heading-aware
        BM25, coverage, answer type x span kind, length; then the best `top_n` re-ranked with the
        span's and its heading's own cosine with the question). The same text twice is returned
        once."""
        spans = self.spans
        if not spans:
            return [], "no span in scope"
        ranked, _, note = self.hybrid_ranking()
        hits: list[SpanHit] = []
        seen: set[str] = set()
        for sc, i in ranked:
            if len(hits) >= self.cfg.hybrid_spans:
                break
            key = same_text(spans[i].text)
            if key not in seen:
                seen.add(key)
                hits.append(SpanHit(spans[i], sc, HYBRID_FACTSPAN))
        return hits, note

    def hybrid_ranking(self) -> tuple[list[tuple[float, int]], list[int], str]:
        """The span scorer's ranking of the scope's spans (score, span index; repeats kept), the
        candidates it ranked, and the features' note: what `hybrid_factspan` returns from, and
        what a diagnosis of its misses reads (`bench/qa/recall_gaps.py`)."""
        lexical, candidates, note = self.hybrid_features()
        model = self.cfg.span_model or load_model()
        ranked = rank_spans(
            self.spans,
            lexical,
            candidates=candidates,
            model=model,
            query_vector=self.vector,
            embed=self.embed,
            # A table row is embedded as it is scored, with its caption and header: "| 14 days |"
            # alone means nothing.
            embed_texts=self.stats.texts,
            question=self.question,
            # Looked up only when it can be used: a lexical-only index builds no embedder.
            embed_tokens=tokens_of(self.embed) if self.vector is not None and model.tokens else None,
        )
        return ranked, candidates, note

    def hybrid_features(self) -> tuple[dict[str, np.ndarray], list[int], str]:
        """The span scorer's lexical features for every span of the scope, and the candidates:
        spans that are not table header rows and that either share a word with the question or
        sit in a scored passage (a span with neither is not evidence).

        The passages' k-NN read feeds `passage_scores` only (each hit's score, document and
        offsets), so it is asked `light` (`SearchReader.dense`: OpenSearch then returns those
        fields only, no text); its readers are the focus span anchor and `hybrid_ranking`
        (`HYBRID_FACTSPAN`)."""
        spans = self.spans
        scope = self.scope or {"document_id": sorted({c.document_id for c in spans})}
        k = self.cfg.hybrid_passages
        if self.vector is not None:
            found = self.backend.dense(
                self.index, self.vector, k=k, filters=scope, kind=ChunkKind.PASSAGE, light=True
            )
            scored = [(h.chunk, float(h.dense if h.dense is not None else h.score)) for h in found]
        else:
            found = self.backend.lexical(
                self.index, self.question, k=k, filters=scope, kind=ChunkKind.PASSAGE
            )
            scored = [(h.chunk, float(h.score)) for h in found]
        passage = passage_scores(spans, scored)
        # Table rows are read with their caption and header (`stats`), every span with its heading.
        headed = self.headed_stats
        q = self._query_terms_with_phrases()
        raw = [headed.bm25(i, q) for i in range(len(spans))]
        coverage = headed.coverages(self.q_groups)
        lexical = lexical_columns(spans, question=self.question, passage=passage, bm25=raw, coverage=coverage)
        candidates = [
            i for i in range(len(spans)) if i not in self.headers and (raw[i] > 0 or passage[i] > 0)
        ]
        return lexical, candidates, f"{len(scored)} passages, {len(spans)} spans"
