"""Where the `default` profile's answers sit when it misses them within 2,000 characters (issue 22).

Usage: python bench/qa/default_gaps.py [ROOT] [--families A,B] [--store DIR] [--json] [--rows OUT]

Every question of the QA suite (ROOT, default bench/qa; `build/qa19` for the 19 development
families) is asked once with the `default` profile as `evidence eval --qa` asks it, the whole
profile (span anchor, `anchor_order`, focus, guardrail), recording each stage's output. So its
recall@2000 is the eval's exactly (unlike `focus_fit.py --misses`, which re-applies focus offline
without the span anchor). Each answerable question whose answer is not in the first 2,000
characters of the evidence is put in one class. The answer strings are located in the family's
documents (rebuilt from their passages; a whitespace run matches any whitespace run) and each
occurrence is followed through the stages; the occurrence that got furthest decides:

- `late`: the answer is in the evidence, past character 2,000 (`at`: where it starts);
- `cut_first`: the answering passage is the first hit `focus` saw, and focus kept other runs of it;
- `cut_later`: a later hit, whose first piece starts within the 2,000 characters (`dist`: characters
  from the nearest kept piece, negative when the answer ends before it);
- `cut_past_budget`: focus cut it out of a hit whose first piece starts past 2,000 characters;
- `split_by_cut`: a kept piece holds part of the answer string (the run's edge cuts through it);
- `pushed_out`: the answering hit was among those `focus` saw, but the first hit's extra runs moved
  it past `top_k`, and the guardrail dropped it;
- `ranked_out`: a candidate ranked past `top_k` (`stage_rank`: its rank in the list `top_k` cut);
- `past_rerank_k`: a first-stage candidate ranked past `rerank_k` (`candidate_limit`);
- `collapse_bound`: lost in `collapse_overlaps` (the bound trimmed the window holding it);
- `lost_at_<stage>`: dropped by another stage;
- `passage_not_candidate`: never a candidate, though its document had candidates;
- `document_not_candidate`: never a candidate, nor any passage of its document (e.g. the scope);
- `across_passages`: no single passage holds the answer string (chunking);
- `answer_not_in_text`: no document's text holds it (parsing, or the expected string).

A refusal never costs `default` recall (its hits are kept with `can_answer: false`); `refused`
marks the misses that are refused too. Prints the counts per family and class; `--json` the rows.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

#: The reader's budget the classes are measured against (the eval's recall@2000).
LIMIT = 2000


def _stages_before_focus() -> tuple[str, ...]:
    """The `default` profile's stages up to `top_k` (before `focus`), in order: what a candidate
    can be lost at. Read from the profile, so a stage added there is classified here too."""
    from evidence.profiles import get_profile

    names = tuple(s.name for s in get_profile("default").stages)
    return names[: names.index("top_k") + 1]


STAGES = _stages_before_focus()
#: The class of an answer held after one stage and not after the next, by the next stage.
_LOST_AT = {"top_k": "ranked_out", "candidate_limit": "past_rerank_k", "collapse_overlaps": "collapse_bound"}
_SPACE = re.compile(r"\s+")

#: One candidate as recorded: (chunk_id, document_id, char_start, char_end, text or None).
Entry = tuple[str, str, int, int, "str | None"]
#: A document: its text (rebuilt from its passages) and its passages' (chunk_id, start, end).
Document = tuple[str, Sequence[tuple[str, int, int]]]


def squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def found(texts: Sequence[str], answers: Sequence[str], limit: int = LIMIT) -> bool:
    """The eval's test (`evaluation.qa.answer_found`)."""
    head = squash("\n".join(texts))[:limit]
    return any(squash(a) in head for a in answers)


def occurrences(docs: Mapping[str, Document], answers: Sequence[str]) -> list[tuple[str, int, int]]:
    """Every (document, start, end) where an answer string is, whitespace runs matching any run."""
    out = set()
    for a in answers:
        words = squash(a).split(" ")
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
        for doc, (text, _) in docs.items():
            out.update((doc, m.start(), m.end()) for m in pattern.finditer(text))
    return sorted(out)


