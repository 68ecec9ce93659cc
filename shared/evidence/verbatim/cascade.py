"""The verbatim retrieval cascade (seed 002), over the SearchBackend port.

SECTION_EXACT → SECTION_FUZZY → ATTRIBUTE_LOOKUP → BM25_FACTSPAN → GLOBAL_FACTSPAN_SCAN →
VECTOR_SCOPED → NO_RESULT. Each path applies only to the plans it suits, is bounded (spans and
characters returned, spans scanned), and the first that finds evidence wins; `path_used` names
it and `tried` records every path that ran. The order is configuration (`CascadeConfig.order`).

Scope: the question's entity. Documents carry their subject's names in metadata
(`entity_names`, lower-cased, filterable), so the cascade works on that entity's spans only —
a few hundred for a label — which is what lets the scan paths look at every one of them. With
no entity (a plain index) the scan paths are skipped and only the backend's own searches run.

What comes back are fact spans as stored: their text is the document's text at their offsets
(`verbatim.check` proves it before a response leaves).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from evidence.errors import EvidenceError
from evidence.ingest.sections import (
    ENTITY_KEY,
    ENTITY_NAMES_KEY,
    SECTION_PARENT_KEY,
    SECTION_PATH_KEY,
    default_vocabulary,
    normalise_heading,
)
from evidence.plan.verbatim import VerbatimRules, content_words, default_rules
from evidence.rank.grounding import DENSE_EMBEDDERS, REFUSAL_FLOOR, judge
from evidence.records import Chunk, ChunkKind, SpanType
from evidence.verbatim.scoring import SpanStats, terms

if TYPE_CHECKING:
    from evidence.search.base import SearchBackend

SECTION_EXACT = "SECTION_EXACT"
SECTION_FUZZY = "SECTION_FUZZY"
ATTRIBUTE_LOOKUP = "ATTRIBUTE_LOOKUP"
BM25_FACTSPAN = "BM25_FACTSPAN"
GLOBAL_FACTSPAN_SCAN = "GLOBAL_FACTSPAN_SCAN"
VECTOR_SCOPED = "VECTOR_SCOPED"
#: The seed's drug-only path: a question that names only the subject gets its key sections.
ENTITY_OVERVIEW = "ENTITY_OVERVIEW"
#: Seed 002's multi-section assembly: what SECTION_EXACT reports when it bundled several sections.
MULTI_SECTION_EVIDENCE = "MULTI_SECTION_EVIDENCE"
#: The safety net: spans of the best passages (dense and BM25), so an answerable question never
#: ends in NO_RESULT because no rule fired; the grounding check decides whether they answer.
HYBRID_FACTSPAN = "HYBRID_FACTSPAN"
NO_RESULT = "NO_RESULT"
PATHS = (
    SECTION_EXACT,
    SECTION_FUZZY,
    ATTRIBUTE_LOOKUP,
    ENTITY_OVERVIEW,
    BM25_FACTSPAN,
    GLOBAL_FACTSPAN_SCAN,
    VECTOR_SCOPED,
    HYBRID_FACTSPAN,
)
#: Every name `path_used` may carry: the paths, the multi-section assembly and NO_RESULT.
REPORTED_PATHS = (*PATHS, MULTI_SECTION_EVIDENCE, NO_RESULT)


class PlanLike(Protocol):
    """The seed's plan fields (the API's `Plan` and the rules' `RulePlan` both have them)."""

    @property
    def entity(self) -> str | None: ...
    @property
    def query_mode(self) -> str: ...
    @property
    def attribute(self) -> str | None: ...
    @property
    def candidate_sections(self) -> Sequence[str]: ...
    @property
    def search_phrases(self) -> Sequence[str]: ...
    @property
    def extraction_level(self) -> str: ...


