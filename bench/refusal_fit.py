"""Fit and measure the refusal signal (`evidence.verbatim.grounding`), leave-one-family-out.

Usage: python bench/refusal_rows.py bench/qa --store DIR > rows.json
       python bench/refusal_fit.py rows.json [--budget answerable] [--max-loss 0.03]
           [--default-cap 0.30] [--min-confidence 0.3] [--nested]
           [--features grounding,cosine,typed_key,agreement,index_absent,typed_rarest]
           [--label found] [--json]
(`kab_`/`rab_` features, `key_ablation`, read rows recorded with `refusal_rows.py --ablation`;
`ctr_` features, `index_contrast`, read the other questions' evidence: measured, not shipped)
(a `tok_` feature, `TOKEN_FEATURES`, also embeds the evidence's word pieces with MiniLM, kept
in token_best.json next to rows.json)
(`--paraphrase-context T`: `absent_rare` reads paraphrases in context at cosine T, the
similarities cached in context_sims.json next to rows.json: docs/verbatim.md#refusal-context;
`bench/refusal_context_fit.py` chooses T leave-one-family-out)
(`--max-loss-verbatim B`/`--max-loss-default B`: each profile's own budget, session 45's rule of
main's false refusals + 1; `--pairs pairs.json`: `pair_index`, `bench/refusal_pairs.py`; the
`bench/refusal_shape.py` readings, `dense_margin` …, are read from rows that record the
agreement's rankings: docs/verbatim.md#refusal-shape)
(`make refusal-fit` runs both with the shipped settings; docs/verbatim.md#honest-refusal.)

`rows.json` holds, per family, question and profile (`verbatim`, `default`), what the signal read
with every refusal floor off: the evidence texts and their bodies, the concepts they carry by
construction, the question's concepts, the cosine and the dense/BM25 agreement; whether the
evidence held an expected answer (`found`: within 600 characters for verbatim, 2,000 for
default), whether the question is answerable, and whether the default profile's cosine/coverage
answerability refused it anyway.

The signal's features (`verbatim.grounding.read_evidence`: grounding, typed_key, …, the cosine
and the agreement as recorded) are recomputed here with the shipped code, so a change to the
weights, the answer-type lexicon or a feature is measured without asking the service again. For
each held-out family, on the others:

1. a logistic model over `--features` is fitted with Newton's method on both profiles' rows
   pooled (one signal): positive = the evidence holds an answer, negative = it does not
   (unanswerable questions, and answerable ones whose evidence missed the answer; `--label
   answerable`: positive = the question has an answer);
2. each profile's floors refuse the most rows not to keep while at most `--max-loss` of the rows
   to keep are refused (`--budget`: `answerable`, the issue's false refusals, against unanswerable
   questions; or `found`, the recall kept, against evidence without an answer); in `default` the
   cosine/coverage signal's own refusals count against the same budget;
3. for indexes without a fitted embedder (lexical-only, other embedders), the same model and
   floors with the agreement fixed at its mean over the training rows and the cosine at the value
   (grid of 0.025) at which those floors refuse the most within the budget (the "lexical" run);

then the held-out family is scored with them: unanswerable questions refused (NO_RESULT recall),
answerable questions refused (false refusals, the issue's measure, which counts answerable
questions whose evidence missed the answer too), and answers lost (recall given up). `final` is
the model and floors fitted on every family, scored in-sample too: what ships
(`DENSE_MODEL`, `LEXICAL_COSINE`, `LEXICAL_AGREEMENT`, `REFUSAL_FLOOR`, `SAFETY_NET_FLOOR`,
`HITS_REFUSAL_FLOOR` = `EVIDENCE_ANSWER_MIN_GROUNDING`), printed last as lines to paste.
`--default-cap` bounds the default profile's floor in every fold: SciFact's in-domain questions
must stay answered (`bench/answerability.py`, ≥ 0.95), which holds up to 0.30.
`--min-confidence` re-reads the default profile's cosine/coverage refusals at another bar
(`answer_min_confidence`; the rows record them at 0.5, where the confidence is the probability).
`--nested` learns each profile's training budget from folds inside the training families (the
largest budget whose inner held-out false refusals stay within `--max-loss`): a margin for
families the fit has not seen (measured, not the shipped setting: docs/verbatim.md#honest-refusal).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.verbatim.grounding import (  # noqa: E402
    _WORD,
    DENSE_MODEL,
    HITS_REFUSAL_FLOOR,
    REFUSAL_FLOOR,
    SAFETY_NET_FLOOR,
    TermCounts,
    concept_weights,
    read_evidence,
    unique_concepts,
)

PROFILES = ("verbatim", "default")
#: The shipped floors, by `Fitter.bars`' keys (`--prior-choice strongest-passing`'s base).
SHIPPED_FLOORS = {"verbatim": REFUSAL_FLOOR, "safety_net": SAFETY_NET_FLOOR, "default": HITS_REFUSAL_FLOOR}
#: The features the shipped model reads (`verbatim.grounding.Reading`), and the cosine; the
#: lexical model reads the same without the cosine.
FEATURES = ("grounding", "cosine")
#: What only a dense index reads: the lexical model fixes them (`LEXICAL_COSINE`, `LEXICAL_AGREEMENT`).
#: Key-term ablation's dense readings need the query vector too (`key_ablation`): the lexical
#: model fixes them at their training mean, as it fixes the agreement.
DENSE_ONLY = (
    "cosine",
    "agreement",
    "dense_margin",
    *(f"{p}_dense_{x}" for p in ("kab", "rab") for x in ("same", "rr", "drop")),
)


#: `--paraphrase-context`: what `read_evidence` is given as its word-piece embedder (`tokens`),
#: so that `absent_rare` reads paraphrases in context; the rows' similarities are read from the
#: cache `read_context` fills (`grounding.context_similarity` replaced by its lookup).
CONTEXT: Callable[[Sequence[str]], Sequence[Any]] | None = None


def evidence_of(
    row: dict[str, Any],
) -> tuple[list[tuple[str, ...]], list[str], list[str], list[str] | None, TermCounts | None] | None:
    """The row's evidence as the signal read it: groups, texts, given, bodies, passage counts
    (None: no evidence)."""
    judged = row.get("judged")
    if not judged or not judged["texts"]:
        return None
    groups = [tuple(g) for g in judged["groups"]]
    texts, given = list(judged["texts"]), list(judged.get("given") or ())
    if "given" not in judged and row.get("path") == "ATTRIBUTE_LOOKUP" and len(texts) > 1:
        # Rows recorded before `given`: the attribute's concept was the last text.
        texts, given = texts[:-1], texts[-1:]
    df = judged.get("df")
    if df is not None:
        # Rows recorded before the variants (session 42) read every unused term as absent.
        df = TermCounts(df, judged.get("df_variants") or ())
    return groups, texts, given, judged.get("bodies"), df


def features(row: dict[str, Any]) -> dict[str, float]:
    """What the signal reads of the row's evidence (`read_evidence`), recomputed with the shipped
    code; no evidence: every feature 0."""
    read = evidence_of(row)
    if read is None:
        return {}
    judged = row["judged"]
    groups, texts, given, bodies, df = read
    out = read_evidence(row["question"], texts, groups, given, bodies, df=df, tokens=CONTEXT).features(
        judged["cosine"], judged.get("agreement")
    )
    out.update(key_ablation(judged.get("ablation")))
    if judged.get("rankings") is not None:
        # Rows recorded with the agreement's rankings (session 45): the shape of the dense one.
        out.update(shape_features(row))
    if "_contrast" in row:
        out.update(row["_contrast"])
    if "_vectors" in row:
        out.update(ablation(row["question"], groups, texts, given, row["_vectors"]))
    if "_best" in row:
        out.update(token_cover(row["question"], groups, row["_best"], texts, given, bodies=bodies))
    return out


def shape_features(row: dict[str, Any]) -> dict[str, float]:
    """The rankings' shape (`bench/refusal_shape.py`, session 45's candidates): not read when the
    ranking was not (no vector or no documents)."""
    from refusal_shape import CANDIDATES, candidates

    return {c: v for c, v in candidates(row).items() if v is not None and c in CANDIDATES}


def _same_place(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Two ranked passages ([document, start, end, score]) overlap: the same place."""
    return bool(a[0] == b[0] and a[1] < b[2] and a[2] > b[1])


