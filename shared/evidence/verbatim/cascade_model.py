"""The verbatim cascade's vocabulary: its path names, the plan it reads, its configuration (every
bound and threshold of every path) and what a run returns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from evidence.records import Chunk
from evidence.verbatim.grounding import REFUSAL_FLOOR, SAFETY_NET_FLOOR
from evidence.verbatim.span_rank import SpanModel

if TYPE_CHECKING:
    from evidence.plan.verbatim import VerbatimRules

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
#: The default order: the rule paths (a section, an attribute, the subject named alone) answer
#: what they recognise; everything else goes to the hybrid span ranking, whose evidence beat the
#: lexical paths' on every family of the QA suite (docs/verbatim.md); BM25_FACTSPAN,
#: GLOBAL_FACTSPAN_SCAN and VECTOR_SCOPED stay for a scope without spans to rank.
DEFAULT_ORDER = (
    SECTION_EXACT,
    SECTION_FUZZY,
    ATTRIBUTE_LOOKUP,
    ENTITY_OVERVIEW,
    HYBRID_FACTSPAN,
    BM25_FACTSPAN,
    GLOBAL_FACTSPAN_SCAN,
    VECTOR_SCOPED,
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

    order: tuple[str, ...] = DEFAULT_ORDER
    #: At most this many spans and characters of evidence leave the cascade (0 characters: no
    #: bound): the verbatim profile's `top_k` and `max_chars` defaults; a request's override them
    #: (`bounded`).
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
    #: ATTRIBUTE_LOOKUP finds nothing unless a span matching the attribute's pattern sits in one of
    #: its home sections (the attribute's own and the plan's candidate sections): without such a
    #: region the pattern is only a filter over every span, and the next path answers. Off: +1 of
    #: 839 and one more false refusal on the development families (docs/verbatim.md#rule-paths).
    attribute_needs_home: bool = False
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
    #: Honest refusal: the least answer probability (`verbatim.grounding.judge`, the signal every
    #: profile shares) the evidence must reach, else NO_RESULT; the safety net (no bar of its own)
    #: may have a floor of its own. Fitted by `bench/refusal_fit.py` (docs/verbatim.md).
    min_grounding: float = REFUSAL_FLOOR
    safety_net_grounding: float = SAFETY_NET_FLOOR
    #: The refusal signal reads paraphrases in context with the index's word-piece embedder
    #: (`EVIDENCE_REFUSAL_CONTEXT_PARAPHRASE`, `grounding.paraphrased_in_context`); off: the static table.
    context_paraphrase: bool = False
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
    #: HYBRID_FACTSPAN: passages scored (enough for every passage of a long document: a span
    #: outside them gets no passage score), and spans returned (the bundle: `max_spans`).
    hybrid_passages: int = 1000
    hybrid_spans: int = 8
    #: A rule path's evidence is followed by up to this many of HYBRID_FACTSPAN's spans, within
    #: the bound (0: a rule path's evidence alone). `cascade.VerbatimCascade._fill`.
    fill_spans: int = 8
    #: When the rule path picked its spans by relevance inside a region it recognised
    #: (`ATTRIBUTE_LOOKUP`; `SECTION_EXACT` on a SECTION plan at sentence level), the fill is
    #: interleaved with the rule's spans (rule 1st, safety net 1st, rule 2nd, ...) instead of
    #: following them: the rule knows the kind of fact or region asked, the span scorer reads every
    #: word of the question, and each gets a turn in the first characters. Off: +2 of 839 within
    #: 600 characters on the development families, short of R1 (docs/verbatim.md#rule-paths).
    interleave_fill: bool = False
    #: A span's document-next span, when it is evidence too and the spans ranked between them
    #: hold at most this many characters, is moved up to follow it, so a fact the sentence
    #: splitter cut in two reads whole (`spans.reading_order`; 0: rank order only). About one
    #: sentence: 100-275 measured alike on the QA suite (docs/verbatim.md).
    join_within_chars: int = 200
    #: Every evidence span but the top-ranked one that is longer than this many characters is
    #: placed as its best verbatim part (`spans.best_sub_span`: the longest run of its clauses
    #: within the bound that keeps every question concept the span covers; own offsets, own id
    #: `<span id>@<start>-<end>`), so a later span's clause, not its whole paragraph, takes the
    #: first characters. After the bound, the grounding check and the reading order: the spans
    #: kept and refusals do not change. 0: off, the default. 250 was fitted leave-one-family-out on
    #: the 19 development families (every fold chose it; held out 595 -> 601 of 839 within 600
    #: characters) and lost 246 -> 241 of 361 on the blind judges (docs/verbatim.md#trim).
    trim_spans_over: int = 0
    #: Above 0: HYBRID_FACTSPAN reads the span scorer's re-ranked head in maximal-marginal-relevance
    #: order (`span_rank.mmr_order`: each next span by its logit minus this times its best cosine
    #: with a span already ranked, over the spans' own vectors). 0: off. 1, the default: every
    #: leave-one-family-out fold chose it on the 19 development families, held out 595 -> 599 of
    #: 839 within 600 characters with the clipped subjects (session 49, docs/verbatim.md#span-mmr).
    span_mmr: float = 1.0
    #: Above 0: among the first this many spans of the kept evidence, one that states nothing until
    #: the span after it (a lead-in ending in ":", a question the document states, a label) gets
    #: its document-next span placed right after it, added when it was not kept, the evidence then
    #: bounded again (`cascade.continue_intros`). After the grounding check: no refusal moves. 0:
    #: off. 1, the default: every leave-one-family-out fold chose it over 3 on the 19 development
    #: families, held out 599 -> 602 of 839 within 600 characters (session 50, `vrank22`,
    #: docs/verbatim.md#continue-intro).
    continue_intro: int = 1
    #: `continue_intro` reads labels as introducers too. False (lead-ins and stated questions only)
    #: was measured as a fourth variant: +3 in-sample, held out +2 (docs/verbatim.md#continue-intro).
    continue_labels: bool = True
    #: HYBRID_FACTSPAN's span scorer; None: the fitted one (`verbatim/data/span_rank.json`).
    span_model: SpanModel | None = None

    def bounded(self, top_k: int | None, max_chars: int | None) -> CascadeConfig:
        """This configuration under a request's bounds: `top_k` spans and `max_chars` characters
        (None or 0: no character bound). The per-path caps (scan, attribute, safety net, spans per
        section, BM25 hits fetched) are shares of the default bundle: a `top_k` above it raises
        them by the same factor, so a request for 30 spans can get 30 from any path; a smaller one
        leaves them (the bundle's bound cuts)."""
        k = top_k or self.max_spans
        grow = k / self.max_spans if k > self.max_spans else 1.0

        def up(n: int) -> int:
            return max(n, math.ceil(n * grow))

        return replace(
            self,
            max_spans=k,
            max_chars=max_chars or 0,
            scan_spans=up(self.scan_spans),
            attribute_spans=up(self.attribute_spans),
            hybrid_spans=up(self.hybrid_spans),
            fill_spans=up(self.fill_spans),
            multi_spans_per_section=up(self.multi_spans_per_section),
            overview_spans=up(self.overview_spans),
            bm25_k=up(self.bm25_k),
        )

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


class CascadeLike(Protocol):
    """What a run reads of its cascade: the configuration and the rules."""

    @property
    def config(self) -> CascadeConfig: ...
    @property
    def rules(self) -> VerbatimRules: ...
