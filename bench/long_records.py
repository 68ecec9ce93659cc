"""Long records in the dense leg: which rule scores a text longer than MiniLM's 256 word pieces.

Usage: python bench/long_records.py [--dataset DIR] [--store DIR] [--overlaps 0,64] [--cache FILE]

On `evidence eval`'s SciFact index (built if missing, from `--store`'s embedding cache), every
passage is cut into windows of 254 word pieces (`embed.windows.split_windows`, the last window
ending at the text's end) and every window is embedded once (kept in `--cache`, so a second run
embeds nothing). Then, for each rule, the dense leg scores a passage by:

- `first`: its first window (what the store held before: sentence-transformers' truncation);
- `max`: its best window against the query (multi-vector: one vector per window);
- `mean`: the re-normalised mean of its windows' unit vectors (one vector per passage);

and prints dense and hybrid (the default first stage, z-score fusion with score completion)
nDCG@10 / recall@100 over the test queries, and SciFact rationale-sentence recall@10 of the
passage-then-sentence span ranking (`evidence eval --spans`). The backend's lexical leg and spans
are used as they are; only its dense leg and stored vectors are replaced by the rule's.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from fusion_sweep import stage_scores  # noqa: E402

from evidence.config import Settings  # noqa: E402
from evidence.embed.base import document_key  # noqa: E402
from evidence.embed.cache import EmbeddingCache  # noqa: E402
from evidence.embed.minilm import MiniLMEmbedder  # noqa: E402
from evidence.embed.tokenizer import get_tokenizer  # noqa: E402
from evidence.embed.windows import LongTextRule, mean_of_windows, split_windows  # noqa: E402
from evidence.errors import IndexNotFoundError  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    ensure_indexed,
    find_dataset,
    load_qrels,
    load_queries,
)
from evidence.evaluation.beir import _iter_gold  # noqa: E402
from evidence.evaluation.metrics import span_metrics  # noqa: E402
from evidence.ingest.sources import file_items, source_overrides  # noqa: E402
from evidence.rank.first_stage import FirstStage, RetrievalMode  # noqa: E402
from evidence.records import Chunk, ChunkKind, SearchHit  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402
from evidence.verbatim.sentences import SpanRanking  # noqa: E402

ROOM = 254  # word pieces between [CLS] and [SEP]
TITLED = 1_000_000  # window keys past this are title + text windows (plan "title")


class RuleBackend:
    """The store's backend with its dense leg (and stored vectors) replaced by a window rule."""

    def __init__(
        self,
        inner: Any,
        chunks: Sequence[Chunk],
        windows: np.ndarray,
        owners: np.ndarray,
        rule: str,
        *,
        weights: np.ndarray,
    ) -> None:
        self.inner = inner
        self.chunks = list(chunks)
        self.pos = {c.chunk_id: i for i, c in enumerate(self.chunks)}
        self.rule = rule
        self.windows = windows
        self.owners = owners
        self.starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        if rule == "mean":
            self.single = mean_of_windows(windows, owners.tolist(), len(self.chunks))
        elif rule.startswith("wmean"):
            # Each window weighted by its word pieces; "wmean*F": the first window F times more.
            w = weights.copy()
            if "*" in rule:
                w[self.starts] *= float(rule.split("*")[1])
            self.single = mean_of_windows(windows, owners.tolist(), len(self.chunks), weights=w)
        elif rule == "first":
            self.single = windows[self.starts]
        self._q: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _scores(self, q: np.ndarray) -> np.ndarray:
        if self.rule == "max":
            return np.maximum.reduceat(self.windows @ q, self.starts)
        return self.single @ q

    def dense(
        self,
        index: str,
        vector: Any,
        *,
        k: int,
        filters: Any = None,
        kind: Any = ChunkKind.PASSAGE,
        light: bool = False,
    ) -> list[SearchHit]:
        assert not filters and kind in (ChunkKind.PASSAGE, None)
        q = np.asarray(vector, dtype=np.float32)
        self._q = q
        s = self._scores(q)
        top = np.argsort(-s, kind="stable")[:k]
        return [SearchHit(chunk=self.chunks[i], score=float(s[i]), dense=float(s[i])) for i in top]

    def vectors(self, index: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for cid in chunk_ids:
            i = self.pos.get(cid)
            if i is None:
                continue
            if self.rule == "max":
                # The window that scores best against the query being answered (dense() ran first).
                assert self._q is not None
                lo = self.starts[i]
                hi = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.owners)
                w = self.windows[lo:hi]
                out[cid] = w[int(np.argmax(w @ self._q))]
            else:
                out[cid] = self.single[i]
        return out