#: Key-term ablation's reading where there is nothing to read: as if the key term moved nothing.
UNMOVED = {"_dense_same": 1.0, "_lex_same": 1.0, "_dense_rr": 1.0, "_dense_drop": 0.0, "_lex_share": 0.0}


def key_ablation(rankings: Mapping[str, Any] | None) -> dict[str, float]:
    """Key-term ablation (a candidate refusal feature, measured, not shipped:
    docs/verbatim.md#refusal-key-ablation). `rankings` (`refusal_rows.py --ablation`): the dense
    and BM25 passage rankings, within the evidence's documents, of the question (`full`) and of
    the question without its key concepts (`key`: the heaviest by English rarity, what `typed_key`
    reads; `rarest`: the least used by the index, what `typed_rarest` reads). When the evidence's
    documents answer the question, its key term steers the retrieval: without it another passage
    wins and the best score drops. When they do not carry it, the same passage wins about as well.
    Per reading (prefix `kab_` for `key`, `rab_` for `rarest`):

    - `_dense_same` / `_lex_same`: 1 when the ablated question's first passage is the full one's;
    - `_dense_rr`: the reciprocal rank of the full question's first dense passage in the ablated
      ranking (0 past the depth);
    - `_dense_drop`: the first dense cosine's drop (full minus ablated);
    - `_lex_share`: the share of the first BM25 score the key term carries (1 - ablated / full).

    Nothing to read is one case, whatever the cause: no rankings recorded (None: no query vector
    or no evidence documents, or rows recorded without `--ablation`), no key concept to ablate
    (no `key`/`rarest` entry), or a leg whose full ranking is empty: that leg reads `UNMOVED`,
    as if the key term moved nothing (same 1, reciprocal rank 1, drop and share 0). An ablated
    ranking that comes back empty is a reading: the key term carried the whole ranking."""
    out: dict[str, float] = {}
    full = (rankings or {}).get("full")
    for name, prefix in (("key", "kab"), ("rarest", "rab")):
        out.update({prefix + k: v for k, v in UNMOVED.items()})
        abl = (rankings or {}).get(name)
        if not full or not abl:
            continue
        fd, fl = full["dense"], full["lexical"]
        ad, al = abl["dense"], abl["lexical"]
        if fd:
            out[f"{prefix}_dense_same"] = 1.0 if ad and _same_place(ad[0], fd[0]) else 0.0
            out[f"{prefix}_dense_rr"] = next(
                (1.0 / (1 + i) for i, h in enumerate(ad) if _same_place(h, fd[0])), 0.0
            )
            out[f"{prefix}_dense_drop"] = fd[0][3] - (ad[0][3] if ad else 0.0)
        if fl:
            out[f"{prefix}_lex_same"] = 1.0 if al and _same_place(al[0], fl[0]) else 0.0
            out[f"{prefix}_lex_share"] = 1.0 - (al[0][3] / fl[0][3]) if al and fl[0][3] > 0 else 1.0
    return out


def index_contrast(rows: list[dict[str, Any]]) -> None:
    """Per-index contrast (a candidate refusal feature, measured, not shipped:
    docs/verbatim.md#refusal-key-ablation): how much better the question's own evidence covers its
    concepts than the evidence of the other questions asked of the same index (same family and
    profile: a stand-in for spans drawn from the index at random). The coverage is the best single
    text's weighted share of the question's concepts (`grounding` per text), each concept weighted
    by its index rarity (`_BASE_WEIGHT` + `index_rarity`: the IDF mass) or, `_eng`, by its English
    rarity (`concept_weights`). Evidence no better than random evidence of the index is about the
    index's topic, not about the question. Sets each row's `_contrast`:

    - `ctr_idx` / `ctr_eng`: own coverage minus the mean over the other questions' evidence;
    - `ctr_pct`: the share of the other questions' evidence that covers the question at least as
      well as its own (index weights; high: the own evidence is nothing special)."""
    from evidence.verbatim.grounding import _BASE_WEIGHT, index_rarity
    from evidence.verbatim.scoring import _by_prefix, _extends, identifier_parts, terms

    bags: dict[str, tuple[set[str], dict[str, list[str]]]] = {}

    def bag(text: str) -> tuple[set[str], dict[str, list[str]]]:
        if text not in bags:
            b = set(terms(text))
            if "_" in text:
                b.update(t for part in identifier_parts(text) for t in terms(part))
            bags[text] = (b, _by_prefix(b))
        return bags[text]

    def cover(concepts: list[tuple[str, ...]], w: list[float], texts: Sequence[str]) -> float:
        best = 0.0
        for t in texts:
            b, near = bag(t)
            got = sum(
                wi
                for c, wi in zip(concepts, w, strict=True)
                if any(x in b for x in c) or any(_extends(x, near.get(x[:3], ())) for x in c)
            )
            best = max(best, got / sum(w) if sum(w) else 1.0)
        return best

    groups: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        if r.get("judged") and r["judged"]["texts"]:
            groups.setdefault((r["family"], r["profile"]), []).append(i)
    for members in groups.values():
        evidence = {
            i: [*rows[i]["judged"]["texts"], *(rows[i]["judged"].get("given") or ())] for i in members
        }
        for i in members:
            r = rows[i]
            concepts = unique_concepts(r["judged"]["groups"])
            if not concepts:
                r["_contrast"] = {"ctr_idx": 0.0, "ctr_eng": 0.0, "ctr_pct": 1.0}
                continue
            df = r["judged"].get("df") or {}
            eng = concept_weights(r["question"], r["judged"]["groups"])
            wi = [_BASE_WEIGHT + index_rarity(c, df) for c in concepts]
            we = [max(eng.get(t, 1.0) for t in c) for c in concepts]
            own_i, own_e = cover(concepts, wi, evidence[i]), cover(concepts, we, evidence[i])
            others = [j for j in members if j != i]
            oi = [cover(concepts, wi, evidence[j]) for j in others]
            oe = [cover(concepts, we, evidence[j]) for j in others]
            r["_contrast"] = {
                "ctr_idx": own_i - float(np.mean(oi)) if oi else 0.0,
                "ctr_eng": own_e - float(np.mean(oe)) if oe else 0.0,
                "ctr_pct": float(np.mean([o >= own_i - 1e-9 for o in oi])) if oi else 1.0,
            }


#: Candidate per-index contrast features (`index_contrast`); measured, not shipped.
CONTRAST_FEATURES = ("ctr_idx", "ctr_eng", "ctr_pct")


#: `token_cover`: a question word piece is matched when its best cosine with an evidence word
#: piece reaches this (contextual MiniLM pieces: the same word in another sentence reads ~0.7-0.9).
TOKEN_MATCH = 0.7


