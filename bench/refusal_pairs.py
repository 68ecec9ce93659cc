"""`pair_index` for recorded refusal rows (session 45, ref17's fifth candidate).

Usage: python bench/refusal_pairs.py rows.json QA_ROOT --store DIR > pairs.json

For each row (question, profile), the question's two subject concepts that some passage of the
index uses and that it uses least (`index_pair`), and whether one passage of the index holds both
(`pair_in_index`: one BM25 call). Measured, not shipped (bench/data/session45/ref17.md: AUC
0.52). Written as {family: {question|profile: value}}; `bench/refusal_fit.py --pairs pairs.json`
reads it as the `pair_index` feature, and `bench/refusal_shape.py --pairs pairs.json` measures
its AUC.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.errors import EvidenceError  # noqa: E402
from evidence.evaluation import ensure_qa_index, find_qa_families  # noqa: E402
from evidence.records import ChunkKind  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402
from evidence.verbatim.answer_types import answer_types  # noqa: E402
from evidence.verbatim.grounding import (  # noqa: E402
    _WORD,
    TermCounts,
    concept_weights,
    index_rarity,
    unique_concepts,
)
from evidence.verbatim.scoring import grounding, terms  # noqa: E402

#: `pair_in_index`: how many passages of the BM25 ranking of the pair's words are read.
PAIR_DEPTH = 20


def index_pair(
    question: str, groups: Sequence[Sequence[str]], df: Mapping[str, int]
) -> list[tuple[str, ...]]:
    """The question's two subject concepts (`key_concepts`' subject: not the words that ask for
    the kind of answer) that some passage of the index uses (`df` > 0) and that it uses least
    (ties: the rarer in English); fewer when it has fewer. A word the index does not use (a
    paraphrase, an abbreviation, a thing it never names) is never one of them."""
    concepts = unique_concepts(groups)
    weights = concept_weights(question, groups)
    types = answer_types().expected(question)
    asking = {
        t for w in _WORD.findall(question) if any(a.asked_by(w, hints=False) for a in types) for t in terms(w)
    }
    used = [c for c in concepts if not asking & set(c) and max((df.get(t, 0) for t in c), default=0) > 0]
    used.sort(key=lambda c: (-index_rarity(c, df), -max(weights.get(t, 1.0) for t in c)))
    return used[:2]


def pair_in_index(
    backend: Any,
    index: str,
    question: str,
    groups: Sequence[Sequence[str]],
    df: Mapping[str, int],
) -> float:
    """Whether the documents ever say the question's two least-used subject concepts
    (`index_pair`) together: 1 when a passage among the first `PAIR_DEPTH` of the BM25 ranking of
    their words (the request's view: `backend`'s filters) holds both (as `grounding` reads a
    concept), 0 when none does; 1 with fewer than two such concepts or when the backend cannot
    rank. "Is X approved for Y", where the label uses X and Y but never in one passage."""
    pair = index_pair(question, groups, df)
    if len(pair) < 2:
        return 1.0
    words = [w for w in _WORD.findall(question) if any(set(terms(w)) & set(c) for c in pair)]
    query = " ".join(dict.fromkeys(words)) or " ".join(t for c in pair for t in c)
    try:
        hits = backend.lexical(index, query, k=PAIR_DEPTH, kind=ChunkKind.PASSAGE)
    except EvidenceError:
        return 1.0
    for h in hits:
        if all(grounding([c], [h.chunk.text])[0] > 0 for c in pair):
            return 1.0
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("root", type=Path)
    ap.add_argument("--store", type=Path, required=True)
    args = ap.parse_args()
    rows = json.loads(args.rows.read_text())
    service = EvidenceService(Settings(store_dir=args.store))
    out: dict[str, dict[str, Any]] = {}
    times: list[float] = []
    try:
        families = sorted({r["family"] for r in rows})
        for family in find_qa_families(args.root, families):
            index, _ = ensure_qa_index(service, family)
            mine = out.setdefault(family.name, {})
            for r in rows:
                j = r.get("judged")
                if r["family"] != family.name or not j or j.get("df") is None:
                    continue
                df = TermCounts(j["df"], j.get("df_variants") or ())
                t0 = time.perf_counter()
                mine[f"{r['question']}|{r['profile']}"] = pair_in_index(
                    service.backend, index, r["question"], [tuple(g) for g in j["groups"]], df
                )
                times.append(time.perf_counter() - t0)
            print(f"{family.name}: done", file=sys.stderr)
    finally:
        service.close()
    times.sort()
    if times:
        print(
            f"pair_in_index: {len(times)} calls, p50 {1000 * times[len(times) // 2]:.1f} ms, "
            f"p95 {1000 * times[int(len(times) * 0.95)]:.1f} ms",
            file=sys.stderr,
        )
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