def end_windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Like `split_windows`, but the last window ends at `n` at full width (it re-reads tokens
    of its neighbour instead of being a short tail)."""
    spans = split_windows(n, size, overlap)
    if len(spans) > 1:
        spans[-1] = (n - size, n)
    return spans


def passages(dataset: Path, svc: EvidenceService) -> list[Chunk]:
    out: list[Chunk] = []
    for item in file_items(find_dataset(dataset).corpus, source_overrides(None, None)):
        doc = svc.chunk_source(item)  # type: ignore[arg-type]
        out.extend(c for c in doc.chunks if c.kind is ChunkKind.PASSAGE)
    return out


def seed_store(
    service: EvidenceService,
    index: str,
    *,
    chunks: Sequence[Chunk],
    hashes: Sequence[str],
    spans: Sequence[Sequence[tuple[int, int]]],
    known: dict[tuple[str, int, int], np.ndarray],
) -> int:
    windows = np.stack([known[(hashes[i], a, b)] for i, sp in enumerate(spans) for a, b in sp])
    owners = [i for i, sp in enumerate(spans) for _ in sp]
    weights = [b - a for sp in spans for a, b in sp]
    vectors = mean_of_windows(windows.astype(np.float32), owners, len(chunks), weights=weights)
    shipped = MiniLMEmbedder(long_text=LongTextRule.MEAN)
    sample = [i for i, sp in enumerate(spans) if len(sp) > 2][:16]
    fresh = shipped.embed_documents([chunks[i].search_text for i in sample])
    cos = (fresh * vectors[sample]).sum(axis=1)
    print(
        f"shipped embedder vs these vectors, {len(sample)} passages of 3+ windows: min cosine {cos.min():.6f}"
    )
    if cos.min() < 0.999:
        return 1
    store = service.settings.store_dir
    try:
        service.backend.get_index(index)
    except IndexNotFoundError:
        pass
    else:
        # `evidence eval` under `mean` finds this index written under `first` (another record and
        # fingerprint) and deletes it with its cache scope, these vectors too: delete it first, so
        # that it indexes the dataset afresh from them (docs/ingest.md#indexing-settings-of-an-index).
        service.delete_index(index)
        print(f"deleted index {index} of {store}: `evidence eval` indexes it afresh from these vectors")
    EmbeddingCache(store / "embeddings.sqlite3").put_many(
        document_key(shipped), list(zip(hashes, vectors, strict=True)), scope=f"index:{index}"
    )
    print(f"{len(hashes)} vectors written to {store} under {document_key(shipped)}")
    return 0


def time_rules(chunks: Sequence[Chunk], n: int) -> int:
    """Embedding time of the same passages under each rule, in alternating slices of 32 (so both
    rules see the same machine load)."""
    texts = [c.search_text for c in chunks[:: max(1, len(chunks) // n)]][:n]
    embedders = {rule: MiniLMEmbedder(long_text=rule) for rule in LongTextRule}
    seconds = dict.fromkeys(LongTextRule, 0.0)
    tokens = {rule: sum(len(x) for x in e.windows(texts)[0]) for rule, e in embedders.items()}
    embedders[LongTextRule.FIRST].embed_documents(texts[:8])  # warm-up
    for start in range(0, len(texts), 32):
        for rule, e in embedders.items():
            t0 = time.perf_counter()
            e.embed_documents(texts[start : start + 32])
            seconds[rule] += time.perf_counter() - t0
    for rule in LongTextRule:
        print(
            f"{rule.value:<6} {len(texts)} passages: {seconds[rule]:.1f} s, {tokens[rule]:,} tokens,"
            f" {tokens[rule] / seconds[rule]:,.0f} tokens/s, {len(texts) / seconds[rule]:.1f} passages/s"
        )
    return 0


def make_plans(
    names: str, lengths: Sequence[int], title_len: Sequence[int], body_len: Sequence[int]
) -> dict[str, list[list[tuple[int, int]]]]:
    """Each plan's windows per passage: `end`/`tail` over the search text's word pieces, `title`
    over the text's (each window then read after the title)."""
    plans: dict[str, list[list[tuple[int, int]]]] = {}
    for plan in names.split(","):
        how = plan.rstrip("0123456789")
        ov = int(plan[len(how) :])
        if how == "title":
            # Shifted by TITLED to keep their cache keys apart.
            plans[plan] = [
                [(TITLED + a, TITLED + b) for a, b in split_windows(m, ROOM - t, ov)]
                for m, t in zip(body_len, title_len, strict=True)
            ]
        else:
            split = end_windows if how == "end" else split_windows
            plans[plan] = [split(int(n), ROOM, ov) for n in lengths]
    return plans


