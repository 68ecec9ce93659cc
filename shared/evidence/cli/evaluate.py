"""`evidence eval --dataset DIR` (quality and latency on a BEIR-layout dataset),
`evidence eval --qa FILE --index NAME` (answer recall of a verbatim QA file) and
`evidence eval --qa DIR` (the QA suite: one index per family, per-family and overall figures)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evidence.cli import common
from evidence.cli.common import EXIT_OK, CliError, Command
from evidence.cli.output import print_eval_result, print_qa_result, print_qa_suite_result


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", metavar="DIR", help="a BEIR-layout folder")
    p.add_argument(
        "--qa",
        metavar="FILE|DIR",
        help="verbatim QA JSONL {question, answers} (needs --index), or a QA suite folder of families",
    )
    p.add_argument("--index", metavar="NAME", help="the index --qa FILE questions are asked of")
    p.add_argument("--families", metavar="A,B", help="only these families of a --qa DIR suite")
    p.add_argument("--profile", default="verbatim", metavar="P", help="profile for --qa (default verbatim)")
    p.add_argument(
        "--mode", choices=("bm25", "dense", "hybrid", "full"), help="--dataset's first stage (default hybrid)"
    )
    p.add_argument("--spans", action="store_true", help="also score fact spans against rationale sentences")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N queries (quick checks)")
    p.add_argument("--json", action="store_true", help="print one JSON line")


def run(args: argparse.Namespace) -> int:
    if (args.dataset is None) == (args.qa is None):
        raise CliError("give --dataset DIR or --qa FILE --index NAME")
    from evidence.server import limit_blas_threads

    # One BLAS thread, as `evidence serve` runs: the products here are small (a question's span
    # vectors, 40 x 40 in the span MMR), and OpenBLAS's pool woken for each cost more process CPU
    # than it saved (docs/verbatim.md#span-mmr; bench/data/session50/guard22.md).
    limit_blas_threads()
    if args.qa is not None:
        # Refused rather than ignored: a quick check run with `--limit` would otherwise ask every
        # question and report figures the caller takes for a sample's.
        given = [
            o
            for o, v in (("--mode", args.mode), ("--limit", args.limit), ("--spans", args.spans or None))
            if v is not None
        ]
        if given:
            raise CliError(f"{', '.join(given)}: --dataset options, not --qa's")
        return _run_qa(args)
    mode = args.mode or "hybrid"
    from evidence.evaluation import run_eval
    from evidence.progress import Progress

    with common.quiet_service(args) as service:  # `--json` must be the last line on stdout
        bar = Progress(f"eval {mode}")
        try:
            result = run_eval(
                service, Path(args.dataset), mode=mode, spans=args.spans, limit=args.limit, progress=bar
            )
        finally:
            bar.close()
    print_eval_result(result, as_json=args.json)
    return EXIT_OK


def _run_qa(args: argparse.Namespace) -> int:
    from evidence.evaluation import run_qa
    from evidence.progress import Progress

    if Path(args.qa).is_dir():
        return _run_qa_suite(args)
    if args.families:
        raise CliError("--families needs --qa DIR (a QA suite folder)")
    if not args.index:
        raise CliError("--qa needs --index NAME (the index holding the documents asked about)")
    with common.quiet_service(args) as service:  # `--json` must be the last line on stdout
        bar = Progress("eval qa")
        try:
            result = run_qa(service, Path(args.qa), index=args.index, profile=args.profile, progress=bar)
        finally:
            bar.close()
    print_qa_result(result, as_json=args.json)
    return EXIT_OK


def _run_qa_suite(args: argparse.Namespace) -> int:
    from evidence.evaluation import run_qa_suite
    from evidence.progress import Progress

    if args.index:
        raise CliError("--qa DIR indexes each family itself (qa-<family>); drop --index")
    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
    with common.quiet_service(args) as service:  # `--json` must be the last line on stdout
        bar = Progress("eval qa suite")
        try:
            result = run_qa_suite(
                service, Path(args.qa), profile=args.profile, families=families, progress=bar
            )
        finally:
            bar.close()
    print_qa_suite_result(result, as_json=args.json)
    return EXIT_OK


COMMAND = Command(
    "eval",
    "quality and latency on a BEIR-layout dataset (--dataset) or a QA file or suite (--qa)",
    add_arguments,
    run,
)
