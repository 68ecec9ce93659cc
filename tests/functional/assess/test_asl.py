"""The batch state machine that ships, executed: the synthesized ASL run by aws-local-stepfunctions
(infra/asl/run.mjs), every Lambda task answered by the real handler (evidence/local_sfn.py),
results in S3 on moto, on the vendor sample of `evidence demo`.

Each test guards fields of the definition (infra/evidence_infra/batch.py): removing or
misspelling one makes it fail (tried by hand; see docs/infra.md). The stack is synthesized once
per worker, shared with the infra tier (tests/infra/infra_synth.py), hence the group and marker.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evidence.access import AccessPolicy, Authorizer
from evidence.api import runtime
from evidence.assess import AssessmentInput, MemoryStore, S3Store, launch, run_assessment
from evidence.assess.launch import add_launcher
from evidence.demo import VENDOR_STEPS
from evidence.local_sfn import (
    PAYLOAD_LIMIT_BYTES,
    AslBundle,
    Execution,
    Fault,
    Machine,
    execute,
    local_launcher,
)
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from infra.batch_e2e import differences
from tests.functional.assess.test_launch import wait
from tests.functional.conftest import REGION
from tests.functional.test_access import ACME, AUDITOR, GLOBEX, POLICY, TOKENS, transport

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

BUCKET = "evidence-results"
THROTTLE = "Lambda.TooManyRequestsException"


@pytest.fixture(scope="module")
def bundle() -> AslBundle:
    from infra.batch_asl import from_stack
    from tests.infra.infra_synth import default_synth

    synth = default_synth()
    return from_stack(synth.stack, synth.json)


@pytest.fixture(scope="module")
def machine(bundle: AslBundle) -> Machine:
    return bundle.resolve(results_bucket=BUCKET, region=REGION)


@dataclass
class Vendor:
    service: EvidenceService
    s3: Any
    index: str

    def objects(self) -> list[str]:
        return [o["Key"] for o in self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def _index(service: EvidenceService, index: str) -> None:
    for paths, doc_type in VENDOR_STEPS:
        report = service.index_paths(index, list(paths), doc_type=doc_type)
        assert not report.failed, report.failed


@pytest.fixture
def vendor(moto: None, service: EvidenceService) -> Iterator[Vendor]:
    """The vendor sample indexed (index `vendor-demo`, as in the e2e input), S3 on moto."""
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    runtime.configure(service=service, settings=service.settings, s3_client=s3)
    _index(service, "vendor-demo")
    yield Vendor(service=service, s3=s3, index="vendor-demo")


def run(machine: Machine, batch: dict[str, Any], faults: Fault | None = None) -> Execution:
    # Retry pauses shortened: timing is not what the interpreter emulates (docs/infra.md).
    return execute(machine, batch, name=uuid.uuid4().hex, faults=faults, retry_interval_ms=0)


def _batch(**changes: Any) -> dict[str, Any]:
    return {**load_event("stepfunctions/vendor_assessment"), **changes}


def test_six_criteria_give_the_evidence_of_evidence_assess(machine: Machine, vendor: Vendor) -> None:
    batch = _batch()
    ids = [c["id"] for c in batch["criteria"]]
    execution = run(machine, batch)
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    summary = execution.output
    name = summary["batch_id"]
    base = f"s3://{BUCKET}/batches/{name}"  # the Defaults state's output location
    assert (summary["index"], summary["profile"], summary["output_uri"]) == (vendor.index, "vrm", base)
    assert [r["id"] for r in summary["results"]] == ids
    for r in summary["results"]:
        assert r == {"id": r["id"], "status": "ok", "result_uri": f"{base}/{r['id']}.json", "hits": r["hits"]}
    assert sorted(vendor.objects()) == sorted(
        f"batches/{name}/{i}{suffix}" for i in ids for suffix in (".json", ".retrieve.json")
    )
    store = S3Store(vendor.s3)
    results = {r["id"]: store.get_json(r["result_uri"]) for r in summary["results"]}
    assert all(result["hits"] and "<index_1>" in result["evidence_xml"] for result in results.values())

    # `evidence assess` (the same chain in-process) on the same input and store.
    memory = MemoryStore()
    reference = run_assessment(vendor.service, AssessmentInput.model_validate(batch), store=memory)
    expected = {r["id"]: memory.get_json(r["result_uri"]) for r in reference["results"]}
    assert differences(results, expected) == []

    # What each handler was handed is what the definition's Parameters build, nothing else.
    by_state: dict[str, list[dict[str, Any]]] = {}
    for invocation in execution.invocations:
        assert invocation.error is None
        by_state.setdefault(invocation.state, []).append(invocation.event)
    assert {s: len(events) for s, events in by_state.items()} == {"Plan": 6, "Retrieve": 6, "Format": 6}
    common = {"index": vendor.index, "profile": "vrm", "output_uri": base, "principal": ""}
    for state, extra in (
        ("Plan", set()),
        ("Retrieve", {"plan"}),
        ("Format", {"plan", "retrieve_uri", "hits"}),
    ):
        for event in by_state[state]:
            assert set(event) == {"task", "criterion", *common, *extra}, state
            assert {k: event[k] for k in common} == common and event["task"] == state.lower()
    assert sorted(e["criterion"]["id"] for e in by_state["Format"]) == sorted(ids)


def test_a_failing_criterion_is_caught_and_the_others_finish(
    machine: Machine, vendor: Vendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    criteria = load_event("stepfunctions/vendor_assessment")["criteria"]
    exploding = criteria[2]["question"]
    batch = _batch(criteria=[*criteria[:4], {"id": "BLANK", "question": "   "}, criteria[5]])
    real = vendor.service.retrieve

    def retrieve(index: str, request: Any) -> Any:
        if request.query == exploding:
            raise OSError("the search backend went away")
        return real(index, request)

    monkeypatch.setattr(vendor.service, "retrieve", retrieve)
    execution = run(machine, batch)
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    by_id = {r["id"]: r for r in execution.output["results"]}
    assert [r["id"] for r in execution.output["results"]] == [c["id"] for c in batch["criteria"]]
    # The failure is recorded under the error's code, as `evidence assess` records it.
    assert by_id["BLANK"] == {
        "id": "BLANK",
        "status": "failed",
        "error": {"code": "validation_error", "message": "see the execution history"},
    }
    assert by_id[criteria[2]["id"]]["status"] == "failed"
    assert by_id[criteria[2]["id"]]["error"]["code"] == "internal_error"
    ok = [i for i, r in by_id.items() if r["status"] == "ok"]
    assert len(ok) == 4
    caught = {(c["state"], batch["criteria"][c["index"]]["id"]) for c in execution.caught}
    assert caught == {("Plan", "BLANK"), ("Retrieve", criteria[2]["id"])}
    # The caller's error is not retried (it would fail the same way); an internal one is, twice.
    tries = [(i.state, i.event["criterion"]["id"]) for i in execution.invocations if i.error]
    assert tries.count(("Plan", "BLANK")) == 1
    assert tries.count(("Retrieve", criteria[2]["id"])) == 3
    assert {
        k.rsplit("/", 1)[1] for k in vendor.objects() if k.endswith(".json") and ".retrieve." not in k
    } == {f"{i}.json" for i in ok}


@pytest.mark.parametrize("throttles", [1, 3])
def test_a_throttled_task_is_retried_and_writes_no_duplicate(
    machine: Machine, vendor: Vendor, throttles: int
) -> None:
    """Throttled before it ran (as Lambda throttles): the Retry for throttles re-runs it; three
    in a row are more than the generic States.TaskFailed retrier (2 attempts) would absorb."""
    vendor.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    target = "SEC-12"
    left = [throttles]

    def throttle(state: str, function: str, event: dict[str, Any]) -> str | None:
        if state == "Format" and event["criterion"]["id"] == target and left[0] > 0:
            left[0] -= 1
            return THROTTLE
        return None

    batch = _batch()
    execution = run(machine, batch, faults=throttle)
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    results = execution.output["results"]
    assert [r["id"] for r in results] == [c["id"] for c in batch["criteria"]]
    assert all(r["status"] == "ok" for r in results), results
    retries = [r for r in execution.retried if r["state"] == "Format"]
    assert len(retries) == throttles
    assert all(THROTTLE in r["errors"] for r in retries), retries  # the throttle retrier, not the generic one
    formats = [
        i for i in execution.invocations if i.state == "Format" and i.event["criterion"]["id"] == target
    ]
    assert [i.injected for i in formats] == [True] * throttles + [False]
    # One result per criterion, each written once.
    keys = vendor.objects()
    assert len(keys) == len(set(keys)) == 2 * len(batch["criteria"])
    versions = vendor.s3.list_object_versions(Bucket=BUCKET)["Versions"]
    assert len(versions) == len(keys)


@pytest.mark.slow
def test_500_criteria_stay_under_the_state_payload_limit(machine: Machine, vendor: Vendor) -> None:
    questions = [c["question"] for c in load_event("stepfunctions/vendor_assessment")["criteria"]]
    criteria = [{"id": f"VRM-{i:04d}", "question": questions[i % len(questions)]} for i in range(500)]
    batch = _batch(criteria=criteria)
    execution = run(machine, batch)
    # The largest input or output of any state, task or the execution: the summary of pointers.
    assert len(json.dumps(batch)) < execution.largest_bytes < PAYLOAD_LIMIT_BYTES, (
        execution.largest_bytes,
        execution.largest_at,
    )
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert len(execution.output["results"]) == 500
    assert all(r["status"] == "ok" for r in execution.output["results"])


# --- tenancy ---------------------------------------------------------------------------------------


@pytest.fixture
def acme(vendor: Vendor) -> Vendor:
    """The vendor sample in an ACME index, under the access policy of test_access.py."""
    _index(vendor.service, "acme-vendor")
    runtime.configure(
        service=vendor.service,
        settings=vendor.service.settings,
        s3_client=vendor.s3,
        authorizer=Authorizer(AccessPolicy.model_validate(POLICY)),
    )
    return Vendor(service=vendor.service, s3=vendor.s3, index="acme-vendor")


def test_the_execution_runs_as_its_principal(machine: Machine, acme: Vendor) -> None:
    criteria = load_event("stepfunctions/vendor_assessment")["criteria"][:3]
    for principal in (ACME, AUDITOR):  # AUDITOR: read only, which is what a batch needs
        execution = run(machine, _batch(index=acme.index, criteria=criteria, principal=principal))
        assert execution.status == "SUCCEEDED", (principal, execution.error, execution.cause)
        assert all(r["status"] == "ok" for r in execution.output["results"]), principal
        assert {i.event["principal"] for i in execution.invocations} == {principal}
    written = set(acme.objects())
    # Another tenant: every criterion fails as documented (forbidden), and nothing is written.
    execution = run(machine, _batch(index=acme.index, criteria=criteria, principal=GLOBEX))
    assert execution.status == "SUCCEEDED"
    for r in execution.output["results"]:
        assert r == {
            "id": r["id"],
            "status": "failed",
            "error": {"code": "forbidden", "message": r["error"]["message"]},
        }
    assert {c["state"] for c in execution.caught} == {"Plan"}
    assert len(execution.invocations) == len(criteria)  # forbidden is not retried
    assert set(acme.objects()) == written
    # No principal at all (the state machine's default "") is refused too under a policy.
    execution = run(machine, _batch(index=acme.index, criteria=criteria))
    assert {r["error"]["code"] for r in execution.output["results"]} == {"forbidden"}


def test_api_batches_run_on_the_local_state_machine(
    bundle: AslBundle, acme: Vendor, context: LambdaContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EVIDENCE_BATCH_LOCAL_ASL: POST /v1/indexes/{index}/assessments runs the ASL that ships,
    as the caller recorded at launch; the results are in S3 where the state machine puts them."""
    asl = tmp_path / "batch.json"
    asl.write_text(json.dumps(bundle.to_json()))
    settings = acme.service.settings.model_copy(update={"batch_local_asl": asl, "results_bucket": BUCKET})
    runtime.configure(
        service=acme.service,
        settings=settings,
        s3_client=acme.s3,
        authorizer=Authorizer(AccessPolicy.model_validate(POLICY)),
    )
    criteria = load_event("stepfunctions/vendor_assessment")["criteria"][:3]
    monkeypatch.setattr(launch, "_developer_launchers", [])
    add_launcher(local_launcher)  # as `evidence serve` does
    with transport("serve", context, TOKENS) as call:
        status, started = call(ACME, "POST", f"/v1/indexes/{acme.index}/assessments", {"criteria": criteria})
        assert status == 202, started
        aid = started["assessment_id"]
        done = wait(call, ACME, aid)
        assert call(GLOBEX, "GET", f"/v1/assessments/{aid}", None)[0] == 404
    assert (done["status"], done["done"], done["failed"]) == ("succeeded", 3, 0), done
    store = S3Store(acme.s3)
    for criterion, result in zip(criteria, done["results"], strict=True):
        assert result["result_uri"] == f"s3://{BUCKET}/batches/{aid}/{criterion['id']}.json"
        assert store.get_json(result["result_uri"])["question"] == criterion["question"]
    runtime.reset()
