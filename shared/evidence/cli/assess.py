"""`evidence assess --index NAME --criteria FILE.jsonl`: the batch assessment chain in-process,
with the same steps and payloads as the state machine (`evidence.assess`).

A criterion line that is not `{id, question}` (or repeats an id) fails alone, as a criterion
that fails in the chain does; the others run. Exit 0 only when every criterion succeeded, 1 when
any failed, 2 when the batch itself is refused (no criteria, bad index name, unreadable file).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidence.cli import common
from evidence.cli.common import EXIT_FAILED, EXIT_OK, CliError, Command, shown_path
from evidence.cli.output import write_jsonl

if TYPE_CHECKING:
    from evidence.assess import Criterion, CriterionResult, ResultStore


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, metavar="NAME", help="index name")
    p.add_argument(
        "--criteria", required=True, type=Path, metavar="FILE.jsonl", help="JSONL of {id, question}"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="JSONL of per-criterion results (default: stdout)",
    )
    p.add_argument("--profile", default="default", metavar="P", help="ranking profile (default: default)")
    p.add_argument(
        "--output-s3-uri",
        default=None,
        metavar="S3URI",
        help="write each criterion's result to s3://bucket/prefix/ as the state machine does",
    )
    p.add_argument(
        "--principal",
        default=None,
        metavar="P",
        help="run the batch as this principal: with an access policy set (EVIDENCE_ACCESS_POLICY) "
        "it needs read access to the index",
    )


@dataclass
class CriteriaFile:
    """The criteria of a file, and the lines refused as criteria (each a failed result)."""

    criteria: list[Criterion] = field(default_factory=list)
    refused: list[CriterionResult] = field(default_factory=list)
    #: result order: ("ok", i) = criteria[i], ("refused", j) = refused[j], in line order
    order: list[tuple[str, int]] = field(default_factory=list)


def read_criteria(path: Path) -> CriteriaFile:
    """JSONL of {id, question}; blank lines skipped; a line without id gets its line number.
    OSError when the file cannot be read."""
    from pydantic import ValidationError

    from evidence.assess import Criterion, CriterionResult

    out = CriteriaFile()
    seen: set[str] = set()
    where = shown_path(path)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        raw: Any = None
        try:
            raw = json.loads(line)
            if isinstance(raw, dict):
                raw = {**raw, "id": str(raw.get("id", n))}
            criterion = Criterion.model_validate(raw)
            if criterion.id in seen:
                raise ValueError(f"duplicate criterion id {criterion.id!r}")
        except (ValueError, ValidationError) as exc:
            cid = str(raw["id"]) if isinstance(raw, dict) and raw.get("id") else str(n)
            error = {
                "code": "validation_error",
                "message": f"{where}:{n}: {_reason(exc)}",
                "field": "criteria",
            }
            out.order.append(("refused", len(out.refused)))
            out.refused.append(CriterionResult(id=cid, status="failed", error=error))
            continue
        seen.add(criterion.id)
        out.order.append(("ok", len(out.criteria)))
        out.criteria.append(criterion)
    return out


def _reason(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"]))
        return f"not a criterion {{id, question}}: {where + ': ' if where else ''}{err['msg']}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} (column {exc.colno})"
    return str(exc)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from evidence.assess import AssessmentInput, run_assessment, store_for
    from evidence.progress import Progress

    try:
        read = read_criteria(args.criteria)
    except OSError as exc:
        raise CliError(f"{shown_path(args.criteria)}: cannot read: {exc.strerror or exc}") from None
    if not read.criteria and not read.refused:
        raise CliError(f"{shown_path(args.criteria)}: no criteria (JSONL lines of {{id, question}})")
    try:
        batch = AssessmentInput(
            index=args.index,
            profile=args.profile,
            criteria=read.criteria,
            output_s3_uri=args.output_s3_uri,
            principal=args.principal,
        )
    except ValidationError as exc:
        raise common.request_error(exc) from None
    service = common.service_from_args(args)
    bar = Progress(f"assessing {batch.index}")
    try:
        store = store_for(batch.output_s3_uri or "mem://")
        summary = run_assessment(
            service, batch, store=store, progress=lambda done, total, _: bar(done, total, "criteria")
        )
        ran = _result_lines(summary["results"], store)
    finally:
        bar.close()
        service.close()
    refused = [r.model_dump(exclude_none=True) for r in read.refused]
    lines = [ran[i] if kind == "ok" else refused[i] for kind, i in read.order]
    write_jsonl(lines, args.out)
    failed = summary["failed"] + len(refused)
    print(
        f"assessed {len(lines)} criteria: {summary['succeeded']} ok, {failed} failed"
        + (f" → {shown_path(args.out)}" if args.out else ""),
        file=sys.stderr,
    )
    for line in lines:
        if line.get("status") != "ok":
            print(f"evidence assess: {line['id']}: {line['error']['message']}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _result_lines(results: list[dict[str, Any]], store: ResultStore) -> list[dict[str, Any]]:
    """Each criterion's full result (fetched from the store), or its failure entry."""
    lines = []
    for r in results:
        if r["status"] == "ok" and r.get("result_uri"):
            lines.append({**store.get_json(r["result_uri"]), "result_uri": r["result_uri"]})
        else:
            lines.append(r)
    return lines


COMMAND = Command(
    "assess",
    "run the batch assessment chain (plan → retrieve → format) over criteria",
    add_arguments,
    run,
    description="Batch assessment locally: the same steps and payloads as the state machine.",
)