def token_cover(
    question: str,
    groups: Sequence[Sequence[str]],
    best: Sequence[Sequence[float]],
    texts: Sequence[str],
    given: Sequence[str] = (),
    *,
    bodies: Sequence[str] | None = None,
) -> dict[str, float]:
    """Token-level coverage of the question's concepts by the evidence: measured as candidate
    refusal features (`bench/refusal_fit.py --features …,tok_share`), not read by the shipped
    model (docs/verbatim.md#honest-refusal says why).

    `best[i][j]`: the best cosine of the question's word piece j (contextual, read in the
    question: `MiniLMEmbedder.embed_tokens`) with any word piece of `texts[i]`. A concept's score
    is the mean over its question word's pieces (its best word), 1 for a concept `given`. Each
    concept is weighted as `grounding` weighs it (`concept_weights`):

    - `tok_mean`: the weighted mean score (a paraphrase, "kidney" / "renal", scores high);
    - `tok_key`: the lowest score among the heaviest concepts;
    - `tok_min`: the lowest score of all: the question word with the weakest best match anywhere
      in the evidence;
    - `tok_span`: the best text's lowest score, among the texts that read as the kind of answer
      asked (`answer_types`; every text when none is asked): one text holds every concept, a
      paraphrase allowed, next to an answer of the kind (0 when no text reads as it);
    - `tok_share`: the weighted share of concepts scoring ≥ `TOKEN_MATCH`;
    - `tok_one`: the same share within the one text that holds the most;
    - `tok_soft`: the weighted share carried lexically (as `grounding` counts) or scoring ≥
      `TOKEN_MATCH`.
    """
    from evidence.embed.tokenizer import token_offsets
    from evidence.verbatim.scoring import grounding, terms

    concepts = unique_concepts(groups)
    if not best or not concepts:
        return {}
    weights = concept_weights(question, groups)
    carried = {t for g in given for t in terms(g)}
    per_text = np.asarray(best, dtype=float)
    offsets = token_offsets(question)[: per_text.shape[1]]
    words = []
    for m in _WORD.finditer(question):
        pieces = [i for i, (s, e) in enumerate(offsets) if s < m.end() and e > m.start()]
        if pieces:
            words.append((terms(m.group()), pieces))
    read = {t for ts, _ in words for t in ts}
    # Concepts with no question word behind them (a label word alone) have no pieces to match.
    scored = [c for c in concepts if set(c) & carried or set(c) & read]
    if not scored:
        return {}
    w = np.array([max(weights.get(t, 1.0) for t in c) for c in scored])

    def scores(b: np.ndarray) -> np.ndarray:
        word: dict[str, float] = {}
        for ts, pieces in words:
            for t in ts:
                word[t] = max(word.get(t, 0.0), float(np.mean(b[pieces])))
        return np.array([1.0 if set(c) & carried else max(word.get(t, 0.0) for t in c) for c in scored])

    sc = scores(per_text.max(axis=0))
    _, missing = grounding(scored, [*texts, *given], weights)
    lexical = np.array([0.0 if c[0] in set(missing) else 1.0 for c in scored])
    heavy = w >= w.max() - 1e-9
    # tok_span: one text holds every concept, paraphrase allowed (its weakest concept's match),
    # and reads as the kind of answer asked when one is asked.
    from evidence.verbatim.answer_types import answer_types

    types = answer_types().expected(question)
    reading = [
        float(scores(b).min())
        for b, body in zip(per_text, bodies if bodies is not None else texts, strict=True)
        if not types or any(a.reads_in(body) for a in types)
    ]
    return {
        "tok_span": max(reading, default=0.0),
        "tok_mean": float((sc * w).sum() / w.sum()),
        "tok_key": float(sc[heavy].min()),
        "tok_min": float(sc.min()),
        "tok_share": float((w * (sc >= TOKEN_MATCH)).sum() / w.sum()),
        "tok_one": max(float((w * (scores(b) >= TOKEN_MATCH)).sum() / w.sum()) for b in per_text),
        "tok_soft": float((w * np.maximum(lexical, sc >= TOKEN_MATCH)).sum() / w.sum()),
    }


#: Candidate features read from MiniLM's word-piece vectors (`token_cover`); measured,
#: not shipped (docs/verbatim.md#honest-refusal).
TOKEN_FEATURES = ("tok_mean", "tok_key", "tok_min", "tok_share", "tok_one", "tok_soft", "tok_span")


def ablated(question: str, groups: Sequence[Sequence[str]]) -> list[tuple[tuple[str, ...], str]]:
    """Each concept of `groups` with the question without its words (`ablation`); a concept with
    no question word behind it (a label word alone) has no such question."""
    from evidence.verbatim.scoring import terms

    words = [set(terms(m.group())) for m in _WORD.finditer(question)]
    return [(g, without(question, [g])) for g in unique_concepts(groups) if any(w & set(g) for w in words)]


def without(question: str, concepts: Iterable[Sequence[str]]) -> str:
    """`question` without the words that carry any of `concepts` (the question's words as the
    refusal signal reads them, `grounding._WORD`), its spaces folded."""
    from evidence.verbatim.scoring import terms

    drop = {t for c in concepts for t in c}
    rest = question
    for m in reversed([m for m in _WORD.finditer(question) if set(terms(m.group())) & drop]):
        rest = rest[: m.start()] + rest[m.end() :]
    return " ".join(rest.split())


def ablation(
    question: str,
    groups: Sequence[Sequence[str]],
    texts: Sequence[str],
    given: Sequence[str],
    vectors: Mapping[str, np.ndarray],
) -> dict[str, float]:
    """Concept ablation (a candidate refusal feature, measured, not shipped: `--features
    …,abl_missing`): for each concept, how much the evidence's best sentence-embedding cosine
    with the question drops when the concept's words are taken out of the question. Evidence
    that carries the concept's meaning, in other words too ("place-holder" for "placeholders"),
    fits the question less without it (> 0); evidence that lacks it ("tonsillectomy" next to a
    dosage table) fits the question as well or better without it (≤ 0). `vectors`: MiniLM
    vectors of the question, its ablated forms and the texts (`read_sentences`).

    - `abl_missing`: the lowest drop among the concepts no text holds lexically (`grounding`'s
      missing), 0 when every concept is held;
    - `abl_min`: the lowest drop among all concepts."""
    from evidence.verbatim.scoring import grounding

    if not texts:
        return {}
    e = np.array([vectors[t] for t in texts])
    full = float((e @ vectors[question]).max())
    drops = {g: full - float((e @ vectors[q]).max()) for g, q in ablated(question, groups)}
    if not drops:
        return {"abl_missing": 0.0, "abl_min": 0.0}
    _, missing = grounding(list(drops), [*texts, *given])
    absent = set(missing)
    return {
        "abl_missing": min((d for g, d in drops.items() if g[0] in absent), default=0.0),
        "abl_min": min(drops.values()),
    }


#: Candidate features read from MiniLM sentence vectors of the question with a concept taken out
#: (`ablation`); measured, not shipped (docs/verbatim.md#honest-refusal).
ABLATION_FEATURES = ("abl_missing", "abl_min")


def read_sentences(rows: list[dict[str, Any]], cache: Path) -> None:
    """Set each row's `_vectors` (`ablation`'s input): MiniLM vectors of the question, each
    ablated question and each evidence text, kept in `cache` by text (a few minutes on two
    cores the first time, nothing after)."""
    import hashlib

    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    known: dict[str, list[float]] = json.loads(cache.read_text()) if cache.exists() else {}
    wanted: dict[int, list[str]] = {}
    for i, r in enumerate(rows):
        judged = r.get("judged")
        if judged and judged["texts"]:
            ablations = [q for _, q in ablated(r["question"], [tuple(g) for g in judged["groups"]])]
            wanted[i] = [r["question"], *ablations, *judged["texts"]]
    todo = list(dict.fromkeys(t for ts in wanted.values() for t in ts if key(t) not in known))
    if todo:
        from evidence.embed.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder(batch_size=32)
        for i in range(0, len(todo), 256):
            for t, v in zip(todo[i : i + 256], embedder.embed_documents(todo[i : i + 256]), strict=True):
                known[key(t)] = [round(float(x), 5) for x in v]
        cache.write_text(json.dumps(known))
    for i, ts in wanted.items():
        rows[i]["_vectors"] = {t: np.asarray(known[key(t)]) for t in ts}


