"""cold17: a "cold" copy of an indexed store: its embedding cache keeps only what indexing wrote
(each passage's vector, by the hash of its `search_text`, in its index's scope) and its word-piece
cache nothing, as a store indexed with EVIDENCE_EMBED_SPANS_AT_INDEX=false (the default) that has
answered no question yet. Span vectors, heading vectors and word pieces are then embedded at query
time.

    python3 bench/data/session45/cold17_make_cold.py SRC_STORE DST_STORE
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
from pathlib import Path


def main() -> int:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    keep: set[tuple[str, str]] = set()
    for db in sorted(dst.glob("indexes/*/records.sqlite3")):
        con = sqlite3.connect(db)
        scope = f"index:{db.parent.name}"
        for text, title in con.execute("SELECT text, title FROM chunks WHERE kind = 'passage'"):
            search_text = f"{title} {text}" if title else text
            keep.add((scope, hashlib.sha256(search_text.encode("utf-8")).hexdigest()))
        con.close()
    emb = sqlite3.connect(dst / "embeddings.sqlite3")
    rows = emb.execute("SELECT scope, hash FROM scoped_embeddings").fetchall()
    drop = [r for r in rows if (r[0], r[1]) not in keep]
    with emb:
        emb.executemany("DELETE FROM scoped_embeddings WHERE scope = ? AND hash = ?", drop)
    emb.execute("VACUUM")
    emb.close()
    pieces = dst / "pieces.sqlite3"
    n_pieces = 0
    if pieces.exists():
        con = sqlite3.connect(pieces)
        con.execute("PRAGMA recursive_triggers=ON")
        (n_pieces,) = con.execute("SELECT count(*) FROM pieces").fetchone()
        with con:
            con.execute("DELETE FROM pieces")
        con.execute("VACUUM")
        con.close()
    print(
        f"{dst}: kept {len(rows) - len(drop)} passage vectors, dropped {len(drop)} other vectors"
        f" and {n_pieces} word-piece rows ({len(keep)} passage texts indexed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