@dataclass(frozen=True)
class CascadeConfig:
    """Bounds and thresholds of every path. Defaults are set from first principles (documented
    next to each), not fitted to a question set."""

    order: tuple[str, ...] = PATHS
    #: At most this many spans and characters of evidence leave the cascade.
    max_spans: int = 8
    max_chars: int = 1500
    #: Spans of one entity the scan paths read (a label has hundreds; this bounds a huge document).
    max_scan: int = 5000
    #: No entity: the scan paths read the spans of the documents of the best passages.
    unscoped_passages: int = 20
    unscoped_documents: int = 3
    #: SECTION_EXACT with more words than the section's name: the share of them a span must hold.
    section_min_coverage: float = 0.5
    #: SECTION_FUZZY: trigram similarity a heading needs to count as the section asked for.
    fuzzy_threshold: float = 0.4
    #: MULTI_SECTION / GENERIC: sections bundled and spans per section.
    multi_sections: int = 3
    multi_spans_per_section: int = 2
    #: ATTRIBUTE_LOOKUP: spans returned.
    attribute_spans: int = 3
    #: BM25_FACTSPAN: hits fetched, and the share of the question's informative terms a hit must hold.
    bm25_k: int = 20
    bm25_min_coverage: float = 0.6
    #: GLOBAL_FACTSPAN_SCAN: the minimum relevance (coverage) of a span.
    global_min_coverage: float = 0.4
    scan_spans: int = 5
    #: VECTOR_SCOPED: passages searched and the cosine a passage needs (MiniLM: unrelated text
    #: sits around 0.1-0.3, a paraphrase of the same fact above 0.5).
    vector_pool: int = 50
    vector_min_cosine: float = 0.5
    vector_min_margin: float = 0.15
    #: GLOBAL_FACTSPAN_SCAN and BM25_FACTSPAN order what qualified by `(1 - w) * lexical + w *
    #: the cosine of the span's passage` (both normalised): equal weights, as `verbatim.sentences`.
    meaning_weight: float = 0.0
    #: Honest refusal: the least answer probability (`rank.grounding.judge`, the signal every
    #: profile shares) the evidence must reach, else NO_RESULT; the safety net (no bar of its own)
    #: may have a floor of its own. Fitted by `bench/refusal_fit.py` (docs/verbatim.md).
    min_grounding: float = REFUSAL_FLOOR
    safety_net_grounding: float = REFUSAL_FLOOR
    #: ENTITY_OVERVIEW: the sections an overview shows, first span of each (a document without
    #: them: its first sections), and how many.
    overview_sections: tuple[str, ...] = (
        "indications",
        "dosage",
        "contraindications",
        "warnings",
        "adverse_reactions",
    )
    overview_spans: int = 5
    #: HYBRID_FACTSPAN: passages per leg, and spans returned (0.5 * passage + 0.5 * span BM25).
    hybrid_passages: int = 8
    hybrid_spans: int = 3

    def __post_init__(self) -> None:
        unknown = [p for p in self.order if p not in PATHS]
        if unknown:
            raise ValueError(f"unknown cascade paths {unknown}; valid: {', '.join(PATHS)}")
        if len(set(self.order)) != len(self.order):
            raise ValueError("cascade order names a path twice")


@dataclass(frozen=True, slots=True)
class SpanHit:
    chunk: Chunk
    score: float
    path: str


@dataclass(frozen=True, slots=True)
class PathRun:
    path: str
    found: int
    ms: float
    note: str = ""


@dataclass
class CascadeResult:
    hits: list[SpanHit]
    path_used: str
    entity: str | None
    tried: list[PathRun] = field(default_factory=list)
    #: The grounding of the evidence found (before any refusal) and the concepts it lacks.
    grounding: float = 0.0
    missing: list[str] = field(default_factory=list)
    #: The path whose evidence the grounding check refused (NO_RESULT then), if any.
    refused: str | None = None

    @property
    def sections(self) -> list[str]:
        return list(dict.fromkeys(h.chunk.section for h in self.hits))

    @property
    def multi_section(self) -> bool:
        return len(self.sections) > 1


# --- helpers -----------------------------------------------------------------------------------


def span_path(chunk: Chunk) -> tuple[str, ...]:
    """Canonical section names of a span: recorded at ingestion, else read off its heading."""
    path = chunk.metadata.get(SECTION_PATH_KEY)
    if isinstance(path, list | tuple) and path:
        return tuple(str(p) for p in path)
    own = default_vocabulary().canonical(chunk.section) if chunk.section else None
    return (own,) if own else ()


def _trigrams(s: str) -> set[str]:
    s = f"  {s} "
    return {s[i : i + 3] for i in range(len(s) - 2)}


