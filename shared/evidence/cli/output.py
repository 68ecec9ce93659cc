"""What the subcommands print: one place for the human-readable lines and the JSON ones.

Results go to stdout; errors and progress to stderr, so `--format xml|json` and `--json`
output can be piped as is.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.cli.common import shown_path

if TYPE_CHECKING:
    from evidence.coach.contract import CoachResponse
    from evidence.migrate import MigrateReport
    from evidence.model import Plan, RetrieveResponse
    from evidence.search.base import DocumentInfo, IndexInfo
    from evidence.service import IndexReport

_LINE_SUFFIX = re.compile(r"^(?P<path>.+?)(?P<line>:\d+)?$")


def print_response(resp: RetrieveResponse, fmt: str) -> None:
    """A retrieve response as `json` (the HTTP API's body), bare evidence `xml`, or readable `text`."""
    if fmt == "json":
        print(resp.model_dump_json())
        return
    if fmt == "xml":
        if resp.evidence_xml:
            print(resp.evidence_xml)
        return
    tel = resp.telemetry
    print(
        f"{len(resp.hits)} hits, {len(resp.followups)} follow-ups  [{tel.path_used}, {tel.total_ms:.0f} ms]"
    )
    if tel.degraded:
        print(f"degraded: {', '.join(tel.degraded)}")
    for h in resp.hits:
        where = h.source + (f" § {h.citation.section}" if h.citation.section else "")
        where += f" p.{h.citation.page}" if h.citation.page else ""
        print(f"\n[{h.rank}] {h.score:.4f}  {where}")
        if h.scores:
            print("    " + "  ".join(f"{k}={v:.4f}" for k, v in h.scores.items()))
        snippet = " ".join(h.text.split())
        print("    " + (snippet[:400] + ("…" if len(snippet) > 400 else "")))
    for f in resp.followups:
        print(f"\n[follow-up round {f.round_number}] {f.source}")
        print(f"    Q: {f.question}\n    A: {f.answer}")


def failure_source(source: str) -> str:
    """An input named in an error line: a file on disk (or `file:line` of a JSONL file) the way
    sources are shown (relative to the working directory below it, else absolute); anything else
    (a record's FILENAME, a document id) as it is."""
    match = _LINE_SUFFIX.match(source)
    if match is None:
        return source
    path = match.group("path")
    if not Path(path).exists():
        return source
    return shown_path(path) + (match.group("line") or "")


def print_failures(failed: Iterable[tuple[str, str]]) -> None:
    for source, reason in failed:
        print(f"error: {failure_source(source)}: {reason}", file=sys.stderr)


def index_summary(report: IndexReport, index: str) -> str:
    created, updated, unchanged = (report.count(s) for s in ("created", "updated", "unchanged"))
    spans = sum(r.spans for r in report.indexed)
    return (
        f"indexed {len(report.indexed)} documents into {index!r} "
        f"({created} new, {updated} updated, {unchanged} unchanged; {report.chunks} passages, "
        f"{spans} spans) in {report.seconds:.1f}s"
        + (f"; {len(report.failed)} failed" if report.failed else "")
    )


def print_eval_result(result: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, separators=(",", ":")))
        return
    lat = result["latency_ms"]
    print(
        f"{result['dataset']} [{result['mode']}] {result['queries']} queries: "
        f"nDCG@10 {result['ndcg_at_10']:.4f}  recall@100 {result['recall_at_100']:.4f}  "
        f"MRR@10 {result['mrr_at_10']:.4f}  latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms  "
        f"(indexing {result['index_seconds']:.1f}s)"
    )
    if "spans" in result:
        print("spans: " + "  ".join(f"{k}={v}" for k, v in result["spans"].items()))


def print_qa_result(result: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, separators=(",", ":"), ensure_ascii=False))
        return
    lat = result["latency_ms"]
    print(
        f"{result['qa_file']} on {result['index']} [{result['profile']}] {result['questions']} questions: "
        f"answer recall {result['answer_recall']:.4f} ({result['answerable']} answerable, first "
        f"{result['evidence_chars']} characters)  NO_RESULT precision {result['no_result_precision']:.4f} "
        f"recall {result['no_result_recall']:.4f}  latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms"
    )
    print("paths: " + "  ".join(f"{k}={v}" for k, v in result["paths"].items()))
    for miss in result["misses"]:
        print(f"miss: {miss['question']}  [{miss['path_used']}]")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_qa_suite_result(result: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, separators=(",", ":"), ensure_ascii=False))
        return
    narrow, wide = result["evidence_chars"]
    print(
        f"{result['qa_dir']} [{result['profile']}]: recall within {narrow}/{wide} characters of evidence, "
        "first answering hit rank, evidence characters per question, NO_RESULT precision/recall"
    )
    header = (
        f"{'family':<20} {'q':>4} {'ans':>4} {f'r@{narrow}':>7} {f'r@{wide}':>7} {'in ev.':>7} "
        f"{'rank':>9} {'chars':>7} {'nr prec':>7} {'nr rec':>7} {'false r':>7} {'p50 ms':>7}"
    )
    print(header)
    rows = [*result["families"].items(), ("overall", result["overall"])]
    for name, m in rows:
        rank = m["first_answer_rank"]
        ranks = "n/a" if rank["mean"] is None else f"{rank['mean']:.1f}/{rank['median']:g}"
        print(
            f"{name:<20} {m['questions']:>4} {m['answerable']:>4} {_pct(m['answer_recall_600']):>7} "
            f"{_pct(m['answer_recall_2000']):>7} {_pct(m['answer_in_evidence']):>7} {ranks:>9} "
            f"{m['evidence_chars']['mean']:>7.0f} {_pct(m['no_result_precision']):>7} "
            f"{_pct(m['no_result_recall']):>7} {_pct(m['false_refusals']):>7} {m['latency_ms']['p50']:>7.1f}"
        )
    for name, m in rows:
        print(f"paths {name}: " + "  ".join(f"{k}={v}" for k, v in m["paths"].items()))
    for miss in result["misses"]:
        print(f"miss [{miss['family']}]: {miss['question']}  [{miss['path_used']}]")


