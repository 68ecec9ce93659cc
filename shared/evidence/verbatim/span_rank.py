"""The span scorer of `HYBRID_FACTSPAN`: a small logistic model over a handful of span features,
its weights kept as data (`data/span_rank.json`, written by `bench/span_rank_fit.py`).

The answer to a paraphrased question usually sits in a span the old fixed blend (`0.5 * passage
cosine + 0.5 * heading-aware BM25`) ranked 2nd-50th (`bench/qa/misses.py`): wording and the
passage's meaning alone do not say *which* sentence of the passage answers. The features here add
what does, each measured leave-one-family-out by the fitting script before it earned a weight:

- `passage`: cosine of the best passage holding the span, min-max over the scope's passages
  (without vectors: their BM25);
- `bm25`: BM25 of the span read with its section heading (a table row with its caption and
  header), max-normalised over the scope;
- `coverage`: the IDF-weighted share of the question's concepts the span (with its heading) holds;
- `quantity_match`: the question asks for a figure of a kind (a duration, a dose, a count, a
  rate…) and the span states one of that kind; `form_match`: the same for the other answer types
  (a definition, a reason, a condition, a procedure) — both from the answer-type lexicon the
  refusal signal reads too (`verbatim.answer_types`, `data/answer_types.json`), cross-domain,
  naming no document;
- `row_quantity`: the span is a table row and the question asks for a figure (dosage tables
  answer "how long" and "how much");
- `row`, `bullet`: the span's kind; `length`: log of its characters over a sentence's (~150);
  its dense weight is lowered after the fit until the most answers fit the 600-character budget
  on the training families (`bench/span_rank_fit.py`, `budgeted`): short spans first when unsure;
- `span_cosine`, `heading_cosine`: the question's cosine with the span's own text and with its
  section heading (intent by meaning). Spans have no stored vectors, so these are computed at
  query time for the best `top_n` spans of the lexical model only, through the store's
  embedding cache (a span embedded once is never embedded again).

- `token_paraphrase`: the question's content words the span (with its heading) does not hold,
  read in the span's own contextual word pieces: each missing word's pieces' best cosine among
  the span's pieces (MaxSim over `MiniLMEmbedder.embed_tokens`), rarity-weighted, 1 when no word
  is missing ("breaches" read in "violation", "kidney" in "renal"). Only the `tokens` model has
  it; the word pieces of the `top_n` spans are embedded at query time, held in process by content
  hash (`TokenCache`) and, on the embedded store, on disk next to its embedding cache
  (`embed.pieces`), so a new process reads them instead of embedding them again.

- `section_first`, `section_pos`, `list_start` (structure; dense and tokens models only): the span
  opens its section (a section's first sentence often says what it is about), log(1 + the spans
  between it and its heading), the span is a table's first row or a list's first bullet. Read from
  the scope's spans in document order (`structure_columns`). Written down as a hypothesis before
  the fit and measured leave-one-family-out over seven families against feature crosses and
  boosted trees (docs/verbatim.md, "A richer span ranking function"): +6 questions of 310 offline
  with no family losing, +4 end to end (217 → 221; contract one down).

Three models, one file: `lexical` (no cosine features) ranks every span of the scope and is the
whole ranking when the index has no vectors; `dense` re-ranks the lexical model's `top_n`;
`tokens` (optional) is `dense` plus `token_paraphrase`, used instead of it when the index's
embedder has word pieces (a local MiniLM: `token_source`), else `dense` ranks.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evidence.embed.pieces import EmbedTokens, asking_with
from evidence.errors import ConfigurationError, DeadlineExceededError, EvidenceError
from evidence.rank.similarity import cosine_rows
from evidence.records import Chunk, SpanType
from evidence.verbatim.answer_types import AnswerType, answer_types
from evidence.verbatim.spans import falling

DATA = Path(__file__).parent / "data"
MODEL_FILE = DATA / "span_rank.json"

#: Features of the lexical model, then the two the dense model adds (computed for its top_n only).
LEXICAL_FEATURES = (
    "passage",
    "bm25",
    "coverage",
    "quantity_match",
    "form_match",
    "row_quantity",
    "row",
    "bullet",
    "length",
)
#: The span's place in its section (`structure_columns`): read by the dense and tokens models only.
STRUCTURE_FEATURES = ("section_first", "section_pos", "list_start")
DENSE_FEATURES = (*LEXICAL_FEATURES, "span_cosine", "heading_cosine", *STRUCTURE_FEATURES)

#: The model file's format: 1 (no `version` field) has the lexical, dense and tokens models over
#: the features above but the structure ones; 2 adds those. A file of another version is refused.
MODEL_VERSION = 2
_READABLE_VERSIONS = (1, 2)

#: A sentence's typical length in characters: `length` is log(chars / this).
_SENTENCE_CHARS = 150.0

#: Embeds texts (rows of unit vectors), the store's embedding cache in front.
Embed = Callable[[Sequence[str]], Any]


def asked_types(question: str, types: Sequence[AnswerType] | None = None) -> tuple[AnswerType, ...]:
    """The answer types a question asks for (none, one or several; the lexicon's by default)."""
    if types is None:
        return answer_types().asked(question)
    return tuple(t for t in types if t.asked_by(question))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


@dataclass(frozen=True)
class LinearModel:
    """`sigmoid(bias + sum of weight * feature)`; a feature without a weight counts 0."""

    weights: Mapping[str, float]
    bias: float = 0.0

    def score(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        return _sigmoid(self.logit(columns))

    def logit(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """`bias + sum of weight * feature`, before the sigmoid (which saturates at 1.0)."""
        n = len(next(iter(columns.values()))) if columns else 0
        z = np.full(n, self.bias, dtype=np.float64)
        for name, w in self.weights.items():
            if w and name in columns:
                z += w * columns[name]
        return z


@dataclass(frozen=True)
class SpanModel:
    lexical: LinearModel
    dense: LinearModel
    #: Spans of the lexical ranking the dense model re-ranks (their texts and headings embedded).
    top_n: int = 40
    #: Where the weights came from (the fitting script's summary), for docs and telemetry.
    fitted_on: str = ""
    #: The dense model with the token-match features, used instead of `dense` when word-piece
    #: vectors can be had (a local MiniLM); None: `dense` always.
    tokens: LinearModel | None = None

    @property
    def reads_structure(self) -> bool:
        """Whether a re-ranking model weighs a `STRUCTURE_FEATURES` column."""
        models = (self.dense, self.tokens) if self.tokens is not None else (self.dense,)
        return any(m.weights.get(f) for m in models for f in STRUCTURE_FEATURES)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SpanModel:
        """The model of a weights file; `ConfigurationError` for a format this code cannot read
        (another version, a weight on a feature it does not compute), rather than a ranking that
        silently drops what the file says."""
        version = raw.get("version", 1)
        # `True == 1` and `2.0 == 2` in Python: a version that is not an integer is no version.
        if type(version) is not int or version not in _READABLE_VERSIONS:
            raise ConfigurationError(
                f"span model file: version {version!r} is not one this code reads "
                f"({', '.join(map(str, _READABLE_VERSIONS))}); refit it with bench/span_rank_fit.py "
                "or deploy the code it was fitted for"
            )
        known = {
            "lexical": set(LEXICAL_FEATURES),
            "dense": set(DENSE_FEATURES),
            "tokens": {*DENSE_FEATURES, *TOKEN_FEATURES},
        }
        if version == 1:
            known = {k: v - set(STRUCTURE_FEATURES) for k, v in known.items()}

        def linear(name: str) -> LinearModel:
            m = raw.get(name)
            if not isinstance(m, Mapping) or not isinstance(m.get("weights"), Mapping):
                # A KeyError or TypeError from deep in here would not say which file part is wrong.
                raise ConfigurationError(
                    f"span model file (version {version}): no {name} model with a weights object"
                )
            unknown = sorted(set(m["weights"]) - known[name])
            if unknown:
                raise ConfigurationError(
                    f"span model file (version {version}): the {name} model weighs features this "
                    f"code does not compute: {', '.join(unknown)}"
                )
            return LinearModel({str(k): float(v) for k, v in m["weights"].items()}, float(m.get("bias", 0.0)))

        return cls(
            lexical=linear("lexical"),
            dense=linear("dense"),
            top_n=int(raw.get("top_n", 40)),
            fitted_on=str(raw.get("fitted_on", "")),
            tokens=linear("tokens") if raw.get("tokens") else None,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": MODEL_VERSION,
            "fitted_on": self.fitted_on,
            "top_n": self.top_n,
            "lexical": {"bias": self.lexical.bias, "weights": dict(self.lexical.weights)},
            "dense": {"bias": self.dense.bias, "weights": dict(self.dense.weights)},
        }
        if self.tokens is not None:
            out["tokens"] = {"bias": self.tokens.bias, "weights": dict(self.tokens.weights)}
        return out


def load_model(path: Path | None = None) -> SpanModel:
    """The model in `path`, by default the fitted one (`MODEL_FILE`, read once)."""
    return _read_model(path or MODEL_FILE)


@lru_cache(maxsize=4)
def _read_model(path: Path) -> SpanModel:
    return SpanModel.from_dict(json.loads(path.read_text(encoding="utf-8")))


def lexical_columns(
    spans: Sequence[Chunk],
    *,
    question: str,
    passage: Sequence[float],
    bm25: Sequence[float],
    coverage: Sequence[float],
    types: Sequence[AnswerType] | None = None,
) -> dict[str, np.ndarray]:
    """The lexical model's features for every span (`bm25` raw: max-normalised here)."""
    asked = asked_types(question, types)
    quantity = [t for t in asked if t.quantity]
    form = [t for t in asked if not t.quantity]
    top = max(bm25, default=0.0) or 1.0
    n = len(spans)
    q_match = np.zeros(n)
    f_match = np.zeros(n)
    row = np.zeros(n)
    bullet = np.zeros(n)
    length = np.zeros(n)
    for i, c in enumerate(spans):
        text = c.text
        if quantity and any(t.reads_in(text) for t in quantity):
            q_match[i] = 1.0
        if form and any(t.reads_in(text) for t in form):
            f_match[i] = 1.0
        row[i] = 1.0 if c.span_type is SpanType.TABLE_ROW else 0.0
        bullet[i] = 1.0 if c.span_type is SpanType.BULLET else 0.0
        length[i] = math.log(max(len(text), 10) / _SENTENCE_CHARS)
    return {
        "passage": np.asarray(passage, dtype=np.float64),
        "bm25": np.asarray(bm25, dtype=np.float64) / top,
        "coverage": np.asarray(coverage, dtype=np.float64),
        "quantity_match": q_match,
        "form_match": f_match,
        "row_quantity": row * (1.0 if quantity else 0.0),
        "row": row,
        "bullet": bullet,
        "length": length,
    }


def structure_columns(spans: Sequence[Chunk]) -> dict[str, np.ndarray]:
    """`STRUCTURE_FEATURES` of every span of a scope (`spans` in document order, as `RunState.spans`
    holds them): a section is a run of spans of one document under one heading."""
    n = len(spans)
    pos = np.zeros(n)
    start = np.zeros(n)
    run = 0
    for i, c in enumerate(spans):
        prev = spans[i - 1] if i else None
        same = prev is not None and prev.document_id == c.document_id and prev.section == c.section
        run = run + 1 if same else 0
        pos[i] = run
        listed = c.span_type in {SpanType.TABLE_ROW, SpanType.BULLET}
        # a list or table starts where the run of its kind under this heading starts
        start[i] = (
            1.0 if listed and not (same and prev is not None and prev.span_type is c.span_type) else 0.0
        )
    return {"section_first": (pos == 0).astype(np.float64), "section_pos": np.log1p(pos), "list_start": start}


def cosine_columns(
    spans: Sequence[Chunk], query_vector: Any, embed: Embed, *, context: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """`span_cosine` and `heading_cosine` of some spans: their texts (`context`: the texts to
    embed instead, e.g. a table row with its header) and distinct headings, embedded in one call."""
    return _cosines_and_vectors(spans, query_vector, embed, context=context)[0]


def _cosines_and_vectors(
    spans: Sequence[Chunk], query_vector: Any, embed: Embed, *, context: Sequence[str] | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """`cosine_columns`, and the spans' own vectors (rows, as embedded) it read them from."""
    texts = list(context) if context is not None else [c.text for c in spans]
    headings = list(dict.fromkeys(c.section for c in spans if c.section))
    vectors = np.asarray(embed([*texts, *headings]), dtype=np.float32)
    cos = cosine_rows(vectors, query_vector)
    span_cos = cos[: len(texts)]
    by_heading = dict(zip(headings, cos[len(texts) :].tolist(), strict=True))
    head_cos = np.asarray([by_heading.get(c.section, 0.0) for c in spans], dtype=np.float64)
    return {"span_cosine": span_cos, "heading_cosine": head_cos}, vectors[: len(texts)]


def mmr_order(logits: np.ndarray, vectors: np.ndarray, weight: float) -> list[int]:
    """Positions of a re-ranked head in maximal-marginal-relevance order: the best logit first,
    then each time the span maximising `logit - weight * (its best cosine with a span already
    picked)` (ties: the better logit, then the earlier position). `vectors`: the spans' own
    vectors, rows (normalised here). `weight` 0: the logits' order."""
    n = len(logits)
    base = sorted(range(n), key=lambda j: (-logits[j], j))
    if weight <= 0 or n < 3:
        return base
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = v / np.where(norms > 0, norms, 1.0)
    sims = v @ v.T
    picked = [base[0]]
    left = base[1:]
    closest = sims[base[0]].copy()  # each span's best cosine with a picked span
    while left:
        best = max(left, key=lambda j: (logits[j] - weight * closest[j], logits[j], -j))
        picked.append(best)
        left.remove(best)
        closest = np.maximum(closest, sims[best])
    return picked


def rank_spans(
    spans: Sequence[Chunk],
    lexical: Mapping[str, np.ndarray],
    *,
    candidates: Sequence[int],
    model: SpanModel,
    query_vector: Any = None,
    embed: Embed | None = None,
    embed_texts: Sequence[str] | None = None,
    question: str = "",
    embed_tokens: EmbedTokens | None = None,
    mmr: float = 0.0,
) -> list[tuple[float, int]]:
    """(score, position) of the candidate spans, best first: every candidate by the lexical
    model; with a query vector and an embedder, its `top_n` re-ranked by the dense model (above
    the rest, which keep their lexical order); with word-piece vectors too (`embed_tokens`) and a
    model that has them, by its `tokens` model. `mmr` above 0: the re-ranked head is read in
    maximal-marginal-relevance order (`mmr_order`, over the spans' own vectors; its scores kept
    falling in that order)."""
    if not candidates:
        return []
    idx = np.asarray(candidates, dtype=np.int64)
    lex = model.lexical.score({k: v[idx] for k, v in lexical.items()})
    order = sorted(range(len(idx)), key=lambda j: (-lex[j], int(idx[j])))
    ranked = [(float(lex[j]), int(idx[j])) for j in order]
    if query_vector is None or embed is None or model.top_n <= 0:
        return ranked
    head = [i for _, i in ranked[: model.top_n]]
    cols = {k: v[np.asarray(head, dtype=np.int64)] for k, v in lexical.items()}
    texts = [embed_texts[i] if embed_texts is not None else spans[i].text for i in head]
    # The tokens model and its word-piece embedder, when both are there and a question to read.
    tokens = (
        (model.tokens, embed_tokens)
        if model.tokens is not None and embed_tokens is not None and question
        else None
    )
    made: Mapping[str, Any] = {}
    if tokens is not None:
        try:
            # A span neither cached runs through the model once for both (a cold store).
            made = embed_once(embed, tokens[1], texts, question)
        except DeadlineExceededError:
            raise
        except EvidenceError:
            pass  # each is embedded apart below, as without it
    try:
        cosines, vectors = _cosines_and_vectors(
            [spans[i] for i in head],
            query_vector,
            reading_first(made, embed) if made else embed,
            context=[embed_texts[i] for i in head] if embed_texts is not None else None,
        )
    except DeadlineExceededError:
        raise
    except EvidenceError:
        # The embedder failed (a remote one throttled or down): the lexical ranking still
        # answers; the cosines only refine its head.
        return ranked
    cols.update(cosines)
    if model.reads_structure:
        # A walk over the whole scope (milliseconds at thousands of spans): only for a model
        # file that weighs where a span sits (version 2); the shipped version 1 does not.
        structure = structure_columns(spans)
        cols.update({k: v[np.asarray(head, dtype=np.int64)] for k, v in structure.items()})
    scorer = model.dense
    if tokens is not None:
        try:
            cols.update(token_columns(question, texts, [spans[i] for i in head], tokens[1]))
            scorer = tokens[0]
        except DeadlineExceededError:
            raise
        except EvidenceError:
            pass  # the model without the token features still ranks
    logits = scorer.logit(cols)
    dense = _sigmoid(logits)
    if mmr > 0:
        # `head` is in lexical order, so positions tie-break alike in both orders. The scores
        # keep falling in the MMR order (a span read after a likelier one scores just below it).
        order = mmr_order(logits, vectors, mmr)
        out = list(zip(falling([float(dense[j]) for j in order]), [head[j] for j in order], strict=True))
    else:
        out = [
            (float(dense[j]), head[j]) for j in sorted(range(len(head)), key=lambda j: (-dense[j], head[j]))
        ]
    # The re-ranked head stays above the tail: its dense probabilities and the tail's lexical
    # ones are on different scales, so the tail is kept below the head's last score.
    floor = out[-1][0] if out else 0.0
    return out + [(min(sc, floor) * 0.999, i) for sc, i in ranked[model.top_n :]]


# --- token-level match (MaxSim) ---------------------------------------------------------------

#: The token-match feature of the `tokens` model (`token_match`).
TOKEN_FEATURES = ("token_paraphrase",)


@dataclass(frozen=True)
class QuestionPieces:
    """The question's content word pieces (stop words and punctuation dropped): their contextual
    vectors, weights (the rarity of their word, as the refusal signal weighs concepts) and their
    word's analysed terms."""

    vectors: np.ndarray
    weights: np.ndarray
    terms: tuple[frozenset[str], ...]


def question_pieces(question: str, matrix: Any) -> QuestionPieces:
    """`matrix`: the question's piece vectors (`embed_tokens([question])[0]`, first window)."""
    from evidence.embed.tokenizer import token_offsets
    from evidence.verbatim.grounding import word_rarity
    from evidence.verbatim.scoring import terms

    m = np.asarray(matrix, dtype=np.float32)
    keep: list[int] = []
    weights: list[float] = []
    word_terms: list[frozenset[str]] = []
    for i, (a, b) in enumerate(token_offsets(question)):
        if i >= len(m):
            break
        # The piece's whole word ("##pha" of "levorphanol"): BERT splits words on spaces and
        # punctuation, so the word runs on over letters and digits.
        start, end = a, b
        while start > 0 and question[start - 1].isalnum():
            start -= 1
        while end < len(question) and question[end].isalnum():
            end += 1
        word = question[start:end]
        analysed = terms(word)
        if not analysed:
            continue
        keep.append(i)
        weights.append(_PIECE_BASE_WEIGHT + word_rarity(word))
        word_terms.append(frozenset(analysed))
    return QuestionPieces(m[keep], np.asarray(weights, dtype=np.float64), tuple(word_terms))


#: Even the commonest content word counts a little (as `grounding.concept_weights` does).
_PIECE_BASE_WEIGHT = 0.1


def piece_maxsim(q: QuestionPieces, matrix: Any) -> np.ndarray:
    """Per question piece, its best cosine among a text's pieces (0 for an empty text)."""
    m = np.asarray(matrix, dtype=np.float32)
    if not len(m) or not len(q.vectors):
        return np.zeros(len(q.vectors))
    return np.asarray((q.vectors @ m.T).max(axis=1), dtype=np.float64)


def token_match(q: QuestionPieces, sims: np.ndarray, words: AbstractSet[str]) -> dict[str, float]:
    """`token_paraphrase` of a span: over the question's content words the span (with its
    heading: `words`, their analysed terms) does not hold, the rarity-weighted mean of their
    pieces' best cosine among the span's pieces (`sims`, from `piece_maxsim`); 1 when it holds
    them all. The words it holds BM25 and coverage already count; a token cosine over them too
    mostly re-counts shared words (measured: the plain MaxSim mean adds nothing held out), while
    over the missing ones it is the paraphrase ("cancel" read in "terminate")."""
    if not len(sims):
        return dict.fromkeys(TOKEN_FEATURES, 0.0)
    missing = np.asarray([t.isdisjoint(words) for t in q.terms], dtype=np.bool_)
    if not missing.any():
        return dict.fromkeys(TOKEN_FEATURES, 1.0)
    w = q.weights[missing]
    return {"token_paraphrase": float((sims[missing] * w).sum() / w.sum())}


def token_columns(
    question: str,
    texts: Sequence[str],
    spans: Sequence[Chunk],
    embed_tokens: EmbedTokens,
) -> dict[str, np.ndarray]:
    """The token-match features of some spans (`texts`: what is embedded of each, a table row
    with its caption and header), the question and every distinct text embedded in one call."""
    from evidence.verbatim.scoring import terms

    distinct = list(dict.fromkeys([question, *texts]))
    matrices = dict(zip(distinct, asking_with(embed_tokens, question)(distinct), strict=True))
    q = question_pieces(question, matrices[question])
    out = {f: np.zeros(len(texts)) for f in TOKEN_FEATURES}
    for i, (t, c) in enumerate(zip(texts, spans, strict=True)):
        words = set(terms(c.text)) | set(terms(c.section or ""))
        for f, v in token_match(q, piece_maxsim(q, matrices[t]), words).items():
            out[f][i] = v
    return out


class PieceStore(Protocol):
    """Word-piece matrices kept outside the process by content hash (`embed.pieces.ScopedPieces`:
    the store's `pieces.sqlite3`, in the index's scope)."""

    def get_many(self, hashes: Sequence[bytes]) -> Mapping[bytes, np.ndarray]: ...

    def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None: ...


#: Runs texts whose word pieces are wanted through the model once for their document vectors and
#: pieces, caching the vectors; gives the pieces by text, of those it embedded
#: (`CachedEmbedder.embed_with_pieces`).
EmbedBoth = Callable[[Sequence[str]], Mapping[str, Any]]


class TokenCache:
    """Word-piece matrices of texts, in process, by content hash; the least recently used are
    dropped past `max_bytes`. Behind it (`through`), the store's word-piece cache, read by every
    process on the store: a text is embedded once per store, not once per process."""

    def __init__(self, embed_tokens: EmbedTokens, *, max_bytes: int = 32 << 20) -> None:
        self.embed_tokens = embed_tokens
        self.max_bytes = max_bytes
        self._held: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self.lookup(texts)

    def through(self, store: PieceStore) -> StoredTokens:
        """This cache with `store` behind it."""
        return StoredTokens(self, store)

    def lookup(
        self,
        texts: Sequence[str],
        store: PieceStore | None = None,
        *,
        unsaved: AbstractSet[str] = frozenset(),
    ) -> list[np.ndarray]:
        """Each text's matrix: held, else read from `store`, else embedded (and written to
        `store`, but for the `unsaved` texts: a question is not kept on disk)."""
        keys = [_piece_key(t) for t in texts]
        out, first = self._found(keys, store)
        todo = list(first.values())
        if todo:
            fresh = self.embed_tokens([texts[i] for i in todo])
            out.update(self._keep([texts[i] for i in todo], fresh, store, unsaved))
        return [out[k] for k in keys]

    def prime(self, texts: Sequence[str], embed_both: EmbedBoth, store: PieceStore | None = None) -> None:
        """Before `lookup` asks for `texts`: those neither held nor in `store` go to `embed_both`
        (`CachedEmbedder.embed_with_pieces`: the texts whose document vectors are not cached
        either, run through the model once, their vectors cached there), and the pieces it gives
        are held and written to `store` as `lookup` keeps what it embeds. The rest is left to
        `lookup`. What `store` holds is held here now, so `lookup` does not read it again."""
        keys = [_piece_key(t) for t in texts]
        _, first = self._found(keys, store)
        if not first:
            return
        todo = [texts[i] for i in first.values()]
        made = embed_both(todo)
        kept = [t for t in todo if t in made]
        if kept:
            self._keep(kept, [made[t] for t in kept], store, frozenset())

    def _found(
        self, keys: Sequence[bytes], store: PieceStore | None
    ) -> tuple[dict[bytes, np.ndarray], dict[bytes, int]]:
        """The matrices of `keys` held or in `store` (those read from it held now), and the first
        position of each key found in neither (a text asked twice is embedded once)."""
        out: dict[bytes, np.ndarray] = {}
        with self._lock:
            for k in keys:
                if k in self._held:
                    self._held.move_to_end(k)
                    out[k] = self._held[k]
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in out:
                first.setdefault(k, i)
        if first and store is not None:
            found = store.get_many(list(first))
            if found:
                with self._lock:
                    for k, m in found.items():
                        if k in first:
                            out[k] = m
                            self._hold(k, m)
                first = {k: i for k, i in first.items() if k not in found}
        return out, first

    def _keep(
        self,
        texts: Sequence[str],
        fresh: Sequence[Any],
        store: PieceStore | None,
        unsaved: AbstractSet[str],
    ) -> dict[bytes, np.ndarray]:
        """Hold the embedded matrices of `texts` (distinct) and write them to `store`, but the
        `unsaved` texts'; each as held, by key."""
        out: dict[bytes, np.ndarray] = {}
        made: list[tuple[bytes, np.ndarray]] = []
        with self._lock:
            for t, m in zip(texts, fresh, strict=True):
                key = _piece_key(t)
                # float16 halves the memory; a cosine needs no more (rows are unit vectors).
                held = np.asarray(m, dtype=np.float16)
                out[key] = held
                self._hold(key, held)
                if t not in unsaved:
                    made.append((key, held))
        if store is not None and made:
            store.put_many(made)
        return out

    def _hold(self, key: bytes, m: np.ndarray) -> None:
        if key not in self._held:
            self._held[key] = m
            self._bytes += m.nbytes
        while self._bytes > self.max_bytes and self._held:
            _, dropped = self._held.popitem(last=False)
            self._bytes -= dropped.nbytes


def _piece_key(text: str) -> bytes:
    """A text's key in the word-piece caches (`embed.pieces`: BLAKE2b-128 of its UTF-8)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@dataclass(frozen=True)
class StoredTokens:
    """A `TokenCache` with the store's word-piece cache behind it (`token_source`)."""

    cache: TokenCache
    store: PieceStore

    def __call__(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self.cache.lookup(texts, self.store)

    def prime(self, texts: Sequence[str], embed_both: EmbedBoth) -> None:
        """`TokenCache.prime` with the store behind it."""
        self.cache.prime(texts, embed_both, self.store)

    def asking(self, question: str) -> EmbedTokens:
        """The same, for a call that embeds `question` with its spans: the question's pieces are
        held in process, never written to the store (spans recur, questions rarely do)."""
        return partial(self.cache.lookup, store=self.store, unsaved=frozenset({question}))


@lru_cache(maxsize=4)
def _token_cache(model: Any) -> TokenCache:
    return TokenCache(model.embed_tokens)


def token_source(embedder: Any) -> EmbedTokens | None:
    """The word-piece embedder behind `embedder` (through its cache and background wrappers, to
    the in-process model), cached in process, and in the store's word-piece cache when a wrapper
    offers one (`CachedEmbedder.pieces`); None when it has none (a remote model, a lexical index)."""
    stored: Callable[[str], PieceStore | None] | None = None
    seen = 0
    while embedder is not None and seen < 8:
        if callable(getattr(embedder, "embed_tokens", None)):
            cache = _token_cache(embedder)
            key = getattr(embedder, "piece_key", None) or getattr(embedder, "model_id", "")
            store = stored(str(key)) if stored is not None else None
            return cache if store is None else cache.through(store)
        if stored is None and callable(getattr(embedder, "pieces", None)):
            stored = embedder.pieces
        embedder = getattr(embedder, "inner", None)
        seen += 1
    return None


@dataclass(frozen=True)
class IndexEmbed:
    """Embeds span texts with an index's document embedder (built on first use: a lexical-only
    index never loads a model); `tokens()` gives its word-piece embedder, if it has one."""

    build: Callable[[], Any]

    def __call__(self, texts: Sequence[str]) -> Any:
        return self.build().embed_documents(texts)

    def tokens(self) -> EmbedTokens | None:
        return token_source(self.build())

    def with_pieces(self, texts: Sequence[str], vectors: dict[str, Any] | None = None) -> Mapping[str, Any]:
        """The word pieces of those `texts` run through the index's embedder once for their
        document vectors and pieces, by text: `CachedEmbedder.embed_with_pieces` (the texts whose
        vector is not cached either; their vectors cached there); with no store cache in front
        (OpenSearch) but a model that gives both (`PieceEmbedder`), every text, its vector put in
        `vectors` for the caller to read instead of embedding it again (nothing without
        `vectors`: a vector nobody keeps would be embedded again anyway); else nothing."""
        from evidence.embed.base import PieceEmbedder
        from evidence.embed.cache import in_slices

        embedder = self.build()
        both = getattr(embedder, "embed_with_pieces", None)
        if callable(both):
            return both(texts)  # type: ignore[no-any-return]
        if vectors is None or not texts or not isinstance(embedder, PieceEmbedder):
            return {}
        out: dict[str, Any] = {}
        distinct = list(dict.fromkeys(texts))
        for part, (fresh, pieces) in in_slices(
            distinct, embedder.embed_documents_and_tokens, "embedding the spans"
        ):
            vectors.update(zip(part, fresh, strict=True))
            out.update(zip(part, pieces, strict=True))
        return out


def embed_once(embed: Any, embed_tokens: Any, texts: Sequence[str], question: str) -> dict[str, Any]:
    """Before a re-rank reads `texts`' document vectors (`cosine_columns`) and word pieces
    (`token_columns`): the texts for which neither is cached are run through the model once, both
    kept in their caches, so the two reads find them (a cold store's span ran through MiniLM
    twice). Nothing when `embed` cannot give both or `embed_tokens` keeps no pieces (each is then
    embedded apart, as before). The question's pieces are not among them (never stored). Returns
    the vectors it made that no cache keeps (no store cache in front: OpenSearch), by text, for
    the vectors' read to take (`reading_first`)."""
    made: dict[str, Any] = {}
    both = getattr(embed, "with_pieces", None)
    prime = getattr(embed_tokens, "prime", None)
    if not callable(both) or not callable(prime):
        return made
    wanted = [t for t in dict.fromkeys(texts) if t != question]
    if wanted:
        prime(wanted, partial(both, vectors=made))
    return made


def reading_first(made: Mapping[str, Any], embed: Embed) -> Embed:
    """`embed`, but a text of `made` (a vector `embed_once` already made) is read from it, not
    embedded again; the others are embedded in one call. The same rows as `embed` alone: a row
    does not depend on its batch-mates (docs/verbatim.md#one-pass)."""

    def read(texts: Sequence[str]) -> Any:
        rest = [t for t in dict.fromkeys(texts) if t not in made]
        fresh = dict(zip(rest, embed(rest), strict=True)) if rest else {}
        return np.stack([made[t] if t in made else fresh[t] for t in texts]).astype(np.float32, copy=False)

    return read


#: Reads texts' document vectors from the store's embedding cache, never embedding: a row, or
#: None for a text the cache does not hold.
CachedLookup = Callable[[Sequence[str]], Sequence[Any]]


def cache_lookup(embedder: Any) -> CachedLookup | None:
    """The cache-only read of `embedder`'s document vectors (`CachedEmbedder.cached_documents`,
    found through its wrappers), or None when there is no such cache (a backend without the
    store's embedding cache: OpenSearch)."""
    seen = 0
    while embedder is not None and seen < 8:
        read = getattr(embedder, "cached_documents", None)
        if callable(read):
            return read  # type: ignore[no-any-return]
        embedder = getattr(embedder, "inner", None)
        seen += 1
    return None


@dataclass(frozen=True)
class IndexVectors:
    """The vectors an index's document embedder has cached for texts (built on first use), None
    for a text it has not: never an embedding (`cache_lookup`)."""

    build: Callable[[], Any]

    def __call__(self, texts: Sequence[str]) -> list[Any]:
        read = cache_lookup(self.build())
        return [None] * len(texts) if read is None else list(read(texts))


@dataclass(frozen=True)
class LateVectors:
    """The late-chunked vectors an index's document embedder has cached for spans
    (`EVIDENCE_EMBED_SPANS_AT_INDEX=late`, `embed.late`; built on first use), None for a span it
    has not: a read only, never an embedding, and never the own-vector space `IndexVectors` reads.

    A span's vector is read under `late_key` (its document's content hash, given by the read
    that gave the span: `HitSpans.document_hashes`), and one not found there under the key of
    stores written before session 47 (`legacy_late_key`). A span whose document's hash is unknown
    ("") gets none."""

    build: Callable[[], Any]

    def __call__(self, spans: Sequence[Any], document_hashes: Mapping[str, str]) -> list[Any]:
        from evidence.embed.late import read_late

        embedder, seen = self.build(), 0
        while embedder is not None and seen < 8:
            read = getattr(embedder, "cached_late", None)
            if callable(read):
                return read_late(read, spans, [document_hashes.get(c.document_id, "") for c in spans])
            embedder = getattr(embedder, "inner", None)
            seen += 1
        return [None] * len(spans)


@dataclass(frozen=True)
class StoredVectors:
    """The anchor's vectors a backend keeps with its passages (`search.base.AnchorVectorStore`:
    OpenSearch, which has no embedding cache; docs/opensearch.md#anchor-vectors): one read a
    question of the late span vectors and heading vectors kept with the passages overlapping its
    hits, answering what `LateVectors` and `IndexVectors` answer from the embedded store's cache
    (the same float32 bits). Called with the question's ranking backend, index and passage hits:
    None when the backend keeps none (the embedded store: the cache readers are used), else the
    two readers (spans -> a row or None; heading texts -> a row or None). Never an embedding."""

    def __call__(
        self, backend: Any, index: str, passages: Sequence[Any]
    ) -> (
        tuple[Callable[[Sequence[Any], Mapping[str, str]], list[Any]], Callable[[Sequence[str]], list[Any]]]
        | None
    ):
        from evidence.search.base import AnchorVectorStore

        if not isinstance(backend, AnchorVectorStore):
            return None
        kept = backend.anchor_vectors(index, passages)
        if kept is None:
            return None
        spans: dict[tuple[str, int], Any] = {}
        headings: dict[str, Any] = {}
        for got in kept.values():
            spans.update(((got.document_id, q), v) for q, v in got.spans.items())
            headings.update(got.headings)

        def late(read: Sequence[Any], document_hashes: Mapping[str, str]) -> list[Any]:
            # No content hash to check: a passage document and the vectors kept on it are written
            # together, so what is read is what that passage was pooled from.
            return [spans.get((c.document_id, c.sequence)) for c in read]

        def vectors(texts: Sequence[str]) -> list[Any]:
            return [headings.get(t) for t in texts]

        return late, vectors


def tokens_of(embed: Any) -> EmbedTokens | None:
    """The word-piece embedder an `embed` callable offers (`IndexEmbed.tokens`), else None."""
    tokens = getattr(embed, "tokens", None)
    return tokens() if callable(tokens) else None