#: `embed_tokens` reads a text's first window: a longer evidence text is read in such pieces.
TOKEN_WINDOW = 254


def token_windows(text: str) -> list[str]:
    """`text` cut at word-piece boundaries into pieces of at most `TOKEN_WINDOW` word pieces."""
    from evidence.embed.tokenizer import token_offsets

    offsets = token_offsets(text)
    return [
        text[offsets[i][0] : offsets[min(i + TOKEN_WINDOW, len(offsets)) - 1][1]]
        for i in range(0, len(offsets), TOKEN_WINDOW)
    ]


def read_tokens(rows: list[dict[str, Any]], cache: Path) -> None:
    """Set each row's `_best` (`token_cover`'s input: per evidence text, each question word
    piece's best cosine with the text's word pieces), from MiniLM's `embed_tokens`. Kept in
    `cache` by (question, text), so a second fit embeds nothing (the suite's evidence is ~2,000
    texts, a few minutes on two cores)."""
    import hashlib

    def key(question: str, text: str) -> str:
        return hashlib.sha1(json.dumps([question, text]).encode()).hexdigest()

    known: dict[str, list[float]] = json.loads(cache.read_text()) if cache.exists() else {}
    pairs = {
        key(r["question"], t): (r["question"], t)
        for r in rows
        if r.get("judged")
        for t in r["judged"]["texts"]
    }
    todo = {k: p for k, p in pairs.items() if k not in known}
    if todo:
        from evidence.embed.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder(batch_size=32)
        texts = list(dict.fromkeys(x for p in todo.values() for x in p))
        parts = [(t, w) for t in texts for w in token_windows(t)]
        vectors: dict[str, list[np.ndarray]] = {t: [] for t in texts}
        for i in range(0, len(parts), 256):
            batch = parts[i : i + 256]
            for (t, _), m in zip(batch, embedder.embed_tokens([w for _, w in batch]), strict=True):
                vectors[t].append(m)
        for k, (question, text) in todo.items():
            q = np.concatenate(vectors[question])
            e = np.concatenate(vectors[text]) if vectors[text] else np.zeros((0, q.shape[1]))
            known[k] = [round(float(x), 4) for x in (q @ e.T).max(axis=1)] if len(e) else [0.0] * len(q)
        cache.write_text(json.dumps(known))
    for r in rows:
        if r.get("judged") and r["judged"]["texts"]:
            r["_best"] = [known[key(r["question"], t)] for t in r["judged"]["texts"]]


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    l2: float | np.ndarray = 1e-2,
    fixed: np.ndarray | None = None,
    *,
    prior: np.ndarray | None = None,
    lower: np.ndarray | None = None,
) -> np.ndarray:
    """Weights over `x`'s columns, bias last. `fixed` (same length, NaN = fitted) holds some weights
    at a shipped model's value, so that a new feature is weighed against that model as it ships
    (`--fixed-from-main`) rather than moving the weights that already answer and refuse.
    `l2` (one strength, or one per weight) pulls each weight toward `prior` (zero when not given):
    toward the shipped model, a refit moves a shipped weight only as far as the rows outweigh the
    pull (`--prior-from-main`). `lower` (NaN = unbounded): a weight the fit puts below its bound is
    held at the bound and the others fitted again, until none falls below (`--lower-bound`)."""
    width = x.shape[1] + 1
    fixed = np.full(width, np.nan) if fixed is None else fixed.astype(float)
    if lower is not None:
        out = fit_logistic(x, y, l2, fixed, prior=prior)
        below = np.isnan(fixed) & ~np.isnan(lower) & (out < lower)
        while below.any():
            fixed = np.where(below, lower, fixed)
            out = fit_logistic(x, y, l2, fixed, prior=prior)
            below = np.isnan(fixed) & ~np.isnan(lower) & (out < lower)
        return out
    a = np.c_[x, np.ones(len(x))]
    free = np.isnan(fixed)
    strength = np.broadcast_to(np.asarray(l2, dtype=float), (width,))[free]
    centre = (np.zeros(width) if prior is None else prior)[free]
    offset = a[:, ~free] @ fixed[~free]
    a = a[:, free]
    w = centre.copy()
    for _ in range(100 if free.any() else 0):
        p = 1 / (1 + np.exp(-(a @ w + offset)))
        h = a.T @ (a * (p * (1 - p))[:, None]) + np.diag(strength)
        step = np.linalg.solve(h, a.T @ (p - y) + strength * (w - centre))
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    out = fixed.copy()
    out[free] = w
    return out


def probability(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(np.c_[x, np.ones(len(x))] @ w)))


#: How far below the lowest kept probability a floor sits: more than rounding the coefficients moves it.
ROUNDING_MARGIN = 5e-4


def pick_floor(p: np.ndarray, kept: np.ndarray, max_loss: float, already: np.ndarray | None = None) -> float:
    """The highest floor refusing at most `max_loss` of the rows to keep (see `BUDGETS`), counting
    the rows `already` refused by another signal: just below the lowest probability it keeps
    (by `ROUNDING_MARGIN`, at most halfway down to the highest it refuses), so that the shipped
    model's coefficients, rounded to 4 decimals, keep and refuse the same rows."""
    already = np.zeros(len(p), dtype=bool) if already is None else already
    best = 0.0
    for t in np.unique(p):
        if np.mean(((p < t) | already)[kept]) <= max_loss:
            best = max(best, float(t))
    below = p[p < best]
    return round(max(best - ROUNDING_MARGIN, (best + float(below.max())) / 2) if below.size else best, 4)


def score(p: np.ndarray, floor: float, answerable: np.ndarray, found: np.ndarray) -> dict[str, Any]:
    refused = p < floor
    unans = ~answerable
    return {
        "unanswerable_refused": f"{int((refused & unans).sum())}/{int(unans.sum())}",
        "no_result_recall": round(float((refused & unans).sum() / max(1, unans.sum())), 4),
        "no_result_precision": round(float((refused & unans).sum() / refused.sum()), 4)
        if refused.any()
        else None,
        "false_refusals": round(float((refused & answerable).sum() / max(1, answerable.sum())), 4),
        "answers_lost": f"{int((refused & found).sum())}/{int(found.sum())}",
        "recall": round(float((found & ~refused).sum() / max(1, answerable.sum())), 4),
        "recall_before": round(float(found.sum() / max(1, answerable.sum())), 4),
    }


#: The verbatim safety net (no bar of its own) may get a floor of its own.
SAFETY_NET = "HYBRID_FACTSPAN"
#: What the model learns as positive: `found`, the evidence holds an expected answer (what
#: evidence answering means); or `answerable`, the question has an answer (what the budget counts).
LABELS = ("found", "answerable")
GRID = [i / 100 for i in range(81)]
#: `--nested`: the training budgets tried, tightest last.
INNER_BUDGETS = (0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03)
#: What `--max-loss` bounds and what the floors then refuse the most of: `found`, the rows whose
#: evidence held an answer (the recall given up) against those whose evidence did not; or
#: `answerable`, answerable questions (the issue's false refusals) against unanswerable ones.
BUDGETS = ("found", "answerable")


def pick_floors(
    p: np.ndarray, kept: np.ndarray, net: np.ndarray, max_loss: float, found: np.ndarray | None = None
) -> tuple[float, float]:
    """(floor, safety-net floor) refusing the most rows not to keep while at most `max_loss` of the
    rows to keep are refused; ties: the most rows whose evidence holds no answer (`found`) refused,
    then the lower floors."""
    found = kept if found is None else found
    best: tuple[int, int, float, float] = (-1, -1, 0.0, 0.0)
    for f in GRID:
        for n in (x for x in GRID if x >= f):
            bar = np.where(net, n, f)
            refused = p < bar
            if np.mean(refused[kept]) > max_loss:
                continue
            got = (int((refused & ~kept).sum()), int((refused & ~found).sum()))
            if got > best[:2]:
                best = (*got, f, n)
    return best[2], best[3]


