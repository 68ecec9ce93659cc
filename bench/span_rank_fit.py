"""Fit the span scorer of `HYBRID_FACTSPAN` (`verbatim/span_rank.py`) leave-one-family-out.

Usage:
    python bench/span_rank_fit.py rows  [ROOT] --store DIR --out build/span_rows.pkl
    python bench/span_rank_fit.py relex build/span_rows.pkl --out build/span_rows_relex.pkl
    python bench/span_rank_fit.py retok build/span_rows.pkl --out build/span_rows_tok.pkl
    python bench/span_rank_fit.py fit   build/span_rows.pkl [--features a,b,...] [--top-n N]
                                        [--write shared/evidence/verbatim/data/span_rank.json]
    python bench/span_rank_fit.py ablate build/span_rows.pkl
    python bench/span_rank_fit.py eval  build/span_rows.pkl [ROOT] --store DIR [--floors on|off|both]
                                        [--chosen build/select.json]
    python bench/span_rank_fit.py select build/span_rows.pkl [--dense a,b,...] [--l2s 0.01,0.1,1]
                                        [--write shared/evidence/verbatim/data/span_rank.json]

`rows` asks every answerable question of the QA suite (ROOT, default bench/qa) with the
`verbatim` profile and records, from the cascade's own run state (the scope, the plan's terms,
the spans), the span scorer's lexical features for every span of the scope, which spans hold an
expected answer, and the question's and every span's (and heading's) embedding. Spans are
embedded with the embedder itself, not the store's cache (so the suite's later runs still pay
the query-time cost they would cold), and the seconds that took are reported: the cost of
embedding every span at indexing time.

`relex` recomputes, in rows already collected, the features the answer-type lexicon decides
(`quantity_match`, `form_match`, `row_quantity`: from each span's text, its kind and the question,
exactly as `span_rank.lexical_columns` computes them) with the lexicon as it is now. Nothing else
in a row depends on the lexicon (the scope, the spans, the candidates, BM25, coverage and the
cosines do not), so after a lexicon change this stands for `rows` without asking the suite again.

`rows` also keeps, for the shipped lexical model's best `TOKEN_HEAD` spans of each question, every
question content piece's best cosine among the span's word pieces (`span_rank.piece_maxsim`) and
the token features computed from them; `retok` recomputes the token features from those MaxSims
(no model run) after a change to how they are read. A token feature in `--dense` makes the fit
write a third model, `tokens` (`SpanModel.tokens`), the dense model without it kept as the
fallback.

`fit` fits, for each held-out family, a pairwise logistic model (a positive span against every
other candidate of its question; each question weighs the same; L2 0.01) on the other families,
and scores the held-out family offline exactly as `HYBRID_FACTSPAN` ranks: candidates, the
lexical model over all of them, the dense model over its `top_n`, repeats dropped, at most 8
spans and 1,500 characters, then "an expected answer within the first 600 characters". The
model written with `--write` is fitted on every family.

Every fit then lowers the dense model's `length` weight by the step (`BUDGET_STEPS`) that finds
the most answers within 600 characters on its own training families (`budgeted`): the pairwise
fit puts the answering span first, but the evidence is read to a character budget, where one long
span first pushes the spans after it out. `fit --no-budget` leaves it as fitted.
Of the steps tied for the most answers the smallest is taken (`--budget-tie middle`: the middle
one); the tied steps are named in the model's `fitted_on`.

`fit` also prints the answers found per held-out family and where the misses' answers are
(`misses`: in no single span, not a candidate, outside the lexical head, in the head). Experiments
of a richer ranking (docs/verbatim.md, "A richer span ranking function"): a feature named `a*b`
in `--lexical`/`--dense` is the product of two (a cross); `section_first`, `section_pos`,
`list_start` are the structure features (`span_rank.STRUCTURE_FEATURES`, now shipped in the dense
model); `--boost ROUNDS` (`--boost-depth`, `--boost-rate`, `--boost-min-hessian`) adds
gradient-boosted trees on the pairwise loss to the head scorer, offline only (`--write` refuses:
`span_rank.py` reads linear models).

`ablate` reports the held-out recall with each feature left out, and with the old fixed blend.

`select` chooses the dense (and tokens) model's features and the L2 of every fit (`fit --l2`,
default 0.01) conservatively. Candidates: `--dense` as given, without all its structure features,
without each one, each at every L2 of `--l2s`. A candidate's score on a family is the mean of
its held-out recall within 600 characters and its held-out "answer anywhere in the evidence" (a
model that wins at 600 by cutting the evidence short loses the second). The rule (`one_se`): the
best mean score over the families, then the simplest candidate (fewer features, then the stronger
penalty) short of it by at most one standard error of the per-family differences. Nested: for
each held-out family the rule runs on leave-one-family-out over the other families only, so the
held-out figure pays for the choosing. It prints every candidate's plain leave-one-family-out
figures per family (honest for a fixed candidate, such as the shipped one), the nested figures
with each fold's choice, and the choice on all families; `--write` writes that choice fitted on
all families only if its nested recall@600 is at least `--baseline`'s (the shipped candidate:
`no_structure@0.01`, the feature set the shipped five-family file was fitted with) and it does
not give shorter evidence with fewer answers in it. `eval --chosen
REPORT` asks each family end to end with the candidate the nested rule chose for it.

`eval` is the end-to-end figure: for each family, the model fitted on the other families is
written to build/ and the cascade reads it (`span_rank.MODEL_FILE` pointed at it), and the family
is asked through the service as `evidence eval --qa` asks it (every path, the grounding check,
the bounds), with the refusal floors on, off (`VerbatimCascade.floor` 0), or both. Prints
`qa_metrics` per family and pooled over the held-out families.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))
if str(HERE / "qa") not in sys.path:  # recall_gaps (bench/qa), for `cascade_runs`
    sys.path.insert(0, str(HERE / "qa"))

from recall_gaps import cascade_runs  # noqa: E402

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import answer_found, ensure_qa_index, find_qa_families, load_qa  # noqa: E402
from evidence.evaluation.qa import squash  # noqa: E402
from evidence.rank.guardrail import within_chars  # noqa: E402
from evidence.rank.similarity import cosine_rows  # noqa: E402
from evidence.verbatim.hybrid import same_text as _same_text  # noqa: E402
from evidence.verbatim.span_rank import (  # noqa: E402
    DENSE_FEATURES,
    LEXICAL_FEATURES,
    STRUCTURE_FEATURES,
    TOKEN_FEATURES,
    LinearModel,
    SpanModel,
)

MAX_SPANS, MAX_CHARS, LIMIT = 8, 1500, 600
#: A span's text as `hybrid_factspan` compares repeats; memoised: every fit asks it of the same
#: texts thousands of times.
same_text = lru_cache(maxsize=1 << 18)(_same_text)
#: Spans of the shipped lexical model's ranking whose token-match features `rows` computes: more
#: than `top_n`, so the head of every fold's lexical model is covered.
TOKEN_HEAD = 120


@dataclass(eq=False)
class Row:
    """One answerable question: its scope's spans and their features (compared by identity, so
    per-row caches can hold it as a weak key)."""

    family: str
    question: str
    answers: tuple[str, ...]
    path_used: str
    texts: list[str]
    lexical: dict[str, np.ndarray]
    candidates: np.ndarray
    positive: np.ndarray  # bool per span: holds an expected answer
    span_cosine: np.ndarray
    heading_cosine: np.ndarray
    #: Per span: its section heading and document (neighbour features; empty in old rows).
    sections: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    #: Token-match features (`span_rank.TOKEN_FEATURES`) per span, NaN where not computed (only
    #: the best `TOKEN_HEAD` spans of the shipped lexical model are; empty in old rows).
    tokens: dict[str, np.ndarray] | None = None
    #: Per computed span: each question content piece's best cosine among its pieces
    #: (`span_rank.piece_maxsim`), so `retok` can recompute the token features without the model.
    piece_sims: dict[int, np.ndarray] | None = None


# --- rows -----------------------------------------------------------------------------------------


def collect(root: Path, store: Path | None, families: Sequence[str] | None) -> dict[str, Any]:
    from evidence.model import RetrieveRequest
    from evidence.service import EvidenceService
    from evidence.verbatim.span_rank import load_model, piece_maxsim, question_pieces

    settings = Settings(store_dir=store) if store else Settings()
    service = EvidenceService(settings)
    inner = getattr(service.embedder, "inner", service.embedder)
    tokener = inner
    while not hasattr(tokener, "embed_tokens") and hasattr(tokener, "inner"):
        tokener = tokener.inner
    shipped = load_model().lexical
    token_cache: dict[str, np.ndarray] = {}
    token_seconds = 0.0
    rows: list[Row] = []
    embed_seconds = 0.0
    embedded: dict[str, np.ndarray] = {}
    span_counts: dict[str, int] = {}
    try:
        with cascade_runs() as captured:
            for family in find_qa_families(root, families):
                index, _ = ensure_qa_index(service, family)
                for rec in load_qa(family.questions):
                    if not rec["answers"]:
                        continue
                    captured.clear()
                    resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile="verbatim"))
                    if not captured:
                        continue
                    state = captured[0]
                    spans = state.spans
                    if not spans:
                        continue
                    lexical, candidates, _ = state.hybrid_features()
                    texts = [c.text for c in spans]
                    # embedded as the cascade embeds them: a table row with its caption and header
                    scoring = list(state.stats.texts)
                    todo = [
                        t
                        for t in dict.fromkeys([*scoring, *(c.section for c in spans if c.section)])
                        if t not in embedded
                    ]
                    t0 = time.perf_counter()
                    for start in range(0, len(todo), 64):
                        part = todo[start : start + 64]
                        embedded.update(
                            zip(part, np.asarray(inner.embed_documents(part), dtype=np.float32), strict=True)
                        )
                    embed_seconds += time.perf_counter() - t0
                    span_counts[family.name] = max(span_counts.get(family.name, 0), len(spans))
                    q = np.asarray(state.vector, dtype=np.float32).reshape(-1)

                    def cos(t: str, q: np.ndarray = q) -> float:
                        # the cosine the cascade's span scorer computes (`cosine_columns`)
                        return float(cosine_rows(embedded[t][None, :], q)[0])

                    # Token-match features of the shipped lexical model's best TOKEN_HEAD spans.
                    t0 = time.perf_counter()
                    qp = question_pieces(rec["question"], tokener.embed_tokens([rec["question"]])[0])
                    cand = np.asarray(candidates, dtype=np.int64)
                    zl = np.full(len(cand), shipped.bias)
                    for f, w in shipped.weights.items():
                        zl += w * lexical[f][cand]
                    head = [
                        int(cand[j]) for j in sorted(range(len(cand)), key=lambda j: (-zl[j], int(cand[j])))
                    ]
                    head = head[:TOKEN_HEAD]
                    need = [t for t in dict.fromkeys(scoring[i] for i in head) if t not in token_cache]
                    for t, m in zip(need, tokener.embed_tokens(need), strict=True):
                        token_cache[t] = np.asarray(m, dtype=np.float16)
                    sims = {i: piece_maxsim(qp, token_cache[scoring[i]]) for i in head}
                    tok = token_values(qp, sims, spans)
                    token_seconds += time.perf_counter() - t0
                    wanted = [squash(a) for a in rec["answers"]]
                    rows.append(
                        Row(
                            family=family.name,
                            question=rec["question"],
                            answers=tuple(rec["answers"]),
                            path_used=resp.telemetry.path_used,
                            texts=texts,
                            lexical=lexical,
                            candidates=np.asarray(candidates, dtype=np.int64),
                            positive=np.asarray([any(w in squash(t) for w in wanted) for t in texts]),
                            span_cosine=np.asarray([cos(t) for t in scoring]),
                            heading_cosine=np.asarray([cos(c.section) if c.section else 0.0 for c in spans]),
                            sections=tuple(c.section or "" for c in spans),
                            documents=tuple(c.document_id for c in spans),
                            tokens=tok,
                            piece_sims=sims,
                        )
                    )
                    print(f"{family.name}: {len(rows)} rows", file=sys.stderr, end="\r")
    finally:
        service.close()
    return {
        "rows": rows,
        "embedded_texts": len(embedded),
        "embed_seconds": round(embed_seconds, 1),
        "token_seconds": round(token_seconds, 1),
        "token_texts": len(token_cache),
        "spans_per_family": span_counts,
    }


def token_values(q: Any, sims: dict[int, np.ndarray], spans: Sequence[Any]) -> dict[str, np.ndarray]:
    """The token features (`span_rank.TOKEN_FEATURES`) of the spans in `sims`, NaN elsewhere,
    exactly as `span_rank.token_columns` computes them at query time."""
    from evidence.verbatim.scoring import terms
    from evidence.verbatim.span_rank import TOKEN_FEATURES, token_match

    out = {f: np.full(len(spans), np.nan) for f in TOKEN_FEATURES}
    for i, sim in sims.items():
        c = spans[i]
        words = set(terms(c.text)) | set(terms(c.section or ""))
        for f, v in token_match(q, sim, words).items():
            out[f][i] = v
    return out


def retok(rows: Sequence[Row]) -> list[Row]:
    """`rows` with the token features recomputed from their stored per-piece MaxSims (the
    question's pieces re-read with the tokenizer; no model run)."""
    from types import SimpleNamespace

    from evidence.verbatim.span_rank import question_pieces

    out = []
    for row in rows:
        assert row.piece_sims is not None, "rows without token MaxSims: collect them again"
        # The vectors are not needed here, only the pieces' weights and words.
        q = question_pieces(row.question, np.zeros((512, 1), dtype=np.float32))
        spans = [SimpleNamespace(text=t, section=sec) for t, sec in zip(row.texts, row.sections, strict=True)]
        sims = {i: (v[0] if isinstance(v, tuple) else v) for i, v in row.piece_sims.items()}
        out.append(replace(row, tokens=token_values(q, sims, spans), piece_sims=sims))
    return out


def relex(rows: Sequence[Row]) -> list[Row]:
    """`rows` with the lexicon-decided features recomputed from the current lexicon."""
    from evidence.verbatim.span_rank import asked_types

    out = []
    for row in rows:
        asked = asked_types(row.question)
        quantity = [t for t in asked if t.quantity]
        form = [t for t in asked if not t.quantity]
        q = np.asarray([1.0 if any(t.reads_in(x) for t in quantity) else 0.0 for x in row.texts])
        f = np.asarray([1.0 if any(t.reads_in(x) for t in form) else 0.0 for x in row.texts])
        lexical = dict(row.lexical)
        lexical["quantity_match"], lexical["form_match"] = q, f
        lexical["row_quantity"] = row.lexical["row"] * (1.0 if quantity else 0.0)
        out.append(replace(row, lexical=lexical))
    return out


# --- fitting --------------------------------------------------------------------------------------


#: Structure features per row, held weakly by the row itself (`Row` compares by identity): an
#: entry goes with its row, where an `id(row)` key could be reused by a later row after GC.
_POSITIONS: WeakKeyDictionary[Row, dict[str, np.ndarray]] = WeakKeyDictionary()


def positions(row: Row) -> dict[str, np.ndarray]:
    """`span_rank.STRUCTURE_FEATURES` of every span of `row`, computed as the cascade computes
    them (`structure_columns`) from the spans' documents, headings and kinds."""
    from types import SimpleNamespace

    from evidence.records import SpanType
    from evidence.verbatim.span_rank import structure_columns

    got = _POSITIONS.get(row)
    if got is None:
        kinds = [
            SpanType.TABLE_ROW if r else SpanType.BULLET if b else SpanType.SENTENCE
            for r, b in zip(row.lexical["row"], row.lexical["bullet"], strict=True)
        ]
        spans = [
            SimpleNamespace(document_id=d, section=sec, span_type=k)
            for d, sec, k in zip(row.documents, row.sections, kinds, strict=True)
        ]
        got = _POSITIONS[row] = structure_columns(spans)  # type: ignore[arg-type]
    return got


def column(row: Row, f: str, idx: np.ndarray) -> np.ndarray:
    """One feature of the spans `idx`; `a*b` is the product of two (a feature cross)."""
    if "*" in f:
        a, b = f.split("*", 1)
        return np.asarray(column(row, a, idx) * column(row, b, idx), dtype=np.float64)
    if f == "span_cosine":
        values = row.span_cosine
    elif f == "heading_cosine":
        values = row.heading_cosine
    elif f in TOKEN_FEATURES:
        assert row.tokens is not None, "rows without token features: collect them again"
        values = np.nan_to_num(row.tokens[f], nan=0.0)
    elif f in STRUCTURE_FEATURES:
        values = positions(row)[f]
    else:
        values = row.lexical[f]
    return np.asarray(values[idx], dtype=np.float64)


def columns(row: Row, features: Sequence[str], idx: np.ndarray) -> np.ndarray:
    cols = [column(row, f, idx) for f in features]
    return np.stack(cols, axis=1) if cols else np.zeros((len(idx), 0))


# --- boosted trees on top of the linear dense model (experiment, `--boost ROUNDS`) -------------------

#: A regression tree: a leaf value, or (feature, threshold, tree at <= threshold, tree above).
Tree = float | tuple[int, float, Any, Any]


@dataclass(frozen=True)
class BoostSpec:
    rounds: int = 0
    depth: int = 2
    rate: float = 0.1
    #: L2 on leaf values and the least hessian a leaf must hold (in question-weighted pair units:
    #: every question's pairs weigh 1 in all, so a leaf needs several questions behind it).
    l2: float = 1.0
    min_hessian: float = 2.0
    thresholds: int = 16


@dataclass(frozen=True)
class Boosted(SpanModel):
    """A SpanModel whose head scorer adds a sum of trees over `tree_features` to its logit."""

    trees: tuple[Any, ...] = ()
    tree_features: tuple[str, ...] = ()


def tree_value(tree: Tree, x: np.ndarray) -> np.ndarray:
    if not isinstance(tree, tuple):
        return np.full(len(x), float(tree))
    f, t, lo, hi = tree
    m = x[:, f] <= t
    out = np.empty(len(x))
    out[m] = tree_value(lo, x[m])
    out[~m] = tree_value(hi, x[~m])
    return out


def grow(
    x: np.ndarray, g: np.ndarray, h: np.ndarray, depth: int, *, spec: BoostSpec, cuts: list[np.ndarray]
) -> Tree:
    """The Newton step of the pairwise loss as a tree (XGBoost's gain), leaves scaled by the rate."""
    big_g, big_h = float(g.sum()), float(h.sum())
    leaf = -big_g / (big_h + spec.l2) * spec.rate
    if depth == 0 or big_h < 2 * spec.min_hessian:
        return leaf
    parent = big_g * big_g / (big_h + spec.l2)
    best, split = 1e-9, None
    for f, ts in enumerate(cuts):
        for t in ts:
            m = x[:, f] <= t
            gl, hl = float(g[m].sum()), float(h[m].sum())
            hr = big_h - hl
            if hl < spec.min_hessian or hr < spec.min_hessian:
                continue
            gain = gl * gl / (hl + spec.l2) + (big_g - gl) ** 2 / (hr + spec.l2) - parent
            if gain > best:
                best, split = gain, (f, float(t))
    if split is None:
        return leaf
    f, t = split
    m = x[:, f] <= t
    return (
        f,
        t,
        grow(x[m], g[m], h[m], depth - 1, spec=spec, cuts=cuts),
        grow(x[~m], g[~m], h[~m], depth - 1, spec=spec, cuts=cuts),
    )


def boost(
    train: Sequence[Row],
    heads: Sequence[np.ndarray],
    features: Sequence[str],
    base: LinearModel,
    spec: BoostSpec,
) -> tuple[Tree, ...]:
    """Trees fitted by gradient boosting of the pairwise logistic loss (each question's pairs
    weigh 1 in all, as `pairs`), starting from the linear head scorer `base`."""
    xs, pi, ni, pw = [], [], [], []
    offset = 0
    for row, head in zip(train, heads, strict=True):
        pos = np.flatnonzero(row.positive[head])
        neg = np.flatnonzero(~row.positive[head])
        if not len(pos) or not len(neg):
            continue
        xs.append(columns(row, features, head))
        a, b = np.meshgrid(pos, neg, indexing="ij")
        pi.append(a.ravel() + offset)
        ni.append(b.ravel() + offset)
        pw.append(np.full(a.size, 1.0 / a.size))
        offset += len(head)
    if not xs:
        return ()
    x = np.concatenate(xs)
    p, n, w = np.concatenate(pi), np.concatenate(ni), np.concatenate(pw)
    s = base.bias + x @ np.asarray([base.weights.get(f, 0.0) for f in features])
    cuts = []
    for f in range(x.shape[1]):
        values = np.unique(x[:, f])
        if len(values) > spec.thresholds:
            values = np.unique(np.quantile(x[:, f], np.linspace(0, 1, spec.thresholds + 2)[1:-1]))
        cuts.append(values[:-1] if len(values) > 1 and values[-1] == x[:, f].max() else values)
    trees: list[Tree] = []
    for _ in range(spec.rounds):
        sig = 1.0 / (1.0 + np.exp(s[p] - s[n]))  # d loss / d (s_p - s_n) = -sig
        hw = w * sig * (1 - sig)
        g = np.bincount(p, -w * sig, len(x)) + np.bincount(n, w * sig, len(x))
        h = np.bincount(p, hw, len(x)) + np.bincount(n, hw, len(x))
        tree = grow(x, g, h, spec.depth, spec=spec, cuts=cuts)
        trees.append(tree)
        s = s + tree_value(tree, x)
    return tuple(trees)


#: The L2 penalty of every pairwise fit (each question's pairs weigh 1 in all), `--l2`.
L2 = 0.01


def fit_pairwise(diffs: np.ndarray, weights: np.ndarray, l2: float = L2, iters: int = 30) -> np.ndarray:
    """Logistic regression without intercept on pair differences (positive - negative), Newton."""
    d = diffs.shape[1]
    w = np.zeros(d)
    for _ in range(iters):
        z = diffs @ w
        p = 1.0 / (1.0 + np.exp(-z))
        grad = -(diffs * (weights * (1 - p))[:, None]).sum(axis=0) + l2 * w
        h = (diffs * (weights * p * (1 - p))[:, None]).T @ diffs + l2 * np.eye(d)
        step = np.linalg.solve(h, grad)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w


def pairs(
    rows: Sequence[Row], features: Sequence[str], pools: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    diffs, weights = [], []
    for row, pool in zip(rows, pools, strict=True):
        pos = pool[row.positive[pool]]
        neg = pool[~row.positive[pool]]
        if not len(pos) or not len(neg):
            continue
        xp, xn = columns(row, features, pos), columns(row, features, neg)
        d = (xp[:, None, :] - xn[None, :, :]).reshape(-1, len(features))
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    if not diffs:
        return np.zeros((0, len(features))), np.zeros(0)
    return np.concatenate(diffs), np.concatenate(weights)


def lexical_order(row: Row, model: LinearModel) -> np.ndarray:
    cand = row.candidates
    z = np.full(len(cand), model.bias)
    for f, w in model.weights.items():
        z += w * (row.lexical[f][cand] if f in row.lexical else 0.0)
    # best first, ties by span index (np.lexsort: the last key is the primary one)
    return cand[np.lexsort((cand, -z))]


def ranked(row: Row, model: SpanModel, order: np.ndarray | None = None) -> list[int]:
    """The spans of `row` in `model`'s order (`order`: the lexical model's, when already known)."""
    if order is None:
        order = lexical_order(row, model.lexical)
    if model.top_n <= 0:
        return [int(i) for i in order]
    head = order[: model.top_n]
    scorer = model.tokens if model.tokens is not None else model.dense
    feats = list(scorer.weights)
    x = columns(row, feats, head)
    z = scorer.bias + x @ np.asarray([scorer.weights[f] for f in feats])
    if isinstance(model, Boosted) and model.trees:
        xt = columns(row, model.tree_features, head)
        for tree in model.trees:
            z = z + tree_value(tree, xt)
    return head_first(order, model.top_n, z)


def head_first(order: np.ndarray, top_n: int, z: np.ndarray) -> list[int]:
    """`order`'s first `top_n` spans sorted by their scores `z` (ties by span index), then the rest."""
    head = order[:top_n]
    return [*head[np.lexsort((head, -z))].tolist(), *order[top_n:].tolist()]


def evidence(row: Row, order: Sequence[int]) -> list[str]:
    """As `hybrid_factspan` then the cascade's bound: 8 spans, repeats dropped, then the first
    that fit 1,500 characters (stopping at the first that would overflow)."""
    picked: list[str] = []
    seen: set[str] = set()
    for i in order:
        if len(picked) >= MAX_SPANS:
            break
        key = same_text(row.texts[i])
        if key not in seen:
            seen.add(key)
            picked.append(row.texts[i])
    n, _ = within_chars([len(t) for t in picked], MAX_CHARS)
    return picked[:n]


def found(row: Row, model: SpanModel, order: np.ndarray | None = None) -> bool:
    return answer_found(evidence(row, ranked(row, model, order)), row.answers, LIMIT)


def fit_lexical(train: Sequence[Row], lexical: Sequence[str], l2: float = L2) -> LinearModel:
    """The lexical model: pairwise over every candidate of every training question."""
    d, w = pairs(train, lexical, [r.candidates for r in train])
    lw = fit_pairwise(d, w, l2) if len(d) else np.zeros(len(lexical))
    return LinearModel({f: round(float(x), 4) for f, x in zip(lexical, lw, strict=True)})


def fit_model(
    train: Sequence[Row],
    lexical: Sequence[str],
    dense: Sequence[str],
    top_n: int,
    note: str,
    *,
    budget: bool = True,
    tie: str = "smallest",
    boosting: BoostSpec | None = None,
    l2: float = L2,
    lex: LinearModel | None = None,
    scored_only: bool = False,
) -> SpanModel:
    """The span model fitted on `train` (`lex`: its lexical model, when already fitted on it;
    `scored_only`: without the dense model kept as the tokens model's fallback, which offline
    scoring never reads, to halve `select`'s fits)."""
    if lex is None:
        lex = fit_lexical(train, lexical, l2)
    if top_n <= 0 or not dense:
        return SpanModel(lex, lex, top_n=0, fitted_on=note)
    heads = [lexical_order(r, lex)[:top_n] for r in train]

    def dense_fit(features: Sequence[str], fitted_on: str) -> SpanModel:
        d, w = pairs(train, features, heads)
        dw = fit_pairwise(d, w, l2) if len(d) else np.zeros(len(features))
        model = SpanModel(
            lex,
            LinearModel({f: round(float(x), 4) for f, x in zip(features, dw, strict=True)}),
            top_n,
            fitted_on,
        )
        if boosting is not None and boosting.rounds > 0:
            trees = boost(train, heads, features, model.dense, boosting)
            model = Boosted(lex, model.dense, top_n, fitted_on, trees=trees, tree_features=tuple(features))
        return budgeted(model, train, tie) if budget and "length" in features else model

    # The token-match features make a second dense model (`SpanModel.tokens`): the one without
    # them still ranks where no word-piece vectors can be had.
    plain = [f for f in dense if f not in TOKEN_FEATURES]
    if scored_only and len(plain) < len(dense):
        only = dense_fit(dense, note)
        return replace(only, tokens=only.dense)
    model = dense_fit(plain, note)
    if len(plain) == len(dense):
        return model
    with_tokens = dense_fit(dense, "")
    return replace(
        with_tokens,
        dense=model.dense,
        tokens=with_tokens.dense,
        fitted_on=f"{model.fitted_on}; tokens model (+{','.join(TOKEN_FEATURES)}):"
        + with_tokens.fitted_on.removeprefix(";").replace("dense length", "length"),
    )


#: How much the dense model's `length` weight may be lowered (`budgeted`).
BUDGET_STEPS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
#: Which of the steps tied for the most answers `budgeted` takes: the smallest (the shipped rule)
#: or the middle one (the lower of two middles), `--budget-tie`.
BUDGET_TIES = ("smallest", "middle")


def budgeted(model: SpanModel, train: Sequence[Row], tie: str = "smallest") -> SpanModel:
    """The model with its dense `length` weight lowered by the step of `BUDGET_STEPS` that finds
    the most answers within 600 characters on `train` (of the steps tied for the best, the
    smallest, or with `tie="middle"` the middle one; the tied steps are named in `fitted_on`).

    The pairwise fit orders the answering span first; the evidence is read to a character budget,
    so a long span first costs the spans after it their place. Lowering the length weight is the
    same as ranking by the dense logit minus `step * log(length)`: short spans first when the
    model is unsure. One scalar, chosen on the training families only."""
    weights = dict(model.dense.weights)
    counts: dict[float, int] = {}
    # The lexical order, so the head and its features, are the same for every step.
    orders = [lexical_order(r, model.lexical) for r in train]
    linear = not isinstance(model, Boosted) and model.tokens is None and model.top_n > 0
    feats = list(weights)
    heads = (
        [columns(r, feats, o[: model.top_n]) for r, o in zip(train, orders, strict=True)] if linear else []
    )
    for step in BUDGET_STEPS:
        trial = replace(
            model, dense=LinearModel(weights | {"length": weights["length"] - step}, model.dense.bias)
        )
        if linear:
            w = np.asarray([trial.dense.weights[f] for f in feats])
            counts[step] = sum(
                answer_found(
                    evidence(r, head_first(o, model.top_n, trial.dense.bias + x @ w)), r.answers, LIMIT
                )
                for r, o, x in zip(train, orders, heads, strict=True)
            )
        else:
            counts[step] = sum(found(r, trial, o) for r, o in zip(train, orders, strict=True))
    top = max(counts.values())
    tied = [s for s in BUDGET_STEPS if counts[s] == top]
    step = tied[0] if tie == "smallest" else tied[(len(tied) - 1) // 2]
    weights["length"] = round(weights["length"] - step, 4)
    note = f"{model.fitted_on}; dense length weight lowered by {step} for the 600-character budget"
    if len(tied) > 1:
        note += f" (tied steps {', '.join(map(str, tied))}: {top} answers each; the {tie} taken)"
    return replace(model, dense=LinearModel(weights, model.dense.bias), fitted_on=note)


def lofo(
    rows: Sequence[Row],
    lexical: Sequence[str],
    dense: Sequence[str],
    top_n: int,
    *,
    budget: bool = True,
    tie: str = "smallest",
    boosting: BoostSpec | None = None,
    l2: float = L2,
) -> dict[str, Any]:
    families = list(dict.fromkeys(r.family for r in rows))
    out: dict[str, Any] = {}
    hits = total = 0
    for fam in families:
        train = [r for r in rows if r.family != fam]
        test = [r for r in rows if r.family == fam]
        model = fit_model(
            train, lexical, dense, top_n, f"all but {fam}", budget=budget, tie=tie, boosting=boosting, l2=l2
        )
        got = sum(found(r, model) for r in test)
        hits += got
        total += len(test)
        out[fam] = {
            "recall": round(got / len(test), 4),
            "found": got,
            "n": len(test),
            "misses": misses(test, model),
            "model": model.to_dict(),
        }
    out["pooled"] = {"recall": round(hits / total, 4), "n": total}
    return out


def misses(test: Sequence[Row], model: SpanModel) -> dict[str, int]:
    """Where the held-out misses' answers are: in no span of the scope (the answer crosses spans
    or the scope is wrong), in a span that is not a candidate, a candidate outside the lexical
    model's `top_n` head, or in the head (a reordering could reach these), and of those, in the
    first 8 spans the evidence is cut from but beyond 600 characters."""
    out = {"no_span": 0, "not_candidate": 0, "outside_head": 0, "in_head": 0, "in_head_ranked_8": 0}
    for row in test:
        if found(row, model):
            continue
        if not row.positive.any():
            out["no_span"] += 1
            continue
        if not row.positive[row.candidates].any():
            out["not_candidate"] += 1
            continue
        head = lexical_order(row, model.lexical)[: model.top_n or None]
        if not row.positive[head].any():
            out["outside_head"] += 1
            continue
        out["in_head"] += 1
        if row.positive[np.asarray(ranked(row, model)[:MAX_SPANS], dtype=np.int64)].any():
            out["in_head_ranked_8"] += 1
    return out


OLD = SpanModel(
    LinearModel({"passage": 0.5, "bm25": 0.5}), LinearModel({"passage": 0.5, "bm25": 0.5}), 0, "old blend"
)


def fixed(rows: Sequence[Row], model: SpanModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fam in dict.fromkeys(r.family for r in rows):
        test = [r for r in rows if r.family == fam]
        out[fam] = round(sum(found(r, model) for r in test) / len(test), 4)
    out["pooled"] = round(sum(found(r, model) for r in rows) / len(rows), 4)
    return out


# --- select: the feature set and L2 chosen by nested leave-one-family-out and the 1-SE rule --------


#: The L2 strengths `select` tries (each question's pairs weigh 1 in all, so 1.0 weighs a unit
#: weight's square as much as half a question's pairs; 0.01 is the shipped, nearly none).
SELECT_L2 = (0.01, 0.1, 1.0)


@dataclass(frozen=True)
class Candidate:
    """One choice `select` weighs: the dense (and tokens) model's features and the L2 of every fit."""

    name: str
    dense: tuple[str, ...]
    l2: float

    @property
    def label(self) -> str:
        return f"{self.name}@{self.l2:g}"

    @property
    def simplicity(self) -> tuple[int, float]:
        """Smaller is simpler: fewer features, then a stronger penalty."""
        return (len(self.dense), -self.l2)


def select_candidates(dense: Sequence[str], l2s: Sequence[float]) -> list[Candidate]:
    """`dense` as given, without all its structure features (the feature set before them), and
    without each one (the ablations), each at every L2 of `l2s`."""
    sets: dict[str, tuple[str, ...]] = {"all": tuple(dense)}
    structure = [f for f in dense if f in STRUCTURE_FEATURES]
    if structure:
        sets["no_structure"] = tuple(f for f in dense if f not in STRUCTURE_FEATURES)
        for s in structure:
            sets[f"no_{s}"] = tuple(f for f in dense if f != s)
    return [Candidate(name, feats, l2) for name, feats in sets.items() for l2 in l2s]


def outcome(row: Row, model: SpanModel) -> tuple[bool, bool, int]:
    """One held-out question: an answer within 600 characters, an answer anywhere in the
    evidence (at most 8 spans, 1,500 characters), and the evidence's characters."""
    ev = evidence(row, ranked(row, model))
    joined = squash("\n".join(ev))
    return answer_found(ev, row.answers, LIMIT), answer_found(ev, row.answers, len(joined)), len(joined)


def summary(got: Sequence[tuple[bool, bool, int]]) -> dict[str, float]:
    """Recall within 600 characters, answer anywhere in the evidence, their mean (the score
    `select` ranks by) and the mean evidence characters of some outcomes."""
    n = max(len(got), 1)
    r600 = sum(g[0] for g in got) / n
    anywhere = sum(g[1] for g in got) / n
    return {
        "recall_600": round(r600, 4),
        "in_evidence": round(anywhere, 4),
        "score": round((r600 + anywhere) / 2, 4),
        "chars": round(sum(g[2] for g in got) / n, 1),
        "n": len(got),
    }


class Fits:
    """Models fitted per (training families, candidate), the lexical model per (families, L2):
    nested leave-one-family-out fits the same family subsets many times over."""

    def __init__(self, rows: Sequence[Row], lexical: Sequence[str], top_n: int, tie: str) -> None:
        self.rows, self.lexical, self.top_n, self.tie = rows, list(lexical), top_n, tie
        self._lex: dict[tuple[frozenset[str], float], LinearModel] = {}
        self._models: dict[tuple[frozenset[str], Candidate], SpanModel] = {}

    def model(self, families: frozenset[str], cand: Candidate, note: str = "") -> SpanModel:
        key = (families, cand)
        if key not in self._models:
            train = [r for r in self.rows if r.family in families]
            lex = self._lex.get((families, cand.l2))
            if lex is None:
                lex = self._lex[(families, cand.l2)] = fit_lexical(train, self.lexical, cand.l2)
            self._models[key] = fit_model(
                train,
                self.lexical,
                cand.dense,
                self.top_n,
                note,
                tie=self.tie,
                l2=cand.l2,
                lex=lex,
                scored_only=True,
            )
        return self._models[key]

    def held_out(self, families: Sequence[str], cand: Candidate) -> dict[str, list[tuple[bool, bool, int]]]:
        """Leave-one-family-out among `families`: each one's outcomes under the model fitted on the others."""
        out = {}
        for fam in families:
            model = self.model(frozenset(families) - {fam}, cand)
            out[fam] = [outcome(r, model) for r in self.rows if r.family == fam]
        return out


def one_se(table: dict[Candidate, dict[str, dict[str, float]]]) -> tuple[Candidate, dict[str, Any]]:
    """The 1-SE rule over per-family held-out scores: the candidate of the best mean score, then
    the simplest (`Candidate.simplicity`) whose mean falls short of it by at most one standard
    error of the per-family differences (paired by family: the families differ far more from each
    other than the candidates do). Ties in simplicity go to the better mean."""
    fams = sorted(next(iter(table.values())))
    score = {c: np.asarray([table[c][f]["score"] for f in fams]) for c in table}
    best = max(table, key=lambda c: (score[c].mean(), [-x for x in c.simplicity]))
    within = {}
    for c in table:
        diff = score[best] - score[c]
        se = float(diff.std(ddof=1) / np.sqrt(len(fams))) if len(fams) > 1 else 0.0
        if diff.mean() <= se + 1e-12:
            within[c] = (round(float(diff.mean()), 4), round(se, 4))
    chosen = min(within, key=lambda c: (c.simplicity, -score[c].mean()))
    return chosen, {
        "best": best.label,
        "best_score": round(float(score[best].mean()), 4),
        "within_1se": {c.label: {"short_by": v[0], "se": v[1]} for c, v in within.items()},
        "chosen": chosen.label,
    }


def select(
    rows: Sequence[Row],
    lexical: Sequence[str],
    dense: Sequence[str],
    top_n: int,
    *,
    l2s: Sequence[float],
    tie: str,
) -> dict[str, Any]:
    """Nested leave-one-family-out: for each held-out family, every candidate is scored by
    leave-one-family-out on the other families only, the 1-SE rule (`one_se`) chooses, the choice
    is fitted on those families and the held-out family measured. So the held-out figure counts the
    choosing too (`nested_best`: the same with the best-score rule, no 1-SE). Also each
    candidate's plain leave-one-family-out figures (no choosing: honest for a fixed candidate, such
    as the shipped one), and the choice the rule makes on all families (the model `--write` writes)."""
    fams = list(dict.fromkeys(r.family for r in rows))
    cands = select_candidates(dense, l2s)
    fits = Fits(rows, lexical, top_n, tie)
    plain: dict[Candidate, dict[str, list[tuple[bool, bool, int]]]] = {}
    for c in cands:
        plain[c] = fits.held_out(fams, c)
        print(f"lofo {c.label}: {summary([o for v in plain[c].values() for o in v])}", file=sys.stderr)
    nested: dict[str, Any] = {}
    greedy: dict[str, Any] = {}
    pooled: list[tuple[bool, bool, int]] = []
    pooled_greedy: list[tuple[bool, bool, int]] = []
    for outer in fams:
        inner = [f for f in fams if f != outer]
        table = {c: {f: summary(v) for f, v in fits.held_out(inner, c).items()} for c in cands}
        chosen, why = one_se(table)
        test = [r for r in rows if r.family == outer]
        model = fits.model(frozenset(inner), chosen)
        got = [outcome(r, model) for r in test]
        pooled.extend(got)
        nested[outer] = summary(got) | {"chosen": chosen.label, "rule": why}
        # The rule the shipped model was chosen by, for comparison: the best score, no 1-SE.
        best = next(c for c in cands if c.label == why["best"])
        got = [outcome(r, fits.model(frozenset(inner), best)) for r in test]
        pooled_greedy.extend(got)
        greedy[outer] = summary(got) | {"chosen": best.label}
        print(f"nested {outer}: {nested[outer]['chosen']} {nested[outer]}", file=sys.stderr)
    chosen, why = one_se({c: {f: summary(v) for f, v in plain[c].items()} for c in cands})
    return {
        "candidates": {
            c.label: {f: summary(v) for f, v in plain[c].items()}
            | {"pooled": summary([o for v in plain[c].values() for o in v])}
            for c in cands
        },
        "nested": nested | {"pooled": summary(pooled)},
        "nested_best": greedy | {"pooled": summary(pooled_greedy)},
        "chosen_on_all": why,
        "chosen": chosen,
    }


def end_to_end(
    rows: Sequence[Row],
    *,
    root: Path,
    store: Path | None,
    lexical: Sequence[str],
    dense: Sequence[str],
    top_n: int,
    floors: Sequence[bool],
    model_dir: Path,
    fixed_model: Path | None = None,
    budget: bool = True,
    tie: str = "smallest",
    l2: float = L2,
    chosen: Mapping[str, Candidate] | None = None,
) -> dict[str, Any]:
    """`chosen`: per held-out family, the candidate (features, L2) `select`'s nested rule chose for
    it on the other families, fitted instead of `dense` and `l2`."""
    from evidence.evaluation import ask_family, qa_metrics
    from evidence.service import EvidenceService
    from evidence.verbatim import span_rank
    from evidence.verbatim.cascade import VerbatimCascade

    settings = Settings(store_dir=store) if store else Settings()
    service = EvidenceService(settings)
    original_file, original_floor = span_rank.MODEL_FILE, VerbatimCascade.floor
    out: dict[str, Any] = {}
    model_dir.mkdir(parents=True, exist_ok=True)
    try:
        for on in floors:
            key = "floors_on" if on else "floors_off"
            outcomes: list[Any] = []
            per: dict[str, Any] = {}
            for family in find_qa_families(root, None):
                if fixed_model is not None:
                    path = fixed_model
                else:
                    train = [r for r in rows if r.family != family.name]
                    pick = chosen.get(family.name) if chosen else None
                    model = fit_model(
                        train,
                        lexical,
                        pick.dense if pick else dense,
                        top_n,
                        f"all but {family.name}" + (f" ({pick.label}, chosen on them)" if pick else ""),
                        budget=budget,
                        tie=tie,
                        l2=pick.l2 if pick else l2,
                    )
                    path = model_dir / f"span_rank_without_{family.name}.json"
                    path.write_text(json.dumps(model.to_dict(), indent=2) + "\n")
                span_rank.MODEL_FILE = path
                if not on:
                    VerbatimCascade.floor = lambda self, p: 0.0  # type: ignore[method-assign,assignment]
                index, _ = ensure_qa_index(service, family)
                got = ask_family(service, family, index=index, profile="verbatim")
                VerbatimCascade.floor = original_floor  # type: ignore[method-assign]
                per[family.name] = qa_metrics(got)
                outcomes.extend(got)
                print(f"{key} {family.name}: {per[family.name]['answer_recall_600']}", file=sys.stderr)
            out[key] = {"families": per, "held_out": qa_metrics(outcomes)}
    finally:
        span_rank.MODEL_FILE = original_file
        VerbatimCascade.floor = original_floor  # type: ignore[method-assign]
        service.close()
    return out


def print_misses(report: dict[str, Any]) -> None:
    """Answers found per held-out family, and the misses by kind (`misses`), per family and pooled."""
    fams = [k for k in report if k != "pooled"]
    print(json.dumps({"found": {k: f"{report[k]['found']}/{report[k]['n']}" for k in fams}}))
    pooled: dict[str, int] = {}
    for k in fams:
        for m, c in report[k]["misses"].items():
            pooled[m] = pooled.get(m, 0) + c
    print(json.dumps({"misses": {k: report[k]["misses"] for k in fams} | {"pooled": pooled}}))


def boost_spec(ap: argparse.ArgumentParser, args: argparse.Namespace) -> BoostSpec:
    """The `--boost` options; refused where a model would be written or asked end to end."""
    if args.boost and (args.cmd == "eval" or args.write):
        ap.error(
            "--boost is an offline experiment: span_rank.py reads linear models only (no --write, no eval)"
        )
    return BoostSpec(
        rounds=args.boost, depth=args.boost_depth, rate=args.boost_rate, min_hessian=args.boost_min_hessian
    )


def nested_choices(report: Path, dense: Sequence[str]) -> dict[str, Candidate]:
    """Per family, the candidate a `select` report's nested rule chose (its label, name@L2, read
    against the candidates of `dense`)."""
    nested = json.loads(report.read_text())["nested"]
    out = {}
    for fam, v in nested.items():
        if fam == "pooled":
            continue
        name, l2 = v["chosen"].rsplit("@", 1)
        (out[fam],) = [c for c in select_candidates(dense, [float(l2)]) if c.name == name]
    return out


def run_select(
    rows: Sequence[Row], lexical: Sequence[str], dense: Sequence[str], args: argparse.Namespace
) -> int:
    """`select`: the report, then the gate a written model must pass against `--baseline`."""
    l2s = [float(x) for x in args.l2s.split(",") if x]
    report = select(rows, lexical, dense, args.top_n, l2s=l2s, tie=args.budget_tie)
    chosen: Candidate = report.pop("chosen")
    base = report["candidates"].get(args.baseline, {}).get("pooled")
    nested = report["nested"]["pooled"]
    gate: dict[str, Any] = {"baseline": args.baseline, "baseline_lofo": base, "nested": nested}
    if base is None:
        gate["passes"], gate["why"] = False, f"no candidate {args.baseline}"
    else:
        shorter_and_less = nested["chars"] < base["chars"] and nested["in_evidence"] < base["in_evidence"]
        gate["passes"] = nested["recall_600"] >= base["recall_600"] and not shorter_and_less
        gate["why"] = (
            "nested recall@600 below the baseline's"
            if nested["recall_600"] < base["recall_600"]
            else "shorter evidence with fewer answers in it"
            if shorter_and_less
            else "nested recall@600 at least the baseline's, evidence not traded away"
        )
    report["gate"] = gate
    print(json.dumps(report))
    if args.write:
        if not gate["passes"]:
            print(f"not written: {gate['why']}", file=sys.stderr)
            return 1
        model = fit_model(
            rows,
            lexical,
            chosen.dense,
            args.top_n,
            f"bench/span_rank_fit.py select on bench/qa, all {len(rows)} answerable questions of "
            f"{len({r.family for r in rows})} families: {chosen.label} chosen by the 1-SE rule over "
            f"leave-one-family-out; nested held-out recall@600 (offline) {nested['recall_600']}, "
            f"answer in evidence {nested['in_evidence']}",
            tie=args.budget_tie,
            l2=chosen.l2,
        )
        Path(args.write).write_text(json.dumps(model.to_dict(), indent=2) + "\n")
        print("wrote", args.write, json.dumps(model.to_dict()), file=sys.stderr)
    return 0


def command_options(f: argparse.ArgumentParser, name: str) -> None:
    """The options of one model command: `eval`'s store and model files; `select` tries L2
    strengths against a baseline where the other commands fit at one."""
    if name == "eval":
        f.add_argument("root", nargs="?", default=str(HERE / "qa"))
        f.add_argument("--store")
        f.add_argument("--floors", choices=["on", "off", "both"], default="both")
        f.add_argument("--model-dir", default=str(ROOT / "build" / "span_rank"))
        f.add_argument("--fixed", help="ask every family with this model file (no refit)")
        f.add_argument(
            "--chosen",
            help="a `select` report (JSON): each family asked with the candidate its nested rule chose",
        )
    if name != "select":
        f.add_argument("--l2", type=float, default=L2, help="L2 penalty of every pairwise fit")
        return
    f.add_argument(
        "--l2s", default=",".join(map(str, SELECT_L2)), help="the L2 strengths tried, comma-separated"
    )
    f.add_argument(
        "--baseline",
        default="no_structure@0.01",
        help="the candidate a written model must match: the shipped file's feature set and L2 "
        "(the five-family file has no structure features; docs/verbatim.md#span-five)",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows")
    r.add_argument("root", nargs="?", default=str(HERE / "qa"))
    r.add_argument("--store")
    r.add_argument("--families")
    r.add_argument("--out", required=True)
    x = sub.add_parser("relex")
    x.add_argument("rows")
    x.add_argument("--out", required=True)
    t = sub.add_parser("retok")
    t.add_argument("rows")
    t.add_argument("--out", required=True)
    for name in ("fit", "ablate", "eval", "select"):
        f = sub.add_parser(name)
        command_options(f, name)
        f.add_argument("rows")
        f.add_argument("--lexical", default=",".join(LEXICAL_FEATURES))
        f.add_argument("--dense", default=",".join(DENSE_FEATURES))
        f.add_argument("--top-n", type=int, default=40)
        f.add_argument("--no-budget", action="store_true", help="keep the fitted length weight")
        f.add_argument(
            "--budget-tie", choices=BUDGET_TIES, default="smallest", help="step taken among tied ones"
        )
        f.add_argument("--write")
        f.add_argument("--boost", type=int, default=0, help="boosted trees on the head scorer: rounds")
        f.add_argument("--boost-depth", type=int, default=2)
        f.add_argument("--boost-rate", type=float, default=0.1)
        f.add_argument("--boost-min-hessian", type=float, default=2.0)
    args = ap.parse_args()
    if args.cmd == "rows":
        fams = [x for x in args.families.split(",") if x] if args.families else None
        data = collect(Path(args.root), Path(args.store) if args.store else None, fams)
        Path(args.out).write_bytes(pickle.dumps(data))
        print(json.dumps({k: v for k, v in data.items() if k != "rows"} | {"rows": len(data["rows"])}))
        return 0
    if args.cmd == "relex":
        data = {"rows": []}
        for part in args.rows.split(","):
            data["rows"].extend(pickle.loads(Path(part).read_bytes())["rows"])
        before = [r.lexical for r in data["rows"]]
        data["rows"] = relex(data["rows"])
        changed = {
            f: sum(int((b[f] != r.lexical[f]).any()) for b, r in zip(before, data["rows"], strict=True))
            for f in ("quantity_match", "form_match", "row_quantity")
        }
        Path(args.out).write_bytes(pickle.dumps(data))
        print(json.dumps({"rows": len(data["rows"]), "questions_changed": changed}))
        return 0
    if args.cmd == "retok":
        data = pickle.loads(Path(args.rows).read_bytes())
        data["rows"] = retok(data["rows"])
        Path(args.out).write_bytes(pickle.dumps(data))
        print(json.dumps({"rows": len(data["rows"])}))
        return 0
    rows: list[Row] = []
    for part in args.rows.split(","):
        rows.extend(pickle.loads(Path(part).read_bytes())["rows"])
    lexical = [x for x in args.lexical.split(",") if x]
    dense = [x for x in args.dense.split(",") if x]
    boosting = boost_spec(ap, args)
    if args.cmd == "select":
        return run_select(rows, lexical, dense, args)
    if args.cmd == "eval":
        floors = {"on": [True], "off": [False], "both": [True, False]}[args.floors]
        report = end_to_end(
            rows,
            root=Path(args.root),
            store=Path(args.store) if args.store else None,
            lexical=lexical,
            dense=dense,
            top_n=args.top_n,
            floors=floors,
            model_dir=Path(args.model_dir),
            fixed_model=Path(args.fixed) if args.fixed else None,
            budget=not args.no_budget,
            tie=args.budget_tie,
            l2=args.l2,
            chosen=nested_choices(Path(args.chosen), dense) if args.chosen else None,
        )
        print(json.dumps(report))
        return 0
    if args.cmd == "fit":
        report = lofo(
            rows,
            lexical,
            dense,
            args.top_n,
            budget=not args.no_budget,
            tie=args.budget_tie,
            boosting=boosting,
            l2=args.l2,
        )
        print(
            json.dumps(
                {"old_blend": fixed(rows, OLD), "held_out": {k: v["recall"] for k, v in report.items()}}
            )
        )
        print_misses(report)
        for fam, v in report.items():
            if "model" in v:
                print(fam, json.dumps(v["model"]))
        if args.write:
            model = fit_model(
                rows,
                lexical,
                dense,
                args.top_n,
                f"bench/span_rank_fit.py on bench/qa, all {len(rows)} answerable questions of "
                f"{len({r.family for r in rows})} families; held-out recall@600 (offline) "
                f"{report['pooled']['recall']}" + (f"; L2 {args.l2:g}" if args.l2 != L2 else ""),
                budget=not args.no_budget,
                tie=args.budget_tie,
                l2=args.l2,
            )
            Path(args.write).write_text(json.dumps(model.to_dict(), indent=2) + "\n")
            print("wrote", args.write, json.dumps(model.to_dict()))
        return 0
    base = lofo(rows, lexical, dense, args.top_n)["pooled"]["recall"]
    unbudgeted = lofo(rows, lexical, dense, args.top_n, budget=False)["pooled"]["recall"]
    print(json.dumps({"old_blend": fixed(rows, OLD)["pooled"], "all": base, "no_budget": unbudgeted}))
    for f in dense:
        lx = [x for x in lexical if x != f]
        dn = [x for x in dense if x != f]
        print(f"without {f}: {lofo(rows, lx, dn, args.top_n)['pooled']['recall']}")
    for n in (0, 10, 20, 40, 80, 1_000_000):
        print(f"top_n {n}: {lofo(rows, lexical, dense, n)['pooled']['recall']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