def evaluate(
    svc: EvidenceService,
    index: str,
    ds: Any,
    queries: Sequence[tuple[str, str]],
    *,
    chunks: Sequence[Chunk],
    plans: dict[str, list[list[tuple[int, int]]]],
    hashes: Sequence[str],
    known: dict[tuple[str, int, int], np.ndarray],
    rule_names: str,
) -> None:
    """Print each rule's dense and hybrid nDCG@10 / recall@100 and rationale recall@10."""
    qrels = load_qrels(ds.qrels)
    qvec = dict(zip((q for q, _ in queries), (svc.embedder.embed_query(t) for _, t in queries), strict=True))
    qtext = dict(queries)
    gold = [(qid, g) for qid, g in _iter_gold(ds.rationales) if qid in qtext]
    rules: list[tuple[str, str]] = [("first", next(iter(plans)))] if "first" in rule_names else []
    rules += [(r, p) for p in plans for r in rule_names.split(",") if r != "first"]
    # Hybrid nDCG@10 on the two halves of the queries (even / odd position): a rule that only
    # helps one half is noise, not a rule.
    print(f"{'rule':<14} dense nDCG@10 R@100 | hybrid nDCG@10 R@100 (halves) | rationale R@10")
    for rule, ov in rules:
        spans = plans[ov]
        owners = np.array([i for i, sp in enumerate(spans) for _ in sp])
        windows = np.stack([known[(hashes[i], a, b)] for i, sp in enumerate(spans) for a, b in sp]).astype(
            np.float32
        )
        weights = np.array([b - a for sp in spans for a, b in sp], dtype=np.float32)  # text read
        be = RuleBackend(svc.backend, chunks, windows, owners, rule, weights=weights)
        row = []
        for mode in (RetrievalMode.DENSE, RetrievalMode.HYBRID):
            nd, rc = stage_scores(
                FirstStage(mode=mode),
                be,  # type: ignore[arg-type]
                index,
                queries=queries,
                vectors=qvec,
                qrels=qrels,
            )
            halves = f" ({statistics.fmean(nd[0::2]):.4f} / {statistics.fmean(nd[1::2]):.4f})"
            row.append(
                f"{statistics.fmean(nd):.4f} {statistics.fmean(rc):.4f}"
                + (halves if mode == "hybrid" else "")
            )
        ranking = SpanRanking()
        rec = []
        for qid, g in gold:
            ranked_spans = ranking.rank(be, index, qtext[qid], vector=qvec[qid], k=10)
            got = [(r.chunk.document_id, r.chunk.char_start, r.chunk.char_end) for r in ranked_spans]
            rec.append(span_metrics(got, g, 10)[0])
        name = rule if rule == "first" else f"{rule} {ov}"
        print(
            f"{name:<14} {row[0]}        | {row[1]} | {statistics.fmean(rec):.4f} ({len(rec)} q)",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--store", type=Path, default=ROOT / ".evidence")
    ap.add_argument("--rules", default="first,mean,wmean,max", help="first, mean, wmean, wmean*F, max")
    ap.add_argument("--plans", default="end0,tail0,end64", help="window plans: end|tail|title + overlap")
    ap.add_argument("--cache", type=Path, default=ROOT / "build" / "long_records_windows.npz")
    ap.add_argument(
        "--time-sample",
        type=int,
        default=0,
        help="only time embed_documents on every k-th passage, N in all, under `first` and `mean`",
    )
    ap.add_argument(
        "--seed-store",
        type=Path,
        help="write the `mean` vectors (plan tail0) into this store's embedding cache, after checking"
        " a sample against the shipped embedder, so `evidence eval` with EVIDENCE_EMBED_LONG_TEXT=mean"
        " indexes SciFact through the real path without embedding it again",
    )
    args = ap.parse_args()
    # The store's index holds first-window vectors (the rule it was built with).
    svc = EvidenceService(Settings(store_dir=args.store, embed_long_text=LongTextRule.FIRST))
    ds = find_dataset(args.dataset)
    qrels = load_qrels(ds.qrels)
    queries = load_queries(ds.queries, set(qrels))
    index, _ = ensure_indexed(svc, ds, with_vectors=True, progress=None)
    chunks = passages(args.dataset, svc)
    tok = get_tokenizer()
    ids = [e.ids for e in tok.encode_batch([c.search_text for c in chunks], add_special_tokens=False)]
    lengths = np.array([len(x) for x in ids])
    print(
        f"{len(chunks)} passages; word pieces p50 {np.median(lengths):.0f}, max {lengths.max()};"
        f" longer than {ROOM}: {np.mean(lengths > ROOM):.1%}; total {lengths.sum():,}",
        flush=True,
    )
    if args.time_sample:
        return time_rules(chunks, args.time_sample)
    # Window vectors: kept across runs, keyed by (text hash, start, end).
    known: dict[tuple[str, int, int], np.ndarray] = {}
    if args.cache.exists():
        z = np.load(args.cache, allow_pickle=False)
        for key, vec in zip(z["keys"], z["vectors"], strict=True):
            h, a, b = str(key).split(":")
            known[(h, int(a), int(b))] = vec
    hashes = [hashlib.sha256(c.search_text.encode("utf-8")).hexdigest() for c in chunks]
    # A first window is the vector the store already holds (the text truncated to 254 pieces).
    cache = EmbeddingCache(args.store / "embeddings.sqlite3")
    stored = cache.get_many(svc.embedder.model_id, hashes, scope=f"index:{index}")
    for h, n in zip(hashes, lengths, strict=True):
        if h in stored:
            known.setdefault((h, 0, min(int(n), ROOM)), stored[h])
    title = [e.ids for e in tok.encode_batch([c.title for c in chunks], add_special_tokens=False)]
    body = [e.ids for e in tok.encode_batch([c.text for c in chunks], add_special_tokens=False)]

    def model_input(i: int, a: int, b: int) -> list[int]:
        if a >= TITLED:
            return [cls_id, *title[i], *body[i][a - TITLED : b - TITLED], sep_id]
        return [cls_id, *ids[i][a:b], sep_id]

    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    plans = make_plans(args.plans, lengths, [len(x) for x in title], [len(x) for x in body])
    for i, h in enumerate(hashes):
        # A title + text window that is the text's first window is the vector the store holds.
        for a, b in plans.get("title0", [[]] * len(hashes))[i][:1]:
            first = (h, 0, min(int(lengths[i]), ROOM))
            if first in known and model_input(i, a, b) == [cls_id, *ids[i][: first[2]], sep_id]:
                known.setdefault((h, a, b), known[first])
    # In plan order, so the first plans are ready first (the cache is written every 256 windows).
    need = list(
        dict.fromkeys(
            (hashes[i], a, b)
            for spans in plans.values()
            for i, sp in enumerate(spans)
            for a, b in sp
            if (hashes[i], a, b) not in known
        )
    )
    emb = MiniLMEmbedder(max_tokens=ROOM + 2, batch_size=8)
    by_hash = {h: i for i, h in enumerate(hashes)}
    print(f"windows to embed: {len(need)} ({sum(b - a + 2 for _, a, b in need):,} tokens)", flush=True)
    t0 = time.perf_counter()
    for start in range(0, len(need), 256):
        part = need[start : start + 256]
        vecs = emb.embed_ids([model_input(by_hash[h], a, b) for h, a, b in part])
        known.update(zip(part, vecs, strict=True))
        keys = np.array([f"{h}:{a}:{b}" for h, a, b in known])
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.cache, keys=keys, vectors=np.stack(list(known.values())))
        print(f"  {start + len(part)}/{len(need)} in {time.perf_counter() - t0:.0f} s", flush=True)
    for ov, spans in plans.items():
        tokens = sum(b - a + 2 for sp in spans for a, b in sp)
        print(
            f"{ov}: {sum(len(sp) for sp in spans)} windows, {tokens:,} tokens embedded "
            f"(first window only: {sum(min(int(n), ROOM) + 2 for n in lengths):,})"
        )
    if args.seed_store:
        seeded = (
            svc
            if args.seed_store.resolve() == args.store.resolve()
            else EvidenceService(Settings(store_dir=args.seed_store))
        )
        return seed_store(seeded, index, chunks=chunks, hashes=hashes, spans=plans["tail0"], known=known)

    evaluate(
        svc, index, ds, queries, chunks=chunks, plans=plans, hashes=hashes, known=known, rule_names=args.rules
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
