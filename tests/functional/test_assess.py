"""Batch assessments: the plan → retrieve → format chain, in-process and through the handlers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidence.api import runtime
from evidence.assess import (
    AssessmentInput,
    Criterion,
    MemoryStore,
    S3Store,
    run_assessment,
)
from evidence.cli.assess import read_criteria
from evidence.errors import RequestValidationError
from evidence.model import IndexDocumentRequest
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from tests.functional.conftest import REGION

STATE_LIMIT = 256 * 1024


def seed(service: EvidenceService) -> None:
    for name in ("index_document", "index_followup"):
        request = IndexDocumentRequest.model_validate_json(load_event(f"apigw/{name}")["body"])
        service.index_document("vendor-acme", request)


def test_chain_isolates_a_failed_criterion(service: EvidenceService) -> None:
    seed(service)
    batch = AssessmentInput(
        index="vendor-acme",
        profile="vrm",
        criteria=[
            Criterion(id="SEC-07", question="Do you encrypt customer data at rest?"),
            Criterion(id="BLANK", question="   "),  # plans, then fails validation at retrieval
            Criterion(id="SEC-12", question="Is production access protected by MFA?"),
        ],
    )
    store = MemoryStore()
    seen: list[tuple[int, int]] = []
    summary = run_assessment(service, batch, store=store, progress=lambda d, t, _: seen.append((d, t)))
    assert (summary["total"], summary["succeeded"], summary["failed"]) == (3, 2, 1)
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)
    by_id = {r["id"]: r for r in summary["results"]}
    assert by_id["BLANK"]["status"] == "failed"
    assert by_id["BLANK"]["error"]["code"] == "validation_error"
    ok = store.get_json(by_id["SEC-07"]["result_uri"])
    assert ok["status"] == "ok" and ok["plan"]["profile"] == "vrm"
    assert "<index_1>" in ok["evidence_xml"] and ok["hits"]
    assert len(json.dumps(summary)) < 4_000  # pointers, not evidence


def test_step_functions_tasks_through_the_handlers(
    moto: None, service: EvidenceService, context: LambdaContext
) -> None:
    """What the state machine does per Map item: planner → retriever (task) → formatter (task)."""
    import boto3

    from functions.formatter.handler import handler as formatter
    from functions.planner.handler import handler as planner
    from functions.retriever.handler import handler as retriever

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="acme-evidence-results")
    runtime.configure(service=service, settings=service.settings, s3_client=s3)
    seed(service)

    # The payloads exactly as infra/evidence_infra/batch.py builds them from the iteration state.
    task = load_event("stepfunctions/plan_task")
    fields = {k: task[k] for k in ("index", "profile", "criterion", "output_uri")}
    planned = planner(task, context)
    assert (
        planned["plan"]["criterion_hash"]
        == load_event("stepfunctions/retrieve_task")["plan"]["criterion_hash"]
    )
    retrieved = retriever({"task": "retrieve", **fields, "plan": planned["plan"]}, context)
    assert retrieved["retrieve_uri"].endswith("/SEC-07.retrieve.json") and retrieved["hits"] >= 1
    result = formatter(
        {
            "task": "format",
            **fields,
            "plan": planned["plan"],
            "retrieve_uri": retrieved["retrieve_uri"],
            "hits": retrieved["hits"],
        },
        context,
    )
    assert result == {
        "id": "SEC-07",
        "status": "ok",
        "result_uri": task["output_uri"] + "/SEC-07.json",
        "hits": retrieved["hits"],
    }
    for payload in (planned, retrieved, result):
        assert len(json.dumps(payload)) < STATE_LIMIT
    stored = S3Store(s3).get_json(result["result_uri"])
    assert stored["id"] == "SEC-07" and "<index_" in stored["evidence_xml"]


def test_batch_to_s3(moto: None, service: EvidenceService) -> None:
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="acme-evidence-results")
    runtime.configure(service=service, settings=service.settings, s3_client=s3)
    seed(service)
    batch = AssessmentInput.model_validate(load_event("stepfunctions/assessment_input"))
    summary = run_assessment(service, batch)
    assert summary["succeeded"] == 3
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="acme-evidence-results")["Contents"]}
    assert "assessments/2026-11-21T09-14-07Z-acme/BCP-03.json" in keys


def test_formatter_task_without_pointer_is_refused(service: EvidenceService, context: LambdaContext) -> None:
    """Raised under the error's code (what Step Functions records, by class name), the cause kept."""
    from evidence.api.tasks import BatchStepError
    from functions.formatter.handler import handler as formatter

    with pytest.raises(BatchStepError) as raised:
        formatter({**load_event("stepfunctions/format_task"), "retrieve_uri": None}, context)
    assert type(raised.value).__name__ == raised.value.code == "validation_error"
    assert isinstance(raised.value.__cause__, RequestValidationError)
    assert "retrieve_uri" in str(raised.value)


def test_read_criteria(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": 7, "question": "Q one?"}\n\n{"question": "Q two?"}\n')
    read = read_criteria(path)
    assert read.criteria == [Criterion(id="7", question="Q one?"), Criterion(id="3", question="Q two?")]
    assert read.refused == []
    # A bad line or a repeated id fails that criterion alone, named by file and line.
    path.write_text('{"id": "a", "question": "x"}\n{"id": "a", "question": "y"}\n{"id": "b"}\nnot json\n')
    read = read_criteria(path)
    assert [c.id for c in read.criteria] == ["a"]
    assert [(r.id, r.status) for r in read.refused] == [("a", "failed"), ("b", "failed"), ("4", "failed")]
    messages = [r.error["message"] for r in read.refused if r.error]
    assert "c.jsonl:2: duplicate criterion id 'a'" in messages[0]
    assert "c.jsonl:3: not a criterion {id, question}: question: Field required" in messages[1]
    assert "c.jsonl:4: not JSON" in messages[2]
    assert read.order == [("ok", 0), ("refused", 0), ("refused", 1), ("refused", 2)]


@pytest.mark.slow
def test_evidence_assess_cli_with_the_real_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidence.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("index_document", "index_followup"):
        body: dict[str, Any] = json.loads(load_event(f"apigw/{name}")["body"])
        (docs / body["filename"]).write_text(body["text"])
    store = str(tmp_path / "store")
    assert main(["index", str(docs), "--index", "vendor-acme", "--store", store]) == 0
    criteria = tmp_path / "criteria.jsonl"
    criteria.write_text(
        "".join(json.dumps(c) + "\n" for c in load_event("stepfunctions/assessment_input")["criteria"])
    )
    out = tmp_path / "results.jsonl"
    capsys.readouterr()
    code = main(
        ["assess", "--index", "vendor-acme", "--criteria", str(criteria), "--out", str(out), "--store", store]
    )
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["SEC-07", "SEC-12", "BCP-03"]
    assert all(line["status"] == "ok" for line in lines)
    assert "AES-256" in lines[0]["evidence_xml"]
    assert "3 ok, 0 failed" in capsys.readouterr().err