@dataclass(frozen=True)
class Fitter:
    """One fit's rows: the features (`x`), what the model learns as positive (`target`), and what
    the floors read (see `run`)."""

    x: np.ndarray
    target: np.ndarray
    prof: np.ndarray
    kept: np.ndarray
    net: np.ndarray
    found: np.ndarray
    already: np.ndarray
    default_cap: float
    #: Weights held at their value (NaN = fitted), bias last: `fit_logistic`'s `fixed`.
    fixed: np.ndarray | None = None
    #: `fit_logistic`'s `l2` (one per weight), `prior` and `lower`.
    l2: float | np.ndarray = 1e-2
    prior: np.ndarray | None = None
    lower: np.ndarray | None = None

    def fit_at(self, train: np.ndarray, losses: dict[str, float]) -> tuple[np.ndarray, dict[str, float]]:
        """The model fitted on `train` and each profile's floors within its budget `losses[profile]`."""
        w = fit_logistic(
            self.x[train],
            self.target[train].astype(float),
            self.l2,
            fixed=self.fixed,
            prior=self.prior,
            lower=self.lower,
        )
        p = probability(self.x, w)
        v = train & (self.prof == "verbatim")
        floor, net_floor = pick_floors(p[v], self.kept[v], self.net[v], losses["verbatim"], self.found[v])
        d = train & (self.prof == "default")
        default = min(pick_floor(p[d], self.kept[d], losses["default"], self.already[d]), self.default_cap)
        return w, {"verbatim": floor, "safety_net": net_floor, "default": default}

    def bars(self, floors: dict[str, float]) -> np.ndarray:
        """Each row's floor."""
        return np.where(
            self.prof == "default",
            floors["default"],
            np.where(self.net, floors["safety_net"], floors["verbatim"]),
        )

    def refuse_at(self, train: np.ndarray, losses: dict[str, float]) -> np.ndarray:
        """Every row refused by the model and floors fitted on `train` within `losses`."""
        w, floors = self.fit_at(train, losses)
        return (probability(self.x, w) < self.bars(floors)) | self.already


def inner_budgets(
    train: np.ndarray,
    fam: np.ndarray,
    verbatim: np.ndarray,
    kept: np.ndarray,
    max_loss: float,
    *,
    refuse_at: Callable[[np.ndarray, dict[str, float]], np.ndarray],
) -> dict[str, float]:
    """`--nested`: each profile's training budget, learned from held-out folds inside `train`: the
    largest of `INNER_BUDGETS` (at most `max_loss`) at which leaving each of `train`'s families out
    in turn (`refuse_at`: the rows refused by what the others fit) refuses at most `max_loss` of
    its rows to keep, pooled. A budget met in-sample is exceeded on families the fit has not seen;
    this is the margin that buys."""
    out: dict[str, float] = {}
    for pr, mine in (("verbatim", verbatim), ("default", ~verbatim)):
        out[pr] = min(INNER_BUDGETS)
        for b in sorted((x for x in INNER_BUDGETS if x <= max_loss + 1e-9), reverse=True):
            refused = np.zeros(len(fam), dtype=bool)
            for g in sorted(set(fam[train])):
                refused[fam == g] = refuse_at(train & (fam != g), dict.fromkeys(PROFILES, b))[fam == g]
            if np.mean(refused[train & mine & kept]) <= max_loss:
                out[pr] = b
                break
    return out


#: `pick_strength`'s gate against the shipped constants (`base`): in some profile at least this many
#: more rows not to keep refused, and in each profile at most `GATE_SLACK` more rows to keep refused
#: (rule R3's +3 / +1, read on the training families' inner held-out folds).
GATE_GAIN = 3
GATE_SLACK = 1


def pick_strength(
    train: np.ndarray,
    fam: np.ndarray,
    prof: np.ndarray,
    kept: np.ndarray,
    losses: dict[str, float],
    *,
    strengths: Sequence[float],
    refuse_at: Callable[[float, np.ndarray], np.ndarray],
    base: np.ndarray | None = None,
) -> tuple[float, dict[str, Any]]:
    """`--prior-from-main`: the prior's strength, learned from held-out folds inside `train`: each of
    `strengths` refits leaving each of `train`'s families out in turn (`refuse_at(strength, rows)`:
    every row refused by what those rows fit), pooled. Taken: one whose pooled held-out refusals of
    rows to keep stay within `losses` in each profile, the most rows not to keep refused (both
    profiles), ties the stronger pull; none within: the least overshoot (the largest profile's),
    ties the stronger pull. With `base` (the rows the shipped constants refuse;
    `--prior-choice strongest-passing`): the strongest pull whose pooled held-out refusals pass the
    gate against `base` on `train` (`GATE_GAIN`, `GATE_SLACK`), so that the shipped weights move no
    further than the gain needs; none passes: as without `base`. Returns the strength and each
    one's inner figures."""
    seen: dict[str, Any] = {}
    best: tuple[bool, float, float] | None = None
    passing: list[float] = []
    for s in strengths:
        refused = np.zeros(len(fam), dtype=bool)
        for g in sorted(set(fam[train])):
            refused[fam == g] = refuse_at(s, train & (fam != g))[fam == g]
        over = max(float(np.mean(refused[train & (prof == pr) & kept])) - b for pr, b in losses.items())
        got = int((refused & train & ~kept).sum())
        seen[str(s)] = {"refused": got, "overshoot": round(over, 4)}
        if base is not None and passes_gate(refused, base, train, prof, kept):
            passing.append(float(s))
            seen[str(s)]["passes"] = True
        key = (over <= 1e-12, float(got) if over <= 1e-12 else -over, float(s))
        if best is None or key > best:
            best = key
    assert best is not None
    return (max(passing) if passing else best[2]), seen


def passes_gate(
    refused: np.ndarray, base: np.ndarray, rows: np.ndarray, prof: np.ndarray, kept: np.ndarray
) -> bool:
    """`refused` against `base` over `rows`: at least `GATE_GAIN` more rows not to keep refused in
    some profile, at most `GATE_SLACK` more rows to keep refused in each."""

    def count(r: np.ndarray, pr: str, keep: bool) -> int:
        return int((r & rows & (prof == pr) & (kept == keep)).sum())

    profiles = sorted(set(prof[rows]))
    gain = any(count(refused, pr, False) >= count(base, pr, False) + GATE_GAIN for pr in profiles)
    return gain and all(count(refused, pr, True) <= count(base, pr, True) + GATE_SLACK for pr in profiles)


def weights(columns: Sequence[str], m: Mapping[str, float] | None, missing: float) -> np.ndarray | None:
    """`m`'s values over `columns` and the bias (`missing` where it names none), as the fit's
    weights are laid out."""
    if m is None:
        return None
    return np.array([m.get(c, missing) for c in columns] + [m.get("bias", missing)], dtype=float)


