"""Static word-piece vectors distilled from the shipped MiniLM (model2vec-style), for the focus
paraphrase lever in `bench/qa/focus_fit.py --static` (docs/ranking.md#focus-static).

Usage: python bench/static_pieces.py [--out build/static_pieces.npz] [--dims 128] [--batch 512]

Every word piece of the MiniLM vocabulary is embedded once, alone (`[CLS] piece [SEP]`, the
shipped int8 ONNX model, mean-pooled over the three positions as the model pools a sentence),
then optionally projected by PCA to `--dims` dimensions (the mean removed: the common direction
every piece shares says nothing about which words are alike) and L2-normalised. A word's vector
is then the mean of its pieces' rows, a text's the mean of its words': a table lookup, no model
at query time. Prints the build time and the table's size.

`StaticPieces` reads the table as `rank.dedup.Paraphrase`: per sentence of a hit, how near its
words come to each question term (the best cosine of the term's vector with a word's, rescaled
above `floor`), with `absent_only` only for the terms the whole hit lacks (a word the hit says
in another sentence is no paraphrase to look for).
"""

from __future__ import annotations

import argparse
import bisect
import sys
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.embed.minilm import MiniLMEmbedder  # noqa: E402
from evidence.embed.static import read_piece_table  # noqa: E402
from evidence.embed.tokenizer import get_tokenizer  # noqa: E402
from evidence.search.analysis import get_analyzer  # noqa: E402

Vectors = npt.NDArray[np.float32]


class StaticPieces:
    """Word vectors from a (vocabulary, dims) table of unit piece vectors (`rank.dedup.Paraphrase`)."""

    def __init__(self, table: Vectors, *, floor: float = 0.5, absent_only: bool = True) -> None:
        self.table = table
        self.floor = floor
        self.absent_only = absent_only
        self._query: tuple[str, tuple[str, ...], Vectors] | None = None
        self._texts: dict[str, tuple[list[tuple[int, int]], Vectors, frozenset[str]]] = {}

    @classmethod
    def load(cls, path: Path, **kw: object) -> StaticPieces:
        """The table in `path` (`embed.static.read_piece_table`: a missing file names the command
        that builds it), as float32."""
        return cls(read_piece_table(path).astype(np.float32), **kw)  # type: ignore[arg-type]

    def words(self, text: str) -> tuple[list[tuple[int, int]], Vectors, frozenset[str]]:
        """Each content word's (start, end) and unit vector (the mean of its pieces'; words the
        analyser drops, stop words and punctuation, left out), and the text's analysed terms."""
        got = self._texts.get(text)
        if got is None:
            enc = get_tokenizer().encode(text, add_special_tokens=False)
            groups: dict[int, list[int]] = {}
            for k, w in enumerate(enc.word_ids):
                if w is not None:
                    groups.setdefault(w, []).append(k)
            spans: list[tuple[int, int]] = []
            rows: list[Vectors] = []
            for ks in groups.values():
                a, b = enc.offsets[ks[0]][0], enc.offsets[ks[-1]][1]
                if not _content(text[a:b].lower()):
                    continue
                v = self.table[[enc.ids[k] for k in ks]].mean(axis=0)
                rows.append(v / max(float(np.linalg.norm(v)), 1e-12))
                spans.append((a, b))
            vecs = np.stack(rows) if rows else np.zeros((0, self.table.shape[1]), dtype=np.float32)
            got = self._texts[text] = (spans, vecs, frozenset(get_analyzer().analyze(text)))
        return got

    def query_terms(self, query: str, terms: set[str]) -> tuple[tuple[str, ...], Vectors]:
        """The question's analysed terms and one unit vector each (the mean of its words')."""
        if self._query is not None and self._query[0] == query:
            return self._query[1], self._query[2]
        spans, vecs, _ = self.words(query)
        by_term: dict[str, list[int]] = {}
        for k, (a, b) in enumerate(spans):
            for t in get_analyzer().analyze(query[a:b]):
                if t in terms:
                    by_term.setdefault(t, []).append(k)
        names = tuple(by_term)
        out = np.zeros((len(names), self.table.shape[1]), dtype=np.float32)
        for row, t in enumerate(names):
            v = vecs[by_term[t]].mean(axis=0)
            out[row] = v / max(float(np.linalg.norm(v)), 1e-12)
        self._query = (query, names, out)
        return names, out

    def credit(
        self, query: str, terms: set[str], text: str, spans: Sequence[tuple[int, int]]
    ) -> list[dict[str, float]]:
        out: list[dict[str, float]] = [{} for _ in spans]
        names, qv = self.query_terms(query, terms)
        wspans, wv, said = self.words(text)
        keep = [k for k, t in enumerate(names) if not (self.absent_only and t in said)]
        if not keep or not wspans or not spans:
            return out
        sim = qv[keep] @ wv.T  # (terms, words)
        starts = [a for a, _ in spans]
        owner = np.array([max(bisect.bisect_right(starts, a) - 1, 0) for a, _ in wspans])
        scale = 1.0 / (1.0 - self.floor)
        for s in np.unique(owner):
            best = sim[:, owner == s].max(axis=1)
            out[int(s)] = {
                names[keep[k]]: float((best[k] - self.floor) * scale)
                for k in np.nonzero(best > self.floor)[0]
            }
        return out


@lru_cache(maxsize=65536)
def _content(word: str) -> bool:
    return bool(get_analyzer().analyze(word))


def build(dims: int, batch: int) -> np.ndarray:
    tok = get_tokenizer()
    size = tok.get_vocab_size()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    emb = MiniLMEmbedder(batch_size=batch)
    ids = [[cls_id, p, sep_id] for p in range(size)]
    table = emb.embed_ids(ids, pad_to=1)  # (vocab, 384), unit rows
    if dims and dims < table.shape[1]:
        centred = table - table.mean(axis=0, keepdims=True)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        table = centred @ vt[:dims].T
    norms = np.linalg.norm(table, axis=1, keepdims=True)
    return (table / np.maximum(norms, 1e-12)).astype(np.float16)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", default=str(ROOT / "build" / "static_pieces.npz"))
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--batch", type=int, default=512)
    args = ap.parse_args()
    t0 = time.perf_counter()
    table = build(args.dims, args.batch)
    took = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, vectors=table)
    print(
        f"{table.shape[0]} pieces x {table.shape[1]} dims, built in {took:.1f} s;"
        f" {table.nbytes / 1e6:.1f} MB in memory, {out.stat().st_size / 1e6:.1f} MB on disk ({out})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