def classify(row: Mapping[str, Any], docs: Mapping[str, Document]) -> dict[str, Any]:
    """One miss's class. `row`: `answers`, `hits` (as returned: (chunk_id, document_id, start, end,
    text)), `stages` (name -> its output, `Entry`s), `refused`."""
    out: dict[str, Any] = {"refused": bool(row.get("refused"))}
    hits = row["hits"]
    stages: Mapping[str, Sequence[Entry]] = row["stages"]
    evidence = squash("\n".join(h[4] for h in hits))
    at = [p for p in (evidence.find(squash(a)) for a in row["answers"]) if p >= 0]
    if at:
        return {**out, "class": "late", "at": min(at)}
    occ = occurrences(docs, row["answers"])
    if not occ:
        return {**out, "class": "answer_not_in_text"}
    best: tuple[int, int, tuple[str, int, int]] | None = None  # (stage, rank there, occurrence)
    for doc, s, e in occ:
        for k, name in enumerate(STAGES):
            lst = stages.get(name, ())
            r = next((j for j, c in enumerate(lst) if c[1] == doc and c[2] <= s and e <= c[3]), None)
            if r is not None and (best is None or k > best[0]):
                best = (k, r, (doc, s, e))
    if best is None:
        if not any(a <= s and e <= b for doc, s, e in occ for _, a, b in docs[doc][1]):
            return {**out, "class": "across_passages"}
        listed = {c[1] for c in stages.get("first_stage", ())}
        held = any(doc in listed for doc, _, _ in occ)
        return {**out, "class": "passage_not_candidate" if held else "document_not_candidate"}
    k, r, (doc, s, e) = best
    out["stage_rank"] = r + 1
    if STAGES[k] != "top_k":
        lost = STAGES[k + 1]
        return {**out, "class": _LOST_AT.get(lost, f"lost_at_{lost}")}
    cid = stages["top_k"][r][0]
    before, acc = [], 0
    for h in hits:
        before.append(acc)
        acc += len(squash(h[4])) + 1
    pieces = [(j, h) for j, h in enumerate(hits) if h[0] == cid]
    out["fused_rank"] = r + 1
    if not pieces:
        return {**out, "class": "pushed_out"}
    if any(h[2] < e and s < h[3] for _, h in pieces):
        return {**out, "class": "split_by_cut", "piece_at": before[pieces[0][0]]}
    first = pieces[0][0]
    out["piece_at"] = before[first]
    out["dist"] = min((s - h[3]) if s >= h[3] else (e - h[2]) for _, h in pieces)
    if before[first] >= LIMIT:
        return {**out, "class": "cut_past_budget"}
    return {**out, "class": "cut_first" if r == 0 else "cut_later"}


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The classes per family and pooled, as a Markdown table (largest class first)."""
    per: dict[str, Counter[str]] = {}
    for r in rows:
        per.setdefault(r["family"], Counter())[r["class"]] += 1
    total: Counter[str] = Counter(r["class"] for r in rows)
    classes = sorted(total, key=lambda c: (-total[c], c))
    lines = [
        "| family | " + " | ".join(classes) + " | misses |",
        "|---" * (len(classes) + 2) + "|",
    ]
    for fam in sorted(per):
        counts = per[fam]
        lines.append(
            f"| {fam} | " + " | ".join(str(counts[c]) for c in classes) + f" | {sum(counts.values())} |"
        )
    lines.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in classes) + f" | **{len(rows)}** |")
    return "\n".join(lines)


def documents(service: Any, index: str) -> dict[str, Document]:
    """Every document of `index`, its text rebuilt from its passages (a gap reads as NUL)."""
    from evidence.records import ChunkKind
    from evidence.search.base import ordered_lookup

    docs: dict[str, Document] = {}
    for info in service.backend.list_documents(index):
        for od in ordered_lookup(
            service.backend, index, {"document_id": [info.document_id]}, limit=10**7, kind=ChunkKind.PASSAGE
        ):
            buf = ["\x00"] * max(c.char_end for c in od.chunks)
            for c in od.chunks:
                buf[c.char_start : c.char_end] = list(c.text)
            docs[od.document_id] = ("".join(buf), [(c.chunk_id, c.char_start, c.char_end) for c in od.chunks])
    return docs


def ask(
    root: Path, store: str | None, families: Sequence[str] | None
) -> tuple[int, int, list[dict[str, Any]]]:
    """Every question asked once with `default`; (answerable, found within `LIMIT`, the miss rows)."""
    from evidence.config import Settings
    from evidence.evaluation.qa import load_qa
    from evidence.evaluation.suite import ensure_qa_index, find_qa_families, is_refusal
    from evidence.model import RetrieveRequest
    from evidence.rank import context as rank_context
    from evidence.rank import pipeline
    from evidence.service import EvidenceService

    seen: dict[str, list[Entry]] = {}
    run_stage = rank_context.run_stage

    def recording(stage: Any, candidates: Any, ctx: Any) -> Any:
        kept, record = run_stage(stage, candidates, ctx)
        seen[stage.name] = [
            (c.chunk.chunk_id, c.chunk.document_id, c.chunk.char_start, c.chunk.char_end, None) for c in kept
        ]
        return kept, record

    pipeline.run_stage = recording  # type: ignore[assignment]
    settings = Settings(store_dir=Path(store)) if store else Settings()
    service = EvidenceService(settings)
    answerable = hit = 0
    rows: list[dict[str, Any]] = []
    try:
        for family in find_qa_families(root, families):
            index, _ = ensure_qa_index(service, family)
            docs: dict[str, Document] | None = None
            for rec in load_qa(family.questions):
                if not rec["answers"]:
                    continue
                answerable += 1
                seen.clear()
                resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile="default"))
                hits = [
                    (h.chunk_id, h.document_id, h.citation.char_start, h.citation.char_end, h.text)
                    for h in resp.hits
                ]
                if found([h[4] for h in hits], rec["answers"]):
                    hit += 1
                    continue
                docs = docs if docs is not None else documents(service, index)
                row = {
                    "answers": rec["answers"],
                    "hits": hits,
                    "stages": dict(seen),
                    "refused": is_refusal(resp),
                }
                rows.append({"family": family.name, "question": rec["question"], **classify(row, docs)})
    finally:
        pipeline.run_stage = run_stage  # type: ignore[assignment]
    return answerable, hit, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(HERE))
    ap.add_argument("--families", default="")
    ap.add_argument("--store", default=None)
    ap.add_argument("--json", action="store_true", help="the rows as JSON instead of the table")
    ap.add_argument("--rows", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    fams = [f for f in args.families.split(",") if f] or None
    answerable, hit, rows = ask(Path(args.root), args.store, fams)
    if args.rows:
        Path(args.rows).write_text(json.dumps(rows, indent=1) + "\n")
    if args.json:
        print(json.dumps({"answerable": answerable, "found": hit, "rows": rows}, indent=1))
    else:
        print(f"answerable {answerable}, within {LIMIT} characters {hit}, misses {len(rows)}")
        print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