def trigram_similarity(a: str, b: str) -> float:
    """pg_trgm's similarity: shared trigrams over all trigrams of the two strings."""
    ta, tb = _trigrams(a), _trigrams(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


#: Questions answered by a figure: spans with a number in them rank a little higher.
_QUANTITY = re.compile(
    r"\bhow (?:much|many|often|long|frequent(?:ly)?|high|low|fast|quickly)\b"
    r"|\bwhat (?:percentage|percent|proportion|fraction|number|rate|incidence)\b|\bincidence\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_WHY = re.compile(r"\bwhy\b|\breasons?\b|\bhow come\b", re.IGNORECASE)
QUANTITY_BOOST = 1.25


def header_rows(spans: Sequence[Chunk]) -> set[int]:
    """Positions of table header rows (the first row of each run of rows): context for the rows
    under them (`scoring_texts`), never an answer on their own."""
    out = set()
    for i, c in enumerate(spans):
        if c.span_type is not SpanType.TABLE_ROW:
            continue
        prev = spans[i - 1] if i else None
        if prev is None or prev.span_type is not SpanType.TABLE_ROW or prev.section != c.section:
            out.add(i)
    return out


def scoring_texts(spans: Sequence[Chunk]) -> list[str]:
    """What each span is scored on: its text, and for a table row also its table's caption and
    header row — "| AUC0-inf | 214 (71) |" means nothing without "after a single 20 mg dose"."""
    out = []
    caption = header = ""
    prev: Chunk | None = None
    for c in spans:
        contiguous = prev is not None and prev.document_id == c.document_id and prev.section == c.section
        if c.span_type is SpanType.CAPTION:
            caption, header = c.text, ""
        elif c.span_type is SpanType.TABLE_ROW:
            if not (
                contiguous and prev is not None and prev.span_type in (SpanType.TABLE_ROW, SpanType.CAPTION)
            ):
                caption = (
                    caption if contiguous and prev is not None and prev.span_type is SpanType.CAPTION else ""
                )
                header = ""
            if not header:
                header = c.text
                out.append(f"{caption} {c.text}".strip())
                prev = c
                continue
            out.append(f"{caption} {header} {c.text}".strip())
            prev = c
            continue
        else:
            caption = header = ""
        out.append(c.text)
        prev = c
    return out


def _order(chunks: Sequence[Chunk]) -> list[Chunk]:
    return sorted(chunks, key=lambda c: (c.document_id, c.char_start, c.sequence))


class VerbatimCascade:
    def __init__(self, config: CascadeConfig | None = None, rules: VerbatimRules | None = None) -> None:
        self.config = config or CascadeConfig()
        self.rules = rules or default_rules()

    # --- entity ------------------------------------------------------------------------------

    def resolve_entity(
        self, backend: SearchBackend, index: str, question: str, plan: PlanLike
    ) -> tuple[str | None, dict[str, Any] | None]:
        """(entity name, filters scoping the search to it), or (None, None) for the whole index.

        The plan's entity when the index knows it; otherwise the subject of the passages that best
        match the question, if they agree on one (a single-label index needs no name in the question).
        """
        if plan.entity:
            name = plan.entity.lower().strip()
            if backend.lookup(index, {ENTITY_NAMES_KEY: name}, limit=1, kind=ChunkKind.SPAN):
                return plan.entity, {ENTITY_NAMES_KEY: name}
        hits = backend.lexical(index, question, k=10, kind=ChunkKind.PASSAGE)
        subjects: dict[str, list[str]] = {}
        for h in hits:
            names = h.chunk.metadata.get(ENTITY_NAMES_KEY)
            if isinstance(names, list) and names:
                subjects.setdefault(str(names[0]), [str(n) for n in names])
        low = question.lower()
        for first, names in subjects.items():
            if any(re.search(r"(?<![0-9a-z])" + re.escape(n) + r"(?![0-9a-z])", low) for n in names):
                return first, {ENTITY_NAMES_KEY: first}
        if len(subjects) == 1:
            first = next(iter(subjects))
            return first, {ENTITY_NAMES_KEY: first}
        return None, None

    # --- the run -----------------------------------------------------------------------------

    def run(
        self,
        backend: SearchBackend,
        index: str,
        question: str,
        plan: PlanLike,
        *,
        query_vector: Any = None,
        documents: Sequence[str] | None = None,
    ) -> CascadeResult:
        """`documents`: the documents the question names (`rank.scope`), which scope the run."""
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
        state = _State(
            self,
            backend=backend,
            index=index,
            question=question,
            plan=plan,
            scope=scope,
            q_groups=q_groups,
            query_vector=query_vector,
        )
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
        bound = self._bound(found)
        g, missing = state.grounding(bound, used)
        if g < self.floor(used):  # g: the shared signal's answer probability
            return CascadeResult([], NO_RESULT, entity, tried, round(g, 4), missing, refused=used)
        return CascadeResult(bound, used, entity, tried, round(g, 4), missing)

    @staticmethod
    def _named_terms(backend: SearchBackend, index: str, question: str, documents: list[str]) -> list[str]:
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

    def _bound(self, hits: Sequence[SpanHit]) -> list[SpanHit]:
        out: list[SpanHit] = []
        used = 0
        for h in hits:
            if len(out) >= self.config.max_spans:
                break
            n = len(h.chunk.text)
            if out and used + n > self.config.max_chars:
                break
            out.append(h)
            used += n
        return out


class _State:
    """One cascade run: the entity's spans are read once, on first need, and shared by the paths."""

    def __init__(
        self,
        cascade: VerbatimCascade,
        *,
        backend: SearchBackend,
        index: str,
        question: str,
        plan: PlanLike,
        scope: Mapping[str, Any] | None,
        q_groups: list[tuple[str, ...]],
        query_vector: Any,
    ) -> None:
        self.c = cascade
        self.cfg = cascade.config
        self.backend = backend
        self.index = index
        self.question = question
        self.plan = plan
        self.scope = scope
        self.q_groups = q_groups
        self.q_terms = list(dict.fromkeys(t for g in q_groups for t in g))
        self.quantity = bool(_QUANTITY.search(question))
        self.vector = query_vector
        self._spans: list[Chunk] | None = None
        self._stats: SpanStats | None = None
        #: A section named by the question whose sentences did not match the rest of it.
        self.deferred: list[SpanHit] | None = None
        self._headers: set[int] | None = None
        self._raw_stats: SpanStats | None = None

    @property
    def spans(self) -> list[Chunk]:
        if self._spans is None:
            scope = self.scope if self.scope is not None else self._best_documents()
            if scope is None:
                self._spans = []
            else:
                hits = self.backend.lookup(self.index, scope, limit=self.cfg.max_scan, kind=ChunkKind.SPAN)
                self._spans = _order([h.chunk for h in hits])
        return self._spans

    def _best_documents(self) -> dict[str, Any] | None:
        """No entity: the documents of the best passages (the hybrid first stage) are the scope
        the scan paths read, so an index of many subjects is still scanned, within bounds."""
        from evidence.rank.first_stage import FirstStage, RetrievalMode

        mode = RetrievalMode.HYBRID if self.vector is not None else RetrievalMode.LEXICAL
        found = FirstStage(mode=mode).retrieve(
            self.backend, self.index, query=self.question, vector=self.vector, k=self.cfg.unscoped_passages
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
    def raw_stats(self) -> SpanStats:
        if self._raw_stats is None:
            self._raw_stats = SpanStats([c.text for c in self.spans])
        return self._raw_stats

    @property
    def headers(self) -> set[int]:
        if self._headers is None:
            self._headers = header_rows(self.spans)
        return self._headers

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
        scored.sort(key=lambda x: (not x[0], -x[1], x[2]))
        hits = [
            SpanHit(self.spans[i], rel, ATTRIBUTE_LOOKUP) for _, rel, i in scored[: self.cfg.attribute_spans]
        ]
        return hits, f"{len(scored)} spans state {name}"

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

    def _passage_spans(self, passage: Chunk) -> list[Chunk]:
        hits = self.backend.lookup(
            self.index, {"document_id": passage.document_id}, limit=self.cfg.max_scan, kind=ChunkKind.SPAN
        )
        return _order([h.chunk for h in hits])

    def grounding(self, hits: Sequence[SpanHit], path: str = "") -> tuple[float, list[str]]:
        """The shared refusal signal's answer probability (`rank.grounding.judge`) and the concepts
        the evidence lacks: each span read with its section's heading (a section asked for by name
        is carried by its heading) and, for a table row, its caption and header."""
        ctx = dict(zip((c.chunk_id for c in self.spans), self.stats.texts, strict=True)) if self.spans else {}
        aliases: dict[str, list[str]] = {}
        for alias, name in self.c.rules.vocabulary.alias_table().items():
            aliases.setdefault(name, []).append(alias)
        texts = []
        for h in hits:
            c = h.chunk
            # The section a span sits in carries the question's section words: its heading, its
            # parent's, and the names its canonical sections go by ("precautions" for warnings).
            where = [c.section, str(c.metadata.get(SECTION_PARENT_KEY, ""))]
            where += [a for name in span_path(c) for a in aliases.get(name, ())]
            texts.append(" ".join([*where, ctx.get(c.chunk_id, c.text)]))
        groups = list(self.q_groups)
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
            texts.append(" ".join(concept))
        verdict = judge(self.question, texts, cosine=self.evidence_cosine(hits), groups=groups)
        return verdict.probability, list(verdict.missing)

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
        """The safety net: the best passages by cosine and by BM25 (each leg max-normalised, a
        passage keeps its better leg), then their spans scored 0.5 * passage + 0.5 * span BM25
        (max-normalised), as `verbatim.sentences` does for SciFact's rationales."""
        k = self.cfg.hybrid_passages
        legs = [
            self.backend.lexical(self.index, self.question, k=k, filters=self.scope, kind=ChunkKind.PASSAGE)
        ]
        if self.vector is not None:
            legs.append(
                self.backend.dense(self.index, self.vector, k=k, filters=self.scope, kind=ChunkKind.PASSAGE)
            )
        passages: dict[str, tuple[float, Chunk]] = {}
        for leg in legs:
            top = max((float(h.score) for h in leg), default=0.0)
            for h in leg:
                norm = float(h.score) / top if top > 0 else 0.0
                old = passages.get(h.chunk.chunk_id)
                if old is None or norm > old[0]:
                    passages[h.chunk.chunk_id] = (norm, h.chunk)
        if not passages:
            return [], "no passage"
        pool: list[tuple[float, Chunk]] = []
        seen: set[str] = set()
        for score, p in sorted(passages.values(), key=lambda x: -x[0]):
            for c in self.spans if self.scope is not None else self._passage_spans(p):
                if (
                    c.document_id == p.document_id
                    and c.char_start >= p.char_start
                    and c.char_end <= p.char_end
                    and c.chunk_id not in seen
                    and c.span_type is not SpanType.CAPTION
                ):
                    seen.add(c.chunk_id)
                    pool.append((score, c))
        if not pool:
            return [], "passages without spans"
        stats = SpanStats(scoring_texts([c for _, c in pool]))
        q = self._query_terms_with_phrases()
        lex = [stats.bm25(i, q) for i in range(len(pool))]
        top = max(lex, default=0.0) or 1.0
        ranked = sorted(
            ((0.5 * ps + 0.5 * lex[i] / top, i) for i, (ps, _) in enumerate(pool)),
            key=lambda x: (-x[0], x[1]),
        )
        hits = [SpanHit(pool[i][1], sc, HYBRID_FACTSPAN) for sc, i in ranked[: self.cfg.hybrid_spans]]
        return hits, f"{len(passages)} passages, {len(pool)} spans"


def question_groups(question: str, *, rules: VerbatimRules | None = None) -> list[tuple[str, ...]]:
    """The question's concepts as the cascade reads them (content words, lay words with their
    label words): what the grounding check asks the evidence of any profile to carry."""
    return VerbatimCascade(rules=rules)._question_terms(question, _NO_PLAN, [])


@dataclass(frozen=True)
class _NoPlan:
    entity: str | None = None
    query_mode: str = "GLOBAL"
    attribute: str | None = None
    candidate_sections: tuple[str, ...] = ()
    search_phrases: tuple[str, ...] = ()
    extraction_level: str = "sentence"


_NO_PLAN = _NoPlan()