def print_migrate_report(report: MigrateReport, index: str, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_dict()))
    else:
        print(
            f"migrated {report.documents} document(s) ({report.chunks} chunks) from {index!r} to "
            f"{report.target_index!r}: {report.created} created, {report.updated} updated, "
            f"{report.unchanged} already there; {report.anchor_spans} anchor span vectors; "
            f"embedder {report.embedder_id} ({report.dimension} dims)"
        )
    for failure in report.failed:
        print(f"evidence migrate: {failure}", file=sys.stderr)


def print_plan(plan: Plan, degraded: Sequence[str], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(plan.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False))
        return
    note = f" (degraded: {', '.join(degraded)})" if degraded else ""
    print(f"planner: {plan.planner}{note}")
    print(f"entity: {plan.entity}  mode: {plan.query_mode}  attribute: {plan.attribute}")
    print(f"sections: {', '.join(plan.candidate_sections) or '-'}  level: {plan.extraction_level}")
    print("phrases: " + " | ".join(plan.search_phrases))


def print_coach(r: CoachResponse) -> None:
    verdict = "answer" if r.can_answer else "clarify" if r.needs_clarification else "out of scope"
    print(f"{verdict} (confidence {r.confidence:.2f}, intent {r.intent.value})")
    if r.clarification_question:
        print(f"  ask: {r.clarification_question}")
    for m in r.matched_los:
        print(f"  LO       {m.id:<12} {m.score:.2f}  {m.title}  [{m.reason}]")
    for s in r.supporting_los:
        print(f"  prereq   {s.id:<12} {s.score:.2f}  {s.title}  [{' -> '.join(s.path)}]")
    for c in r.content_items:
        print(f"  {c.type:<8} {c.id:<12} {c.score:.2f}  {c.title}  [for {c.for_lo}, {c.difficulty}]")
    for bullet, source in zip(r.minimal_context, r.minimal_context_sources, strict=True):
        print(f"  - {bullet}  ({source})")
    stages = ", ".join(f"{k} {v:.0f}" for k, v in r.telemetry.stages.items())
    degraded = f"; degraded: {', '.join(r.telemetry.degraded)}" if r.telemetry.degraded else ""
    print(f"  {r.telemetry.tokens} tokens, {r.telemetry.total_ms:.0f} ms ({stages}){degraded}")


def print_indexes(indexes: Sequence[IndexInfo], store: str, *, as_json: bool) -> None:
    if as_json:
        rows = [
            {
                "index": i.name,
                "documents": i.documents,
                "chunks": i.chunks,
                "embedder": i.embedder_id,
                "dimension": i.dimension,
            }
            for i in indexes
        ]
        print(json.dumps({"store": store, "indexes": rows}, separators=(",", ":")))
        return
    if not indexes:
        print(f"no indexes in {store}")
        return
    width = max(len("INDEX"), *(len(i.name) for i in indexes))
    print(f"{'INDEX':<{width}}  {'DOCUMENTS':>9}  {'CHUNKS':>8}  EMBEDDER")
    for i in indexes:
        embedder = f"{i.embedder_id} ({i.dimension} dims)" if i.dimension else i.embedder_id
        print(f"{i.name:<{width}}  {i.documents:>9,}  {i.chunks:>8,}  {embedder}")


def print_documents(index: str, documents: Sequence[DocumentInfo], *, as_json: bool) -> None:
    if as_json:
        rows = [
            {"document_id": d.document_id, "source": d.source, "passages": d.passages, "spans": d.spans}
            for d in documents
        ]
        print(json.dumps({"index": index, "documents": rows}, separators=(",", ":"), ensure_ascii=False))
        return
    print(f"{'PASSAGES':>8}  {'SPANS':>6}  DOCUMENT (source)")
    for d in documents:
        source = "" if d.source == d.document_id else f"  ({d.source})"
        print(f"{d.passages:>8,}  {d.spans:>6,}  {d.document_id}{source}")
    passages = sum(d.passages for d in documents)
    print(f"{len(documents):,} documents, {passages:,} passages in {index!r}")


def write_jsonl(lines: Iterable[dict[str, Any]], out: Path | None = None) -> None:
    """JSON lines to the file `out`, or to stdout."""
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