def fit_pulled(
    fitter: Fitter,
    train: np.ndarray,
    losses: dict[str, float],
    fam: np.ndarray,
    strengths: Sequence[float],
    *,
    base: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """`fitter.fit_at`, with the prior's strength (`strengths` given) on every coefficient chosen by
    `pick_strength` inside `train` (the bias keeps its 1e-2); the floors then name it."""
    if not strengths:
        return fitter.fit_at(train, losses)

    def pulled(strength: float) -> Fitter:
        return replace(fitter, l2=np.array([strength] * (fitter.x.shape[1]) + [1e-2]))

    strength, inner = pick_strength(
        train,
        fam,
        fitter.prof,
        fitter.kept,
        losses,
        strengths=strengths,
        refuse_at=lambda s, rows: pulled(s).refuse_at(rows, losses),
        base=base,
    )
    w, floors = pulled(strength).fit_at(train, losses)
    return w, {**floors, "strength": strength, "inner": inner}


def run(
    rows: list[dict[str, Any]],
    max_loss: float,
    columns: Sequence[str],
    default_cap: float = 1.0,
    *,
    budget: str = "found",
    label: str = "found",
    dense: dict[str, Any] | None = None,
    nested: bool = False,
    detail: dict[str, np.ndarray] | None = None,
    budgets: dict[str, float] | None = None,
    fixed: Mapping[str, float] | None = None,
    prior: Mapping[str, float] | None = None,
    strengths: Sequence[float] = (),
    lower: Mapping[str, float] | None = None,
    shipped_floors: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Fit and score leave-one-family-out, then on all rows (`final`). `dense`: the dense model's
    run (`columns` are its columns without the cosine): the lexical model is then that fold's dense
    model and floors with the cosine taken as a constant (`LEXICAL_COSINE`), the one at which those
    floors refuse the most within the budget, so that one model and one set of floors ship.
    `detail`, when given, receives each row's held-out probability (`p`), floor (`bar`) and
    refusal (`refused`), for reading the misses question by question (`bench/refusal_misses.py`).
    `fixed`: coefficients (and `bias`) held at these values; the other columns' are fitted.
    `prior` (with `strengths`): the coefficients (and `bias`) the l2 pull is toward (0 for a column
    it does not name), its strength on the columns chosen among `strengths` in each fold by
    `pick_strength` (the bias keeps the usual 1e-2); with `shipped_floors` (the shipped floors, by
    `bars`' keys), `pick_strength` reads the gate against what `prior` refuses at them.
    `lower`: coefficients not fitted below these."""
    read = [r.setdefault("_features", features(r)) for r in rows]
    x_all = np.array([[f.get(c, 0.0) for c in columns] for f in read])
    fam = np.array([r["family"] for r in rows])
    prof = np.array([r["profile"] for r in rows])
    found = np.array([bool(r["found"]) for r in rows])
    answerable = np.array([bool(r["answerable"]) for r in rows])
    net = np.array([r["profile"] == "verbatim" and r.get("path") == SAFETY_NET for r in rows])
    # The default profile's cosine/coverage answerability refuses some questions on its own (the
    # rows record it with this signal off): its refusals count against the same budget.
    already = np.array([r["profile"] == "default" and not r.get("can_answer", True) for r in rows])

    kept = found if budget == "found" else answerable
    target = answerable if label == "answerable" else found
    held = (
        None
        if fixed is None
        else np.array([fixed.get(c, np.nan) for c in columns] + [fixed.get("bias", np.nan)], dtype=float)
    )

    fitter = Fitter(
        x_all,
        target,
        prof,
        kept,
        net,
        found,
        already,
        default_cap,
        held,
        prior=weights(columns, prior, 0.0),
        lower=weights(columns, lower, np.nan),
    )
    bars = fitter.bars
    shipped = weights(columns, prior, 0.0)
    base = (
        None
        if shipped is None or shipped_floors is None
        else (probability(x_all, shipped) < bars(dict(shipped_floors))) | already
    )

    def agreement_mean(train: np.ndarray) -> float:
        """`LEXICAL_AGREEMENT`: the dense/BM25 agreement's mean over the training rows that read it."""
        values = [f["agreement"] for f, t in zip(read, train, strict=True) if t and "agreement" in f]
        return round(float(np.mean(values)), 4) if values else 0.0

    def fit(train: np.ndarray, key: str) -> tuple[np.ndarray, dict[str, float], float | None]:
        """The model and floors fitted on `train` (`key`: the held-out family, or `final`), and the
        cosine fixed for the lexical model (None for the dense one)."""
        if dense is not None:
            fold = dense["final"] if key == "final" else dense["families"][key]
            w, cosine = imputed(fold["model"], train, fold["floors"])
            return w, fold["floors"], cosine
        losses = (
            inner_budgets(train, fam, prof == "verbatim", kept, max_loss, refuse_at=fitter.refuse_at)
            if nested
            else dict.fromkeys(PROFILES, max_loss) | (budgets or {})
        )
        w, floors = fit_pulled(fitter, train, losses, fam, strengths if prior is not None else (), base=base)
        return w, {**floors, "budgets": losses}, None

    def imputed(m: dict[str, Any], train: np.ndarray, floors: dict[str, float]) -> tuple[np.ndarray, float]:
        """The dense model `m` over `columns` with its agreement fixed at its mean over the training
        rows (`agreement_mean`) and its cosine fixed, and that cosine: the one (grid of 0.025) at
        which `floors` refuse the most training rows not to keep, each profile within the budget;
        ties: the most rows without an answer refused, then the lowest cosine. None within the
        budget: 1 (the fewest refusals)."""
        coef = m["coefficients"]
        # The other dense-only readings (key-term ablation's) at their training means.
        fixed = (
            m["bias"] + coef.get("agreement", 0.0) * agreement_mean(train) + other_dense(coef, read, train)
        )

        def at(cosine: float) -> np.ndarray:
            return np.array([*(coef[c] for c in columns), fixed + coef.get("cosine", 0.0) * cosine])

        best: tuple[int, int, float] = (-1, -1, 1.0)
        for cosine in np.arange(0.0, 1.0001, 0.025):
            refused = (probability(x_all, at(cosine)) < bars(floors)) | already
            if any(
                np.mean(refused[train & (prof == pr) & kept]) > (budgets or {}).get(pr, max_loss)
                for pr in PROFILES
            ):
                continue
            got = (int((refused & train & ~kept).sum()), int((refused & train & ~found).sum()))
            if got > best[:2]:
                best = (*got, round(float(cosine), 3))
        return at(best[2]), best[2]

    out: dict[str, Any] = {"families": {}, "held_out": {}}
    held_refused = np.zeros(len(rows), dtype=bool)
    held_p, held_bar = np.zeros(len(rows)), np.zeros(len(rows))
    for f in sorted(set(fam)):
        train = fam != f
        w, floors, cosine = fit(train, f)
        refused = (probability(x_all, w) < bars(floors)) | already
        test = fam == f
        held_refused[test] = refused[test]
        held_p[test] = probability(x_all, w)[test]
        held_bar[test] = bars(floors)[test]
        out["families"][f] = {"model": model(columns, w), "floors": floors}
        if cosine is not None:
            out["families"][f]["cosine"] = cosine
            out["families"][f]["agreement"] = agreement_mean(train)
        for pr in PROFILES:
            sel = test & (prof == pr)
            out["families"][f][pr] = score(np.where(refused[sel], 0.0, 1.0), 0.5, answerable[sel], found[sel])
    if detail is not None:
        detail.update(p=held_p, bar=held_bar, refused=held_refused, already=already)
    for pr in PROFILES:
        sel = prof == pr
        # pooled held-out: each family scored with what the others fitted
        out["held_out"][pr] = score(np.where(held_refused[sel], 0.0, 1.0), 0.5, answerable[sel], found[sel])
    train = np.ones(len(rows), dtype=bool)
    w, floors, cosine = fit(train, "final")
    out["final"] = {"model": model(columns, w), "floors": floors}
    if cosine is not None:
        out["final"]["cosine"] = cosine
        out["final"]["agreement"] = agreement_mean(train)
    refused = (probability(x_all, w) < bars(floors)) | already
    out["in_sample"] = {
        pr: score(np.where(refused[prof == pr], 0.0, 1.0), 0.5, answerable[prof == pr], found[prof == pr])
        for pr in PROFILES
    }
    return out


def other_dense(coef: Mapping[str, float], read: Sequence[Mapping[str, float]], train: np.ndarray) -> float:
    """What the dense-only features besides the cosine and the agreement add to the lexical
    model's bias: each fixed at its mean over the training rows."""
    return sum(
        coef[c] * float(np.mean([f.get(c, 0.0) for f, t in zip(read, train, strict=True) if t]))
        for c in coef
        if c in DENSE_ONLY and c not in ("cosine", "agreement")
    )


def model(columns: Sequence[str], w: np.ndarray) -> dict[str, Any]:
    """The fitted weights as `RefusalModel` takes them."""
    return {
        "coefficients": {c: round(float(v), 4) for c, v in zip(columns, w, strict=False)},
        "bias": round(float(w[-1]), 4),
    }


def read_static_tokens(rows: list[dict[str, Any]], table_path: Path) -> None:
    """Set each row's `_best` as `read_tokens` does, from static word-piece vectors
    (`bench/static_pieces.py`: each piece embedded alone, no context) instead of MiniLM's
    contextual ones: a table lookup and one product a text, no model run (docs/ranking.md#focus-static).
    The table is read by `embed.static.read_piece_table` (a missing file names the command that
    builds it), as float32."""
    from evidence.embed.static import read_piece_table
    from evidence.embed.tokenizer import get_tokenizer

    table = read_piece_table(table_path).astype(np.float32)
    tok = get_tokenizer()

    def pieces(text: str) -> np.ndarray:
        return table[tok.encode(text, add_special_tokens=False).ids]

    for r in rows:
        if r.get("judged") and r["judged"]["texts"]:
            q = pieces(r["question"])
            r["_best"] = [
                [float(x) for x in (q @ e.T).max(axis=1)] if len(e := pieces(t)) else [0.0] * len(q)
                for t in r["judged"]["texts"]
            ]


def read_context(rows: list[dict[str, Any]], cache: Path) -> dict[str, Any]:
    """`--paraphrase-context`: for every row whose evidence leaves some concept to `absent_rare`
    (`absent_concepts`), each such concept's contextual similarity with the evidence
    (`grounding.context_similarity`, MiniLM's `embed_tokens`), kept in `cache` by (question,
    evidence), so a second fit embeds nothing; then `read_evidence` reads them at any
    `PARAPHRASE_CONTEXT_COSINE` (`CONTEXT` set). Returns the cost of each judgement newly read
    (ms: the word-piece pass and the products, as the service would spend them cold)."""
    import hashlib
    import time

    import evidence.verbatim.grounding as rg
    from evidence.verbatim.scoring import grounding

    global CONTEXT  # noqa: PLW0603

    def key(question: str, texts: Sequence[str]) -> str:
        return hashlib.sha1(json.dumps([question, list(texts)]).encode()).hexdigest()

    known: dict[str, dict[str, float]] = json.loads(cache.read_text()) if cache.exists() else {}
    costs: list[float] = []
    embedder = None
    for r in rows:
        read = evidence_of(r)
        if read is None or read[4] is None:
            continue
        groups, texts, given, _, df = read
        evidence, question = [*texts, *given], r["question"]
        k = key(question, evidence)
        if k in known:
            continue
        weights = concept_weights(question, groups)
        _, missing = grounding(groups, evidence, weights)
        unsaid = rg.absent_concepts(unique_concepts(groups), set(missing), weights, df)
        if not unsaid:
            known[k] = {}
            continue
        if embedder is None:
            from evidence.embed.minilm import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        start = time.perf_counter()
        known[k] = {
            c: round(v, 4)
            for c, v in rg.context_similarity(question, unsaid, evidence, embedder.embed_tokens).items()
        }
        costs.append((time.perf_counter() - start) * 1000)
    if costs:
        cache.write_text(json.dumps(known))

    def lookup(
        question: str, concepts: Sequence[Sequence[str]], texts: Sequence[str], tokens: Any
    ) -> dict[str, float]:
        sims = known.get(key(question, texts), {})
        return {c[0]: sims[c[0]] for c in concepts if c and c[0] in sims}

    rg.context_similarity = lookup  # type: ignore[assignment]
    CONTEXT = lambda texts: []  # noqa: E731  (a sentinel: the lookup reads no vectors)
    return {
        "new": len(costs),
        "p50_ms": float(np.percentile(costs, 50)) if costs else None,
        "p95_ms": float(np.percentile(costs, 95)) if costs else None,
    }


def at_bar(rows: list[dict[str, Any]], min_confidence: float) -> None:
    """`--min-confidence`: with every grounding floor off, a default row's confidence is the
    cosine/coverage signal's own probability: its refusals at another bar are read from it."""
    for r in rows:
        if r["profile"] == "default":
            r["can_answer"] = r["confidence"] >= min_confidence


def read_context_at(rows: list[dict[str, Any]], path: Path, cosine: float) -> dict[str, Any]:
    """`--paraphrase-context`: `read_context` with `PARAPHRASE_CONTEXT_COSINE` at `cosine`."""
    import evidence.verbatim.grounding as rg

    rg.PARAPHRASE_CONTEXT_COSINE = cosine
    return read_context(rows, path.with_name("context_sims.json"))


def read_paraphrases(
    cosine: float | None, *, whole_words: bool, rarity: float | None = None, source: str | None = None
) -> None:
    """Read what the shipped model reads only with `absent_rare` or `absent_named` (the variants
    the rows recorded, the paraphrases `read_evidence` reads from the recorded evidence, the
    absent names) whatever model ships:
    `cosine` sets `grounding.PARAPHRASE_COSINE` (None keeps it), `whole_words`
    `PARAPHRASE_WHOLE_WORDS` (docs/verbatim.md#refusal-paraphrase), `rarity` `ABSENT_MIN_RARITY`,
    `source` `PARAPHRASE_SOURCE` (docs/verbatim.md#refusal-wordnet), which only the package with
    refit52's WordNet reading has (`git apply bench/data/session52/refit52-wordnet.patch.txt`;
    docs/verbatim.md#refusal-refit52): without it the option would set a constant nothing reads
    and fit the static reading under WordNet's name, so it stops instead."""
    import evidence.verbatim.grounding as rg

    if source is not None and not hasattr(rg, "PARAPHRASE_SOURCE"):
        raise SystemExit(
            "--paraphrase-source needs the WordNet reading: "
            "git apply bench/data/session52/refit52-wordnet.patch.txt"
        )
    rg.READ_VARIANTS = rg.READ_RARE = rg.READ_PARAPHRASES = rg.READ_NAMED = True
    if cosine is not None:
        rg.PARAPHRASE_COSINE = cosine
    rg.PARAPHRASE_WHOLE_WORDS = whole_words
    if rarity is not None:
        rg.ABSENT_MIN_RARITY = rarity
    if source is not None:
        rg.PARAPHRASE_SOURCE = source


def bounds(specs: Sequence[str]) -> dict[str, float]:
    """`--lower-bound NAME=VALUE` pairs as a mapping."""
    out: dict[str, float] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        out[name.strip()] = float(value)
    return out


def main() -> int:
    # `--token-match` sets the module's threshold that `token_cover` reads (a script's one run).
    global TOKEN_MATCH  # noqa: PLW0603
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--max-loss", type=float, default=0.03)
    ap.add_argument(
        "--default-cap",
        type=float,
        default=1.0,
        help="the highest floor the default profile may get (SciFact's in-domain questions must "
        "stay answered, bench/answerability.py: 0.30)",
    )
    ap.add_argument(
        "--features",
        default=",".join(FEATURES),
        help=f"the features the dense model reads, comma-separated (default {','.join(FEATURES)}); "
        "the lexical model reads them without the cosine",
    )
    ap.add_argument(
        "--budget",
        choices=BUDGETS,
        default="found",
        help="what --max-loss bounds: the rows whose evidence held an answer (found), or answerable "
        "questions (answerable: the issue's false refusals)",
    )
    ap.add_argument(
        "--nested",
        action="store_true",
        help="learn each profile's training budget from held-out folds inside the training families "
        "(the largest at which their pooled held-out false refusals stay within --max-loss)",
    )
    ap.add_argument(
        "--min-confidence",
        type=float,
        default=None,
        help="the default profile's cosine/coverage bar (`answer_min_confidence`) to fit with: its "
        "refusals are re-read from each row's recorded confidence (default: as recorded)",
    )
    ap.add_argument(
        "--max-loss-verbatim",
        type=float,
        default=None,
        help="the verbatim profile's own budget (default --max-loss): main's false refusals + 1 "
        "over the answerable questions, session 45's rule",
    )
    ap.add_argument("--max-loss-default", type=float, default=None, help="the default profile's own budget")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pairs", type=Path, default=None, help="`pair_index` (bench/refusal_pairs.py)")
    ap.add_argument(
        "--static",
        type=Path,
        default=None,
        help="the `tok_` features from this static word-piece table (bench/static_pieces.py) "
        "instead of MiniLM's contextual pieces",
    )
    ap.add_argument(
        "--token-match",
        type=float,
        default=TOKEN_MATCH,
        help="`tok_share`/`tok_one`/`tok_soft`'s match cosine",
    )
    ap.add_argument(
        "--paraphrase-cosine",
        type=float,
        default=None,
        help="`absent_rare` reads an absent word as a paraphrase at this static-vector cosine "
        "with a word of the evidence (`grounding.paraphrased`; default `PARAPHRASE_COSINE`; "
        "above 1: no paraphrase, refuse14's reading)",
    )
    ap.add_argument(
        "--paraphrase-context",
        type=float,
        default=None,
        help="`absent_rare` reads paraphrases in context (`grounding.paraphrased_in_context`) at "
        "this cosine instead of the static table's (similarities cached in context_sims.json "
        "next to the rows)",
    )
    ap.add_argument(
        "--absent-min-rarity",
        type=float,
        default=None,
        help="`absent_rare` reads only concepts at least this rare in English "
        "(`grounding.ABSENT_MIN_RARITY`; 1: split words only)",
    )
    ap.add_argument(
        "--paraphrase-source",
        choices=("static", "wordnet", "both"),
        default=None,
        help="where `absent_rare` reads paraphrases (`grounding.PARAPHRASE_SOURCE`): the static "
        "vectors, WordNet 3.0's synonyms (docs/verbatim.md#refusal-wordnet) or both; needs "
        "bench/data/session52/refit52-wordnet.patch.txt applied (docs/verbatim.md#refusal-refit52)",
    )
    ap.add_argument(
        "--paraphrase-whole",
        action="store_true",
        help="read paraphrases only for question words the WordPiece vocabulary holds whole "
        "(`grounding.PARAPHRASE_WHOLE_WORDS`)",
    )
    ap.add_argument(
        "--fixed-from-main",
        action="store_true",
        help="hold the coefficients and bias of the shipped model (`grounding.DENSE_MODEL`) at their "
        "values and fit only the other features' coefficients (and the floors)",
    )
    ap.add_argument(
        "--lower-bound",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a coefficient not fitted below VALUE: if the fit puts it below, it is held at VALUE "
        "and the others are fitted again (repeatable)",
    )
    ap.add_argument(
        "--prior-from-main",
        action="store_true",
        help="pull the coefficients toward the shipped model's (`grounding.DENSE_MODEL`; 0 for a "
        "feature it does not read) instead of toward 0, at a strength chosen per fold among "
        "--prior-strengths by leave-one-family-out inside the training families",
    )
    ap.add_argument(
        "--prior-strengths",
        default="1,3,10,30,100,300",
        help="--prior-from-main's l2 strengths, comma-separated",
    )
    ap.add_argument(
        "--prior-choice",
        choices=("most", "strongest-passing"),
        default="most",
        help="how --prior-from-main's strength is chosen inside the training families: the most "
        "unanswerable refused within the budget (most), or the strongest pull that passes the "
        "+3 / +1 gate against the shipped constants (strongest-passing; none: as most)",
    )
    ap.add_argument(
        "--label",
        choices=LABELS,
        default="found",
        help="what the model learns as positive: the evidence holds an answer (found), or the "
        "question has one (answerable)",
    )
    args = ap.parse_args()
    read_paraphrases(
        args.paraphrase_cosine,
        whole_words=args.paraphrase_whole,
        rarity=args.absent_min_rarity,
        source=args.paraphrase_source,
    )
    rows = json.loads(args.rows.read_text())
    if args.pairs is not None:
        from refusal_shape import PAIRS

        PAIRS.update(json.loads(args.pairs.read_text()))
    if args.paraphrase_context is not None:
        print(read_context_at(rows, args.rows, args.paraphrase_context), file=sys.stderr)
    if args.min_confidence is not None:
        at_bar(rows, args.min_confidence)
    dense = [c for c in args.features.split(",") if c]
    TOKEN_MATCH = args.token_match
    if any(c in TOKEN_FEATURES for c in dense):
        if args.static is not None:
            read_static_tokens(rows, args.static)
        else:
            read_tokens(rows, args.rows.with_name("token_best.json"))
    if any(c in CONTRAST_FEATURES for c in dense):
        index_contrast(rows)
    if any(c in ABLATION_FEATURES for c in dense):
        read_sentences(rows, args.rows.with_name("sent_vectors.json"))
    budgets = {
        pr: b
        for pr, b in (("verbatim", args.max_loss_verbatim), ("default", args.max_loss_default))
        if b is not None
    }
    fitted = run(
        rows,
        args.max_loss,
        dense,
        args.default_cap,
        budget=args.budget,
        label=args.label,
        nested=args.nested,
        budgets=budgets,
        fixed={**DENSE_MODEL.coefficients, "bias": DENSE_MODEL.bias} if args.fixed_from_main else None,
        prior={**DENSE_MODEL.coefficients, "bias": DENSE_MODEL.bias} if args.prior_from_main else None,
        strengths=[float(v) for v in args.prior_strengths.split(",")] if args.prior_from_main else (),
        lower=bounds(args.lower_bound) if args.lower_bound else None,
        shipped_floors=SHIPPED_FLOORS if args.prior_choice == "strongest-passing" else None,
    )
    # One model and one set of floors ship: the lexical model is the dense one with a constant
    # cosine, fitted to the dense floors in every fold.
    report = {
        "dense": fitted,
        "lexical": run(
            rows,
            args.max_loss,
            [c for c in dense if c not in DENSE_ONLY],
            args.default_cap,
            budget=args.budget,
            label=args.label,
            dense=fitted,
            budgets=budgets,
        ),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, r in report.items():
        print(f"== {name} model (final, fitted on every family: {r['final']})")
        for f, m in r["families"].items():
            for pr in PROFILES:
                print(f"{f:<20} {pr:<9} floors {m['floors']} {m[pr]}")
        for pr in PROFILES:
            print(f"{'held-out pooled':<20} {pr:<9} {r['held_out'][pr]}")
        for pr in PROFILES:
            print(f"{'in-sample (final)':<20} {pr:<9} {r['in_sample'][pr]}")
    print("== to ship (verbatim/grounding.py; EVIDENCE_ANSWER_MIN_GROUNDING's default in config.py):")
    m = report["dense"]["final"]["model"]
    print(f"DENSE_MODEL = RefusalModel({m['coefficients']}, bias={m['bias']})")
    print(f"LEXICAL_COSINE = {report['lexical']['final']['cosine']}")
    print(f"LEXICAL_AGREEMENT = {report['lexical']['final']['agreement']}")
    floors = report["dense"]["final"]["floors"]
    print(f"REFUSAL_FLOOR = {floors['verbatim']}\nSAFETY_NET_FLOOR = {floors['safety_net']}")
    print(f"HITS_REFUSAL_FLOOR = {floors['default']}")
    if args.min_confidence is not None:
        print(f"answer_min_confidence = {args.min_confidence}  (config.py, fitted with it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
