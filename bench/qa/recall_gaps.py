"""Where the verbatim evidence lost an answer it never returned (issue 22: recall@2000 misses).

Usage: python bench/qa/recall_gaps.py [ROOT] [--families A,B] [--store DIR] [--json]

Every answerable question of the QA suite (ROOT, default bench/qa) is asked with the `verbatim`
profile as `evidence eval --qa` asks it. A question whose expected answer is nowhere in the
evidence (not in any hit: `first_rank` null in the eval) is put in one class, read off the
cascade's own run (its scope, the path that answered, the span scorer's whole ranking):

- `scope`: no span of the scope the cascade read holds the answer, but a span of another document
  of the index does (the named-document scope or the entity's picked another document);
- `refused`: the path found evidence, the grounding check refused it (`NO_RESULT`);
- `rule_path`: a rule path (SECTION_EXACT, ATTRIBUTE_LOOKUP, ...) answered with spans that do
  not hold it, and `HYBRID_FACTSPAN` on its own would have brought it within the bounds;
- `not_candidate`: the answering span is in the scope but not a candidate of `HYBRID_FACTSPAN`
  (no question word and no scored passage);
- `below_top_n`: a candidate the lexical model ranked below the dense re-rank's `top_n`;
- `below_budget`: in the dense re-rank's head, ranked below what fits in 8 spans / 1,500 chars;
- `across_spans`: no single span holds it, 2-4 consecutive spans do (span segmentation);
- `not_parsed`: no span or run of spans of the index holds it.

`rule_path` and `refused` questions also say where the span scorer alone ranks the answer
(`hybrid_rank`: its rank among the deduplicated spans; `hybrid_in_600`, `hybrid_in_1500`).

A question whose answer is in the evidence but past character 600 (`evidence eval --qa`'s
recall@600 miss, recall@2000 hit) is a `late` row: the path, the evidence hit that first holds
the answer on its own (`hit`, 1-based; None when only hits read together hold it), where the
answer starts in the evidence as the eval reads it (`offset`), and how many hits ahead of it are
of its document and its section (`same_document_ahead`, `same_section_ahead`). Late rows are
counted apart from the classes.
Prints the counts per family and class (and the late answers), then each question.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    QA_EVIDENCE_CHARS,
    answer_found,
    ensure_qa_index,
    find_qa_families,
    load_qa,
)
from evidence.evaluation.qa import squash  # noqa: E402
from evidence.records import ChunkKind  # noqa: E402

MAX_SPANS, MAX_CHARS = 8, 1500
RULE_PATHS = {
    "SECTION_EXACT",
    "SECTION_FUZZY",
    "ATTRIBUTE_LOOKUP",
    "MULTI_SECTION_EVIDENCE",
    "ENTITY_OVERVIEW",
}


def holds(text: str, wanted: list[str]) -> bool:
    t = squash(text)
    return any(w in t for w in wanted)


def run_start(spans: list[Any], wanted: list[str]) -> Any | None:
    """The first span of the first run of 2-4 consecutive spans of one document that together
    hold an answer (`wanted`, squashed), or None. Read after the single spans, it finds the
    answers the span splitter cut (bench/qa/misses.py's `across_spans` too)."""
    texts = [squash(c.text) for c in spans]
    for i in range(len(spans)):
        for width in (2, 3, 4):
            run = spans[i : i + width]
            if len(run) < width or run[-1].document_id != run[0].document_id:
                break
            if any(w in " ".join(texts[i : i + width]) for w in wanted):
                return spans[i]
    return None


def across(spans: list[Any], wanted: list[str]) -> bool:
    """Whether 2-4 consecutive spans of one document hold an answer (`run_start`)."""
    return run_start(spans, wanted) is not None


@contextmanager
def cascade_runs() -> Iterator[list[Any]]:
    """The state (`CascadePaths`) of every verbatim cascade run while the block runs, in order,
    one per run: how this script and bench/span_rank_fit.py read the cascade's own scope and
    ranking instead of computing them again. `CascadePaths.run_path` is restored on the way out."""
    from evidence.verbatim.cascade_paths import CascadePaths

    captured: list[Any] = []
    original = CascadePaths.run_path

    def recording(self: CascadePaths, path: str) -> Any:
        if not captured or captured[-1] is not self:
            captured.append(self)
        return original(self, path)

    CascadePaths.run_path = recording  # type: ignore[method-assign]
    try:
        yield captured
    finally:
        CascadePaths.run_path = original  # type: ignore[method-assign]


def hybrid_order(state: Any) -> tuple[list[int], set[int], list[int]]:
    """(the span scorer's ranking, deduplicated as HYBRID_FACTSPAN returns it; the candidates;
    the lexical model's top_n head) for a captured run state."""
    from evidence.verbatim.hybrid import same_text
    from evidence.verbatim.span_rank import load_model

    spans = state.spans
    # The cascade's own ranking (`CascadePaths.hybrid_ranking`), so this diagnosis cannot drift
    # from what HYBRID_FACTSPAN returns.
    ranked, candidates, _ = state.hybrid_ranking()
    model = state.cfg.span_model or load_model()
    out: list[int] = []
    seen: set[str] = set()
    for _, i in ranked:
        key = same_text(spans[i].text)
        if key not in seen:
            seen.add(key)
            out.append(i)
    lex_head = [i for _, i in ranked[: model.top_n]] if ranked else []
    return out, set(candidates), lex_head


def bounded(texts: list[str]) -> list[str]:
    from evidence.rank.guardrail import within_chars

    head = texts[:MAX_SPANS]
    n, _ = within_chars([len(t) for t in head], MAX_CHARS)
    return head[:n]


def classify_run(rec: dict[str, Any], resp: Any, state: Any | None, every: list[Any]) -> dict[str, Any]:
    wanted = [squash(a) for a in rec["answers"]]
    path = resp.telemetry.path_used
    row: dict[str, Any] = {"path": path}
    answer_docs = sorted({c.document_id for c in every if holds(c.text, wanted)})
    row["answer_documents"] = answer_docs
    spans = state.spans if state is not None else []
    row["scope_documents"] = sorted({c.document_id for c in spans})
    in_scope = [i for i, c in enumerate(spans) if holds(c.text, wanted)]
    if state is not None and spans:
        order, candidates, lex_head = hybrid_order(state)
        texts = [spans[i].text for i in order]
        evidence = bounded(texts)
        row["hybrid_in_600"] = answer_found(evidence, rec["answers"], 600)
        row["hybrid_in_1500"] = answer_found(evidence, rec["answers"], MAX_CHARS)
        ranks = [n for n, i in enumerate(order) if i in in_scope]
        row["hybrid_rank"] = ranks[0] + 1 if ranks else None
        row["spans_in_scope"] = len(spans)
        row["candidates"] = len(candidates)
    else:
        order, candidates, lex_head = [], set(), []
        row["hybrid_in_600"] = row["hybrid_in_1500"] = False
        row["hybrid_rank"] = None
    row["class"] = gap_class(
        path=path,
        in_scope=in_scope,
        answer_elsewhere=bool(answer_docs) or across(every, wanted),
        across_in_scope=across(spans, wanted),
        hybrid_in_bounds=row["hybrid_in_1500"],
        candidates=candidates,
        lexical_head=set(lex_head),
    )
    return row


def gap_class(
    *,
    path: str,
    in_scope: list[int],
    answer_elsewhere: bool,
    across_in_scope: bool,
    hybrid_in_bounds: bool,
    candidates: set[int],
    lexical_head: set[int],
) -> str:
    """The class of a question whose answer is nowhere in the evidence (the module's list), from
    where its answering spans sit: `in_scope`, their positions among the scope's spans."""
    if not in_scope:
        if across_in_scope:
            return "across_spans"
        return "scope" if answer_elsewhere else "not_parsed"
    if path == "NO_RESULT":
        return "refused"
    if path in RULE_PATHS and hybrid_in_bounds:
        return "rule_path"
    if not any(i in candidates for i in in_scope):
        return "not_candidate"
    if not any(i in lexical_head for i in in_scope):
        return "below_top_n"
    return "below_budget"


def late_row(rec: dict[str, Any], resp: Any) -> dict[str, Any]:
    """Where an answer found in the evidence but past character 600 sits (the module's list)."""
    wanted = [squash(a) for a in rec["answers"]]
    hits = list(resp.hits)
    joined = squash("\n".join(h.text for h in hits))
    offsets = [joined.find(w) for w in wanted if w in joined]
    hit = next((n for n, h in enumerate(hits) if holds(h.text, wanted)), None)
    row: dict[str, Any] = {
        "class": "late",
        "path": resp.telemetry.path_used,
        "hit": hit + 1 if hit is not None else None,
        "offset": min(offsets) if offsets else None,
        "hits": len(hits),
    }
    if hit is not None:
        own, ahead = hits[hit], hits[:hit]
        row["same_document_ahead"] = sum(h.document_id == own.document_id for h in ahead)
        row["same_section_ahead"] = sum(
            h.document_id == own.document_id and h.citation.section == own.citation.section for h in ahead
        )
    return row


def main(argv: list[str] | None = None) -> int:
    from evidence.model import RetrieveRequest
    from evidence.service import EvidenceService

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("root", nargs="?", default=str(HERE))
    ap.add_argument("--families", default="")
    ap.add_argument("--store", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    settings = Settings(store_dir=Path(args.store)) if args.store else Settings()
    service = EvidenceService(settings)
    only = [f for f in args.families.split(",") if f] or None
    rows: list[dict[str, Any]] = []
    try:
        with cascade_runs() as captured:
            for family in find_qa_families(Path(args.root), only):
                index, _ = ensure_qa_index(service, family)
                docs = [d.document_id for d in service.backend.list_documents(index)]
                every = sorted(
                    (
                        h.chunk
                        for h in service.backend.lookup(
                            index, {"document_id": docs}, limit=1_000_000, kind=ChunkKind.SPAN
                        )
                    ),
                    key=lambda c: (c.document_id, c.char_start, c.sequence),
                )
                for rec in load_qa(family.questions):
                    if not rec["answers"]:
                        continue
                    captured.clear()
                    resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile="verbatim"))
                    texts = [h.text for h in resp.hits]
                    if answer_found(texts, rec["answers"], QA_EVIDENCE_CHARS):
                        continue
                    if answer_found(texts, rec["answers"], 1_000_000):
                        row = late_row(rec, resp)
                    else:
                        row = classify_run(rec, resp, captured[0] if captured else None, every)
                    row.update({"family": family.name, "question": rec["question"]})
                    rows.append(row)
                    print(f"{family.name}: {len(rows)}", file=sys.stderr, end="\r")
    finally:
        service.close()
    if args.json:
        print(json.dumps(rows))
        return 0
    nowhere = [r for r in rows if r["class"] != "late"]
    classes = sorted({r["class"] for r in nowhere})
    print("family | " + " | ".join(classes) + " | total | late (past 600)")
    for family in dict.fromkeys(r["family"] for r in rows):
        c = Counter(r["class"] for r in rows if r["family"] == family)
        late = c.pop("late", 0)
        print(f"{family} | " + " | ".join(str(c[k]) for k in classes) + f" | {sum(c.values())} | {late}")
    c = Counter(r["class"] for r in rows)
    late = c.pop("late", 0)
    print("all | " + " | ".join(str(c[k]) for k in classes) + f" | {len(nowhere)} | {late}")
    for r in rows:
        if r["class"] == "late":
            print(
                f"- [{r['family']}] late via {r['path']} (hit {r['hit']} of {r['hits']}, offset "
                f"{r['offset']}): {r['question']}"
            )
            continue
        print(
            f"- [{r['family']}] {r['class']} via {r['path']} (hybrid rank {r['hybrid_rank']}, "
            f"in 600/1500: {r['hybrid_in_600']}/{r['hybrid_in_1500']}; answer in {r['answer_documents']}, "
            f"scope {r['scope_documents'][:4]}): {r['question']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
