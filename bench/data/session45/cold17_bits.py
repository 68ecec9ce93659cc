"""cold17: are the one-pass outputs (`MiniLMEmbedder.embed_documents_and_tokens`) the bits of the
two separate calls, whatever the batch? Span texts and headings of development indexes, embedded
(a) as today: `embed_documents` over spans + headings in slices of 32 (`CachedEmbedder`'s
`EMBED_SLICE`), `embed_tokens` over the spans in one call; (b) in one pass, spans only, in slices
of 32 and in other slice sizes and orders. np.array_equal on every vector and piece matrix.

    .venv/bin/python bench/data/session45/cold17_bits.py STORE [N]
"""

from __future__ import annotations

import random
import sqlite3
import sys
from pathlib import Path

import numpy as np

from evidence.embed.minilm import MiniLMEmbedder


def main() -> int:
    store = Path(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    rng = random.Random(45)
    texts: list[str] = []
    headings: list[str] = []
    for db in sorted(store.glob("indexes/*/records.sqlite3")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = con.execute("SELECT text, section FROM chunks WHERE kind = 'span'").fetchall()
        con.close()
        for text, section in rng.sample(rows, min(len(rows), n // 19 + 1)):
            texts.append(text)
            if section:
                headings.append(section)
    texts = list(dict.fromkeys(texts))[:n]
    headings = list(dict.fromkeys(headings))[: n // 4]
    # a few long ones: past FINE_WIDTH and past the 254-piece window
    texts += [" ".join(texts[i : i + 8]) for i in range(0, 80, 8)]
    emb = MiniLMEmbedder()
    mixed = texts + headings
    rng.shuffle(mixed)
    vec_a: dict[str, np.ndarray] = {}
    for s in range(0, len(mixed), 32):
        part = mixed[s : s + 32]
        vec_a.update(zip(part, emb.embed_documents(part), strict=True))
    pieces_a = dict(zip(texts, emb.embed_tokens(texts), strict=True))
    bad = 0
    for size, order in ((32, texts), (7, texts[::-1]), (len(texts), sorted(texts, key=len))):
        for s in range(0, len(order), size):
            part = order[s : s + size]
            vec_b, pieces_b = emb.embed_documents_and_tokens(part)
            for t, v, p in zip(part, vec_b, pieces_b, strict=True):
                if not np.array_equal(v, vec_a[t]) or not np.array_equal(p, pieces_a[t]):
                    bad += 1
    lengths = [len(p) for p in pieces_a.values()]
    print(
        f"{len(texts)} span texts ({min(lengths)}-{max(lengths)} pieces; {sum(x > 62 for x in lengths)} past"
        f" FINE_WIDTH), {len(headings)} headings, 3 batchings: {bad} differ"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
