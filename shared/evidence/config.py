"""Settings: explicit argument > environment variable (prefix EVIDENCE_) > default.

Read once through `get_settings()`; nothing else in `shared/` looks at the
environment. Tests build `Settings(...)` directly.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from evidence.errors import ConfigurationError
from evidence.names import DEFAULT_INDEX, INDEX_NAME_PATTERN

ENV_PREFIX = "EVIDENCE_"
#: EVIDENCE_ variables that are not settings of the service: the fuzz test's example count.
NOT_SETTINGS = frozenset({"EVIDENCE_FUZZ_EXAMPLES"})


class BackendKind(StrEnum):
    EMBEDDED = "embedded"
    OPENSEARCH = "opensearch"


class EmbedderKind(StrEnum):
    MINILM = "minilm"
    TITAN = "titan"


class LongTextRule(StrEnum):
    """What the dense leg does with a document text longer than the model reads at once."""

    #: Only the first window is read (sentence-transformers' truncation; the rule before windows).
    FIRST = "first"
    #: Every window is read; the text's vector is the windows' mean, weighted by word pieces.
    MEAN = "mean"


class SpanVectors(StrEnum):
    """Which span vectors indexing puts in the store's embedding cache
    (docs/ingest.md#span-vectors-at-indexing)."""

    OFF = "off"
    #: Each span's own vector (its scoring text embedded alone): what the `verbatim` scorer reads.
    OWN = "own"
    #: Each span's vector pooled out of its passage's forward pass (late chunking), in a key space
    #: of its own that only the focus span anchor reads; headings embedded on their own.
    LATE = "late"


def _span_vectors(value: object) -> object:
    """`true`/`false` (the setting's values before `late`) are `own`/`off`."""
    if isinstance(value, bool):
        return SpanVectors.OWN if value else SpanVectors.OFF
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
        return SpanVectors.OWN
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", ""):
        return SpanVectors.OFF
    return value


class RerankerKind(StrEnum):
    NONE = "none"
    COHERE = "cohere"
    BEDROCK = "bedrock"


class PlannerKind(StrEnum):
    RULES = "rules"
    BEDROCK = "bedrock"


class HybridMode(StrEnum):
    SERVER = "server"
    CLIENT = "client"


class EmbeddingCacheScope(StrEnum):
    INDEX = "index"
    SHARED = "shared"


class SectionHeaderKind(StrEnum):
    """What of a chunk's section the legs index beside its title (docs/ingest.md#section-headers)."""

    OFF = "off"
    HEADING = "heading"  # the chunk's own heading ("2.2 Renal impairment")
    PATH = "path"  # its parent heading, then its own ("2 DOSAGE AND ADMINISTRATION 2.2 Renal impairment")


class HeaderLegs(StrEnum):
    """Which first-stage legs see the section header: BM25, the passage vectors, or both."""

    LEXICAL = "lexical"
    DENSE = "dense"
    BOTH = "both"


class CoachIntentKind(StrEnum):
    RULES = "rules"
    BEDROCK = "bedrock"


#: Seed 004's "block unsafe content types": content node types the coach never recalls, expands
#: or cites unless an index's guard says otherwise (matched case-insensitively).
DEFAULT_BLOCKED_CONTENT_TYPES = ("Unsafe", "Restricted", "Private", "Confidential")


class CoachGuard(BaseModel):
    """Seed 004's guardrails for one index: "filtered subject domains; block unsafe content types"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Subjects a request may reach (case-insensitive). None: the subjects the index's graphs
    #: declare, so a subject filter can never reach outside them (on by default).
    subjects: list[str] | None = Field(default=None, max_length=200)
    #: The unsafe-content guard (on by default): content of these types is never recalled, linked
    #: or cited. [] switches it off.
    blocked_types: list[str] = Field(
        default_factory=lambda: list(DEFAULT_BLOCKED_CONTENT_TYPES), max_length=200
    )

    def allows_subject(self, subject: str) -> bool:
        return self.subjects is None or subject.strip().lower() in {s.strip().lower() for s in self.subjects}

    def blocks_type(self, node_type: str) -> bool:
        return node_type.strip().lower() in {t.strip().lower() for t in self.blocked_types}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    store_dir: Path = Field(default=Path(".evidence"), description="Embedded backend's store directory")
    backend: BackendKind = BackendKind.EMBEDDED
    embedder: EmbedderKind = EmbedderKind.MINILM
    reranker: RerankerKind = RerankerKind.NONE
    planner: PlannerKind = PlannerKind.RULES

    # Local embedder
    # Small batches bound the embedder's peak memory (32: ~1.5 GB RSS on 256-token passages,
    # 16: ~0.8 GB) at equal or better throughput on 2 cores (bench: 4,700-5,500 tokens/s at 2-16).
    embed_batch_size: int = Field(default=8, ge=1, le=512)
    embed_threads: int = Field(default=0, ge=0, le=64, description="0 = one per core")
    embed_max_tokens: int = Field(default=256, ge=16, le=512)
    #: A passage or record longer than `embed_max_tokens` word pieces: `first` embeds its first
    #: window (truncation); `mean` every window, stored as their mean weighted by word pieces.
    #: On SciFact `mean` lifts the dense leg but not the hybrid, for +41% embedding tokens
    #: (docs/scale.md#long-records), hence the default. Changing it re-embeds nothing stored.
    embed_long_text: LongTextRule = LongTextRule.FIRST
    #: Whose cached document vectors an upload may reuse (embedded store, `<store>/embeddings.sqlite3`).
    #: `index` (default): only its own index's, so the time an upload takes tells nothing about
    #: other indexes. `shared`: every index's, for a store with one owner (re-indexing the same
    #: text into another index then costs no inference).
    embedding_cache_scope: EmbeddingCacheScope = EmbeddingCacheScope.INDEX
    #: The verbatim span scorer's word-piece vectors kept on disk next to the embedding cache
    #: (embedded store, `<store>/pieces.sqlite3`, in the same scopes), so a new process does not
    #: embed its ranked spans' pieces again: the bound in MB (least recently used rows evicted past
    #: it; ~26 KB a span); 0 = kept in process only (docs/verbatim.md, "The token-level match").
    token_cache_mb: int = Field(default=256, ge=0, le=1_000_000)
    #: Indexing also embeds each new or changed document's fact spans (the texts the verbatim span
    #: scorer and the focus span anchor embed: `verbatim.spans.span_embedding_texts`) into the
    #: store's embedding cache, so a question reads their vectors instead of embedding them (~1-2 s
    #: a question on a cold store). Embedded store only: elsewhere (OpenSearch) there is no cache
    #: to fill and it does nothing. Word pieces (`token_cache_mb`) are not embedded.
    #: `own` (or `true`): each span's own vector, as above; it costs ~2.1x the indexing CPU
    #: (docs/ingest.md#span-vectors-at-indexing). `late` (the default since session 46): each
    #: span's vector pooled out of its passage's forward pass (late chunking: the passage's word
    #: pieces covering the span), 1.04x the indexing CPU on SciFact, in a key space of its own that
    #: only the focus span anchor reads (and reads instead of own vectors); the spans' headings
    #: embedded on their own (docs/ingest.md#late-span-vectors). `off` (or `false`).
    embed_spans_at_index: Annotated[SpanVectors, BeforeValidator(_span_vectors)] = SpanVectors.LATE
    #: Under `late`, a span that no passage holds whole within its first model window (254 word
    #: pieces, the window the passage's vector reads) gets no late vector (the anchor skips it, as a
    #: span with no cached vector). True: it is pooled from its passage's further window, run for it;
    #: that cost 1.35x the indexing CPU on SciFact's first 600 records (its records are long: 32 %
    #: of their spans lie past the first window) against 1.04x without, for one answer fewer on the
    #: 19 development families (672 against 673) (docs/ingest.md#late-span-vectors).
    late_spans_past_window: bool = False

    # Chunking
    passage_tokens: int = Field(default=256, ge=32, le=2048)
    passage_overlap: int = Field(default=32, ge=0, le=512)
    record_max_tokens: int = Field(default=2048, ge=64, le=32768)
    #: Contextual section headers (docs/ingest.md#section-headers): the passage's section heading
    #: (`heading`) or its parent heading and heading (`path`) indexed after the title by the legs
    #: `section_header_legs` names; `section_header_spans` gives the fact spans' BM25 index the same
    #: header (spans have no stored vector). The refusal's inputs (`Chunk.search_text`) do not change.
    #: Part of every document's content hash when not `off`, so changing it re-indexes. Measured
    #: on the 19 development families, no rule gains the +3 answers a ranking change needs (the
    #: vector's header loses in both profiles): off.
    section_header: SectionHeaderKind = SectionHeaderKind.OFF
    section_header_legs: HeaderLegs = HeaderLegs.BOTH
    section_header_spans: bool = False

    # Lexical analysis: OpenSearch's `english` analyzer by default. The embedded backend applies
    # the analyzer switches to new indexes (each index keeps the analysis it was built with) and
    # computes BM25 with k1 1.2, b 0.75 only (tantivy's constants); OpenSearch takes any k1/b.
    analyzer_stopwords: bool = True
    analyzer_stemming: bool = True
    bm25_k1: float = Field(default=1.2, ge=0.0, le=3.0)
    bm25_b: float = Field(default=0.75, ge=0.0, le=1.0)

    # Remote models
    aws_region: str | None = None
    bedrock_embed_model: str = "amazon.titan-embed-text-v2:0"
    titan_dimension: int = Field(default=1024, description="256, 512 or 1024")
    bedrock_rerank_model: str = "cohere.rerank-v3-5:0"
    bedrock_planner_model: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    cohere_api_key: SecretStr | None = None
    #: In Lambda the key lives in Secrets Manager; read once, on the first reranked request.
    cohere_api_key_secret_arn: str | None = None
    cohere_base_url: str | None = None
    cohere_model: str = "rerank-v3.5"
    rerank_timeout_s: float = Field(default=5.0, gt=0, le=60)
    rerank_retries: int = Field(default=2, ge=0, le=10)
    planner_timeout_s: float = Field(default=3.0, gt=0, le=60)

    # OpenSearch
    opensearch_endpoint: str | None = None
    #: es (managed domain) | aoss (Serverless); unset: derived from the endpoint (*.aoss.amazonaws.com).
    opensearch_service: str | None = Field(default=None, pattern="^(es|aoss)$")
    opensearch_username: str | None = None
    opensearch_password: SecretStr | None = None
    opensearch_hybrid_mode: HybridMode = HybridMode.SERVER
    opensearch_timeout_s: float = Field(default=10.0, gt=0, le=120)
    opensearch_verify_certs: bool = True
    #: Skip version detection (e.g. "2.17.0"); GET / and the nodes API are asked otherwise.
    opensearch_version: str | None = Field(default=None, pattern=r"^\d+\.\d+(\.\d+)?$")

    #: Budget for one API request (or one backend call from the CLI) across every retry: the
    #: retriever Lambda also caps it at its remaining time; API Gateway gives up after 29 s.
    request_deadline_s: float = Field(default=25.0, gt=0, le=900)

    # Ranking defaults per deployment (seed 003 configures its knobs per deployment). Each sets
    # the default of every profile; `profile_defaults` sets any knob for one profile; a request's
    # own override wins over both. 0 switches the seed-003 knobs off, as in the seed.
    #: seed 003's EMBEDDING_MIN_REFERENCE_SIMILARITY: a floor on dense cosine similarity.
    min_similarity: float = Field(default=0.0, ge=0.0, le=1.0)
    #: seed 003's EMBEDDING_MAX_REFERENCE_CHARS_PER_ITEM: a budget on the hits' total len(text).
    max_chars: int = Field(default=0, ge=0, le=10_000_000)
    #: e.g. EVIDENCE_PROFILE_DEFAULTS='{"vrm": {"top_k": 8, "mmr_lambda": 0.7}}'; knobs and
    #: ranges as for a request's overrides (checked on the first request of that profile).
    profile_defaults: dict[str, dict[str, float | int | None]] = Field(default_factory=dict)
    #: The answerability bar (docs/ranking.md, Answerability): can_answer when the calibrated
    #: probability reaches it (`confidence` maps it to 0.5). Fitted with the refusal signal on
    #: bench/qa (`bench/refusal_fit.py --min-confidence`): at 0.5 it alone refused 4.2 % of the
    #: answerable questions of seven families, more than the whole false-refusal budget; at 0.3 the
    #: refusal signal's floor takes over, and SciFact's out-of-domain refusal holds
    #: (bench/answerability.py, docs/ranking.md#answerability).
    answer_min_confidence: float = Field(default=0.3, ge=0.0, le=1.0)
    #: The refusal signal of the default and vrm profiles (docs/verbatim.md, Honest refusal): the
    #: least answer probability (`verbatim.grounding.judge`) the first hits must reach; 0 = off.
    #: = `verbatim.grounding.HITS_REFUSAL_FLOOR` (bench/refusal_fit.py, capped for SciFact's in-domain
    #: questions: bench/answerability.py; fitted with `answer_min_confidence` 0.3).
    answer_min_grounding: float = Field(default=0.2508, ge=0.0, le=1.0)
    #: The refusal signal's `absent_rare` reads an absent question word as said in other words by
    #: its contextual MiniLM vector (`verbatim.grounding.paraphrased_in_context`: one word-piece
    #: pass over the evidence per judged question) instead of the static word table
    #: (docs/verbatim.md#refusal-context). Moves nothing unless the refusal model reads
    #: `absent_rare` (`grounding.READ_PARAPHRASES`); MiniLM indexes only. Off: measured, not shipped.
    refusal_context_paraphrase: bool = False
    #: The default profile's `focus` keeps, in each passage hit, a run holding the hit's best span
    #: by the verbatim profile's `dense` span model, its span and heading vectors read from the
    #: store's embedding cache only, never embedded at query time (docs/ranking.md
    #: #focus-span-anchor-cached). On since session 46, over the late span vectors indexing puts
    #: in the cache (`embed_spans_at_index=late`): 665 -> 673 of 839 answers within 2,000
    #: characters on 19 QA families, 283 -> 285 of 361 on the blind judges, p95 <= 50 ms
    #: (docs/ranking.md#focus-span-anchor-late). A store indexed without span vectors (or
    #: OpenSearch, which has no cache) gives it nothing to read: focus then works as with it off.
    focus_span_anchor: bool = True
    #: The verbatim profile places every evidence span but the top-ranked one that is longer than
    #: this many characters as its best verbatim part (`CascadeConfig.trim_spans_over`,
    #: docs/verbatim.md#trim); 0 = off, the default: 250 (fitted leave-one-family-out) found 6 more
    #: answers within 600 characters on development but lost 5 on the blind judges.
    verbatim_trim_spans_over: int = Field(default=0, ge=0, le=100_000)
    #: Above 0, the verbatim profile's span scorer reads its re-ranked head in maximal-marginal-
    #: relevance order, this the weight of a span's best cosine with the spans ranked above it
    #: (`CascadeConfig.span_mmr`, docs/verbatim.md#span-mmr); 0 = off. 1, the default: fitted
    #: leave-one-family-out on the 19 development families with the clipped-subject scope (session 49).
    verbatim_span_mmr: float = Field(default=1.0, ge=0.0, le=100.0)
    #: Above 0: among the verbatim evidence's first this many spans, a lead-in, a question the
    #: document states or a label is followed by its document-next span, added when it was not kept
    #: (`CascadeConfig.continue_intro`, docs/verbatim.md#continue-intro); 0 = off. 1, the default:
    #: fitted leave-one-family-out on the 19 development families (session 50, `vrank22`).
    verbatim_continue_intro: int = Field(default=1, ge=0, le=8)
    #: `verbatim_continue_intro` reads labels as introducers too (`CascadeConfig.continue_labels`).
    verbatim_continue_labels: bool = True

    # The coach profile (docs/coach.md): optional Bedrock steps, each within its own budget.
    coach_intent: CoachIntentKind = CoachIntentKind.RULES
    coach_hyde: bool = False
    bedrock_coach_model: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    coach_intent_budget_ms: int = Field(default=200, ge=10, le=10_000)
    coach_hyde_budget_ms: int = Field(default=200, ge=10, le=10_000)
    #: Seed 004's guardrails per index (evidence/config.py:CoachGuard), "*" for every other index,
    #: e.g. EVIDENCE_COACH_GUARDS='{"tutor": {"subjects": ["algebra"], "blocked_types": ["Unsafe"]}}'.
    coach_guards: dict[str, CoachGuard] = Field(default_factory=dict)

    # Embedded backend at scale (docs/scale.md)
    #: From this many vectors an index's dense leg is approximate (faiss IVF, search/ann.py);
    #: below it, exact cosine. SciFact (5k) and every test corpus stay exact.
    ann_min_vectors: int = Field(default=100_000, ge=1)
    #: Share of the IVF lists probed per query: recall@100 against latency (docs/scale.md).
    ann_probe_fraction: float = Field(default=0.25, gt=0, le=1)
    #: At most this many IVF lists probed by an unfiltered query (0: no cap; search/ann.py).
    ann_max_probes: int = Field(default=150, ge=0)

    # Lambda wiring
    default_index: str = Field(default=DEFAULT_INDEX, pattern=INDEX_NAME_PATTERN)
    #: The batch state machine that `POST /v1/indexes/{index}/assessments` starts (evidence/assess/
    #: launch.py). Unset = batches run in a thread of this process (`evidence serve`, local default).
    batch_state_machine_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$"
    )

    #: The batch state machine's ASL as synthesized (`make batch-asl` writes build/asl/batch.json):
    #: set, and the ARN unset, API-started batches run it on the local interpreter (Node.js and
    #: `make batch-asl-deps`), results to S3 in `results_bucket` (evidence/local_sfn.py).
    batch_local_asl: Path | None = None
    #: Where those local batches write their results (S3). Read by evidence/local_sfn.py only: the
    #: deployed chain takes its bucket from the state machine's definition, so no Lambda sets it.
    results_bucket: str | None = Field(default=None, description="local batch assessment results (S3)")

    #: Who may read or write which index (evidence/access.py): the policy as JSON, or the path
    #: of a JSON file. Unset = open (every caller, every index), the local default.
    access_policy: str | None = None

    # Limits (docs/contracts.md#limits). At least a byte: 0 or less would refuse every body or
    # document as too large (413) instead of saying the setting is wrong.
    max_body_bytes: int = Field(default=6 * 1024 * 1024, ge=1)
    max_document_bytes: int = Field(default=50 * 1024 * 1024, ge=1)

    # `evidence serve` (docs/api.md#evidence-serve): how it holds connections, and uploads.
    #: Worker processes of `evidence serve`, sharing its port and store: the retrieve is mostly
    #: Python under the GIL, so one process uses one core. "auto" (default) = one per core this
    #: process may run on, as many as fit in memory (`cli/serve_sizing.py`); 1 = one process, no
    #: supervisor; a number is taken as it is.
    serve_workers: Annotated[int, Field(ge=1, le=64)] | Literal["auto"] = "auto"
    #: Memory (MB) `serve_workers=auto` may plan for; unset = what is available now (the kernel's
    #: MemAvailable, within the container's cgroup limit).
    serve_memory_mb: int | None = Field(default=None, ge=1)
    #: Connections served at once per process; past it a new one gets 503 + Retry-After.
    serve_max_connections: int = Field(default=64, ge=1, le=10_000)
    #: A keep-alive connection with no request starting within this is closed.
    serve_idle_timeout_s: float = Field(default=15.0, gt=0, le=3600)
    #: From a request's first byte to its last header; then 408.
    serve_header_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    #: To receive a whole request body; then 408.
    serve_body_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: Niceness of writes, so that reads keep the cores (docs/api.md#evidence-serve):
    #: `evidence serve` embeds documents in one worker process at this niceness (queries stay
    #: in the server), and `evidence index` runs at it. 0 = writes embed at the caller's priority,
    #: in the request's own thread. Niceness costs nothing on an idle machine.
    write_nice: int = Field(default=10, ge=0, le=19)
    #: Documents larger than this (bytes) are indexed in the background by `evidence serve`:
    #: 202 + a status URL instead of a request that embeds for seconds or minutes (0 = always).
    async_upload_bytes: int = Field(default=64 * 1024, ge=0, le=1024 * 1024 * 1024)
    #: Budget of one background upload (parsing, embedding, writing).
    async_upload_deadline_s: float = Field(default=1800.0, gt=0, le=86_400)

    @model_validator(mode="after")
    def _no_misspelt_environment(self) -> Settings:
        # pydantic-settings ignores an env var that names no field: a typo would silently run
        # with the default (EVIDENCE_RERANKR=cohere: no reranking, no error).
        unknown = unknown_environment(os.environ)
        if unknown:
            raise ConfigurationError(
                "; ".join(
                    f"{name} is not a setting" + (f" (did you mean {close}?)" if close else "")
                    for name, close in unknown
                )
                + ". Fix or unset it: the settings are listed in docs/settings.md."
            )
        return self


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def coach_guard(settings: Settings, index: str) -> CoachGuard:
    """The index's guard, else the "*" entry, else the defaults (both guards on)."""
    return settings.coach_guards.get(index) or settings.coach_guards.get("*") or CoachGuard()


def environment_names() -> frozenset[str]:
    """Every environment variable a `Settings` field reads (upper case)."""
    return frozenset(ENV_PREFIX + name.upper() for name in Settings.model_fields)


def unknown_environment(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """(name, closest valid name or None) for each EVIDENCE_ variable that is no setting."""
    valid = environment_names()
    unknown = []
    for name in sorted(environ):
        upper = name.upper()  # pydantic-settings matches names case-insensitively
        if upper.startswith(ENV_PREFIX) and upper not in valid and upper not in NOT_SETTINGS:
            # Compared without the prefix, which every name shares and would make all look close.
            fields = sorted(v.removeprefix(ENV_PREFIX) for v in valid)
            close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), fields, n=1, cutoff=0.75)
            unknown.append((name, ENV_PREFIX + close[0] if close else None))
    return unknown


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
