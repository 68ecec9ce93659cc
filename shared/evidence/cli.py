"""`evidence …`: the command line. Exit codes: 0 ok, 1 failed, 2 bad usage or bad input."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evidence.errors import EvidenceError, NotFoundError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: Subcommands contributed by other modules: (module, add_parser function, run function).
_PLUGINS: tuple[tuple[str, str, str], ...] = (
    ("evidence.server", "add_serve_parser", "run_serve"),
    ("evidence.invoke", "add_invoke_parser", "run_invoke"),
    ("evidence.assess", "add_assess_parser", "run_assess"),
    ("evidence.migrate", "add_migrate_parser", "run_migrate"),
    ("evidence.verbatim.commands", "add_plan_parser", "run_plan"),
    ("evidence.coach_cli", "add_coach_parser", "run_coach"),
)


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _service(args: argparse.Namespace) -> Any:
    from evidence.config import Settings
    from evidence.service import EvidenceService

    overrides: dict[str, Any] = {}
    if getattr(args, "store", None):
        overrides["store_dir"] = Path(args.store)
    return EvidenceService(Settings(**overrides))


def _meta_pairs(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--meta takes KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def cmd_index(args: argparse.Namespace) -> int:
    from evidence.progress import Progress

    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise CliError(f"no such file or folder: {', '.join(missing)}")
    service = _service(args)
    if args.kind == "graph":
        # Knowledge-graph files (docs/coach.md): each validated whole; a refused one writes nothing.
        if args.type or args.meta:
            raise CliError("--type and --meta do not apply to --kind graph (nodes carry their own fields)")
        report = service.index_graph_paths(args.index, paths)
    else:
        bar = Progress(f"indexing into {args.index}")
        try:
            report = service.index_paths(
                args.index, paths, doc_type=args.type, metadata=_meta_pairs(args.meta), progress=bar
            )
        finally:
            bar.close()
    for source, reason in report.failed:
        print(f"error: {source}: {reason}", file=sys.stderr)
    created, updated, unchanged = (report.count(s) for s in ("created", "updated", "unchanged"))
    spans = sum(r.spans for r in report.indexed)
    print(
        f"indexed {len(report.indexed)} documents into {args.index!r} "
        f"({created} new, {updated} updated, {unchanged} unchanged; {report.chunks} passages, "
        f"{spans} spans) in {report.seconds:.1f}s"
        + (f"; {len(report.failed)} failed" if report.failed else "")
    )
    if report.refused:
        return EXIT_USAGE
    return EXIT_FAILED if report.failed else EXIT_OK


def _request_from_args(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from evidence.model import RetrieveRequest

    if not args.text.strip():
        raise CliError("the query is empty; give the question to retrieve evidence for")
    fields: dict[str, Any] = {"query": args.text, "profile": args.profile, "explain": args.explain}
    if args.criterion:
        fields["criterion_question"] = args.criterion
    if args.top_k is not None:
        fields["top_k"] = args.top_k
    try:
        return RetrieveRequest(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CliError(f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def print_response(resp: Any, fmt: str) -> None:
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


def cmd_query(args: argparse.Namespace) -> int:
    request = _request_from_args(args)
    service = _service(args)
    # stdout carries only the answer (`--format xml` is bare XML): anything the pipeline logs or
    # prints on the way, e.g. through a Powertools logger set up in this process, goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        resp = service.retrieve(args.index, request)
    print_response(resp, args.format)
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    from evidence.evaluation import run_eval
    from evidence.progress import Progress

    if (args.dataset is None) == (args.qa is None):
        raise CliError("give --dataset DIR or --qa FILE --index NAME")
    if args.qa is not None:
        return _eval_qa(args)
    service = _service(args)
    bar = Progress(f"eval {args.mode}")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # `--json` must be the last line on stdout
            result = run_eval(
                service, Path(args.dataset), mode=args.mode, spans=args.spans, limit=args.limit, progress=bar
            )
    finally:
        bar.close()
    if args.json:
        print(json.dumps(result, separators=(",", ":")))
    else:
        lat = result["latency_ms"]
        print(
            f"{result['dataset']} [{result['mode']}] {result['queries']} queries: "
            f"nDCG@10 {result['ndcg_at_10']:.4f}  recall@100 {result['recall_at_100']:.4f}  "
            f"MRR@10 {result['mrr_at_10']:.4f}  latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms  "
            f"(indexing {result['index_seconds']:.1f}s)"
        )
        if "spans" in result:
            print("spans: " + "  ".join(f"{k}={v}" for k, v in result["spans"].items()))
    return EXIT_OK


def _eval_qa(args: argparse.Namespace) -> int:
    from evidence.evaluation import run_qa
    from evidence.progress import Progress

    if not args.index:
        raise CliError("--qa needs --index NAME (the index holding the documents asked about)")
    service = _service(args)
    bar = Progress("eval qa")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # `--json` must be the last line on stdout
            result = run_qa(service, Path(args.qa), index=args.index, profile=args.profile, progress=bar)
    finally:
        bar.close()
    if args.json:
        print(json.dumps(result, separators=(",", ":"), ensure_ascii=False))
        return EXIT_OK
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
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from evidence.demo import run_demo

    return run_demo(_service(args))


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    parser = argparse.ArgumentParser(
        prog="evidence", description="Evidence retrieval for assessment workflows."
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        type=Path,
        metavar="DIR",
        help="store directory (default ./.evidence or EVIDENCE_STORE_DIR)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runners: dict[str, Callable[[argparse.Namespace], int]] = {}

    p = sub.add_parser("index", parents=[common], help="index files, folders, BEIR corpora or record JSONL")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--index", required=True, metavar="NAME")
    p.add_argument("--type", metavar="TYPE", help='metadata "type" for every document (e.g. tc_files)')
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--kind",
        choices=("documents", "graph"),
        default="documents",
        help="graph: knowledge-graph files (JSON or YAML) for the coach profile (docs/coach.md)",
    )
    runners["index"] = cmd_index

    p = sub.add_parser("query", parents=[common], help="retrieve evidence for a question")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--index", required=True, metavar="NAME")
    p.add_argument("--profile", default="default")
    p.add_argument("--criterion", metavar="Q", help="the criterion question (follow-ups are linked to it)")
    p.add_argument("--top-k", type=int, dest="top_k")
    p.add_argument("--format", choices=("text", "json", "xml"), default="text")
    p.add_argument("--explain", action="store_true")
    runners["query"] = cmd_query

    p = sub.add_parser("eval", parents=[common], help="quality and latency on a BEIR-layout dataset")
    p.add_argument("--dataset", metavar="DIR", help="a BEIR-layout folder")
    p.add_argument("--qa", metavar="FILE", help="verbatim QA JSONL {question, answers}; needs --index")
    p.add_argument("--index", metavar="NAME", help="the index --qa questions are asked of")
    p.add_argument("--profile", default="verbatim", help="profile for --qa (default verbatim)")
    p.add_argument("--mode", choices=("bm25", "dense", "hybrid", "full"), default="hybrid")
    p.add_argument("--spans", action="store_true", help="also score fact spans against rationale sentences")
    p.add_argument("--limit", type=int, help="only the first N queries (quick checks)")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    runners["eval"] = cmd_eval

    p = sub.add_parser("demo", parents=[common], help="index a bundled sample and run every profile")
    runners["demo"] = cmd_demo

    for module_name, add_name, run_name in _PLUGINS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        add = getattr(module, add_name)
        # Subcommands that work on a store take the shared options (`--store`) as a parent.
        wants_parents = "parents" in inspect.signature(add).parameters
        add(sub, [common]) if wants_parents else add(sub)
        runners[add_name.removeprefix("add_").removesuffix("_parser")] = getattr(module, run_name)
    return parser, runners


def main(argv: Sequence[str] | None = None) -> int:
    parser, runners = build_parser()
    args = parser.parse_args(argv)
    try:
        return runners[args.command](args)
    except CliError as exc:
        print(f"evidence {args.command}: error: {exc}", file=sys.stderr)
        return exc.code
    except NotFoundError as exc:
        print(f"evidence {args.command}: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except EvidenceError as exc:
        print(f"evidence {args.command}: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if 400 <= exc.status < 500 else EXIT_FAILED
    except KeyboardInterrupt:
        print(f"evidence {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
