"""Access control (evidence/access.py) on every route that touches an index, both transports.

The same table runs against the retriever Lambda (API Gateway events whose request context
carries an IAM user ARN, an API key id or a Lambda authorizer's principal) and against
`evidence serve` over loopback (bearer tokens mapped to the same principals). Then S3 uploads
by key prefix and batch assessments run as their caller.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from copy import deepcopy
from typing import Any
from urllib.parse import quote

import pytest

from evidence.access import AccessDeniedError, AccessPolicy, Authorizer
from evidence.api import runtime
from evidence.assess import AssessmentInput, Criterion, MemoryStore, plan_step, retrieve_step, run_assessment
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.retriever.handler import handler
from tests.functional.test_indexer import BUCKET, Uploads, uploads  # noqa: F401 (the fixture)

ACME = "arn:aws:sts::123456789012:assumed-role/acme-backend/session-1"
GLOBEX = "apikey:globex0001"
AUDITOR = "auditor"
ANON = None

POLICY = {
    "principals": {
        "arn:aws:sts::123456789012:assumed-role/acme-backend/*": {"read": ["acme-*"], "write": ["acme-*"]},
        GLOBEX: {"read": ["globex-*"], "write": ["globex-*"]},
        AUDITOR: {"read": ["acme-*"]},
    },
    "uploads": {"indexes/acme-": ["acme-*"]},
    "tokens": {
        "acme-token-0123456789": ACME,
        "globex-token-0123456789": GLOBEX,
        "auditor-token-0123456789": AUDITOR,
    },
}
TOKENS = {v: k for k, v in POLICY["tokens"].items()}  # type: ignore[attr-defined]

DOC = {
    "document_id": "acme/soc2",
    "filename": "soc2.md",
    "text": "# Encryption\n\nData at rest uses AES-256.",
}
GDOC = {"document_id": "globex/iso", "filename": "iso.md", "text": "# Access\n\nMFA is enforced for staff."}
RETRIEVE = {"query": "How is data encrypted at rest?"}
COACH = {"query": "How is data encrypted at rest?"}

Call = Callable[[str | None, str, str, Any], tuple[int, Any]]


def lambda_event(principal: str | None, method: str, path: str, payload: Any) -> dict[str, Any]:
    event = deepcopy(load_event("apigw/retrieve"))
    event.update(httpMethod=method, path=path, resource="/{proxy+}")
    event["body"] = json.dumps(payload) if payload is not None else None
    identity = event["requestContext"]["identity"]
    # Each kind of identity API Gateway fills in: IAM, an API key, a Lambda authorizer.
    if principal == ACME:
        identity["userArn"] = principal
    elif principal == GLOBEX:
        identity["apiKeyId"] = principal.removeprefix("apikey:")
    elif principal is not None:
        event["requestContext"]["authorizer"] = {"principalId": principal}
    return event


@pytest.fixture
def guarded(service: EvidenceService) -> Iterator[EvidenceService]:
    runtime.configure(
        service=service,
        settings=service.settings,
        authorizer=Authorizer(AccessPolicy.model_validate(POLICY)),
    )
    yield service


@contextmanager
def transport(kind: str, context: LambdaContext, tokens: Mapping[str, str] | None = None) -> Iterator[Call]:
    """A `Call` through the retriever Lambda (`kind="lambda"`) or `evidence serve` on loopback;
    over HTTP a principal becomes the bearer token `tokens` maps it to."""
    if kind == "lambda":

        def via_lambda(principal: str | None, method: str, path: str, payload: Any) -> tuple[int, Any]:
            response = handler(lambda_event(principal, method, path, payload), context)
            return int(response["statusCode"]), json.loads(response["body"])

        yield via_lambda
        return
    from evidence.server import make_server

    srv = make_server("127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def via_http(principal: str | None, method: str, path: str, payload: Any) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if principal is not None and tokens is not None:
            headers["Authorization"] = f"Bearer {tokens[principal]}"
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(srv.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    try:
        yield via_http
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(params=["lambda", "serve"])
def call(request: pytest.FixtureRequest, guarded: EvidenceService, context: LambdaContext) -> Iterator[Call]:
    with transport(request.param, context, TOKENS) as send:
        yield send


@pytest.fixture
def tenants(call: Call) -> Call:
    assert call(ACME, "POST", "/v1/indexes/acme-docs/documents", DOC)[0] == 200
    assert call(GLOBEX, "POST", "/v1/indexes/globex-docs/documents", GDOC)[0] == 200
    return call


DELETE_ACME = f"/v1/indexes/acme-docs/documents/{quote('acme/soc2', safe='')}"

#: (who, method, path, body): every route that touches an index, each refused direction.
REFUSED = [
    pytest.param(GLOBEX, "POST", "/v1/indexes/acme-docs/retrieve", RETRIEVE, id="read-other-tenant"),
    pytest.param(GLOBEX, "POST", "/v1/indexes/acme-docs/coach", COACH, id="coach-other-tenant"),
    pytest.param(GLOBEX, "POST", "/v1/indexes/acme-docs/documents", GDOC, id="write-other-tenant"),
    pytest.param(GLOBEX, "DELETE", DELETE_ACME, None, id="delete-other-tenant"),
    pytest.param(AUDITOR, "POST", "/v1/indexes/acme-docs/documents", DOC, id="write-read-only"),
    pytest.param(AUDITOR, "DELETE", DELETE_ACME, None, id="delete-read-only"),
    pytest.param(ANON, "POST", "/v1/indexes/acme-docs/retrieve", RETRIEVE, id="read-anonymous"),
    pytest.param(ANON, "POST", "/v1/indexes/acme-docs/documents", DOC, id="write-anonymous"),
    pytest.param(ANON, "DELETE", DELETE_ACME, None, id="delete-anonymous"),
    pytest.param(ACME, "POST", "/v1/indexes/globex-docs/retrieve", RETRIEVE, id="read-the-other-way"),
]


@pytest.mark.parametrize(("who", "method", "path", "payload"), REFUSED)
def test_refused_and_nothing_changes(
    tenants: Call, who: str | None, method: str, path: str, payload: Any
) -> None:
    status, answer = tenants(who, method, path, payload)
    assert status == 403, answer
    assert answer["error"]["code"] == "forbidden" and answer["error"]["field"] == "index"
    # The documents already indexed are all still there.
    for owner, index, doc_id in ((ACME, "acme-docs", "acme/soc2"), (GLOBEX, "globex-docs", "globex/iso")):
        status, hits = tenants(
            owner, "POST", f"/v1/indexes/{index}/retrieve", {"query": "data MFA encrypted"}
        )
        assert status == 200 and {h["document_id"] for h in hits["hits"]} == {doc_id}


def test_not_yours_and_missing_are_the_same_answer(tenants: Call) -> None:
    for path, payload in (("retrieve", RETRIEVE), ("coach", COACH), ("documents", DOC)):
        exists = tenants(GLOBEX, "POST", f"/v1/indexes/acme-docs/{path}", payload)
        missing = tenants(GLOBEX, "POST", f"/v1/indexes/acme-nothing-here/{path}", payload)
        assert exists == missing and exists[0] == 403
    deleting = tenants(GLOBEX, "DELETE", DELETE_ACME, None)
    assert deleting == tenants(GLOBEX, "DELETE", "/v1/indexes/acme-nope/documents/x", None)
    # A body the route would refuse is not even parsed: the caller learns nothing from a 422.
    assert tenants(GLOBEX, "POST", "/v1/indexes/acme-docs/retrieve", {"query": ""})[0] == 403


@pytest.mark.parametrize(
    ("who", "visible"),
    [(ACME, ["acme-docs"]), (GLOBEX, ["globex-docs"]), (AUDITOR, ["acme-docs"]), (ANON, [])],
)
def test_list_shows_only_what_the_caller_may_touch(
    tenants: Call, who: str | None, visible: list[str]
) -> None:
    status, answer = tenants(who, "GET", "/v1/indexes", None)
    assert status == 200
    assert [i["name"] for i in answer["indexes"]] == visible


def test_granted_directions_work(tenants: Call) -> None:
    status, answer = tenants(AUDITOR, "POST", "/v1/indexes/acme-docs/retrieve", RETRIEVE)
    assert status == 200 and answer["hits"][0]["document_id"] == "acme/soc2"
    assert tenants(ACME, "POST", "/v1/indexes/acme-docs/coach", COACH)[0] != 403
    # Routes that touch no index need no grant.
    assert tenants(ANON, "POST", "/v1/plan", {"query": "Do you use MFA?"})[0] == 200
    assert tenants(ANON, "GET", "/v1/health", None)[0] == 200
    status, answer = tenants(ACME, "DELETE", DELETE_ACME, None)
    assert status == 200 and answer["deleted_chunks"] >= 1
    assert tenants(ACME, "POST", "/v1/indexes/acme-docs/retrieve", RETRIEVE)[1]["hits"] == []


def test_open_mode_is_the_default(service: EvidenceService, context: LambdaContext) -> None:
    """No policy: any caller, any index (the local default, documented)."""
    runtime.configure(service=service, settings=service.settings)
    event = lambda_event(GLOBEX, "POST", "/v1/indexes/acme-docs/documents", DOC)
    assert handler(event, context)["statusCode"] == 200


def test_a_broken_policy_fails_closed(service: EvidenceService, context: LambdaContext) -> None:
    bad = service.settings.model_copy(update={"access_policy": '{"principals": {"x": {"read": ["Acme*"]}}}'})
    runtime.configure(service=service, settings=bad)
    response = handler(lambda_event(ACME, "POST", "/v1/indexes/acme-docs/retrieve", RETRIEVE), context)
    assert response["statusCode"] == 500
    assert json.loads(response["body"])["error"]["code"] == "configuration_error"


# --- batch assessments run as their caller ------------------------------------------------------


def test_batch_runs_as_its_caller(guarded: EvidenceService) -> None:
    guarded.index_document("acme-docs", _doc())
    criteria = [
        Criterion(id="c1", question="Is data encrypted at rest?"),
        Criterion(id="c2", question="MFA?"),
    ]
    mine = run_assessment(guarded, AssessmentInput(index="acme-docs", criteria=criteria, principal=ACME))
    assert (mine["succeeded"], mine["failed"]) == (2, 0)
    theirs = run_assessment(guarded, AssessmentInput(index="acme-docs", criteria=criteria, principal=GLOBEX))
    assert theirs["failed"] == 2
    assert {r["error"]["code"] for r in theirs["results"]} == {"forbidden"}
    nobody = run_assessment(guarded, AssessmentInput(index="acme-docs", criteria=criteria))
    assert nobody["failed"] == 2


def test_each_step_checks_the_principal_it_is_handed(guarded: EvidenceService) -> None:
    """A step payload is checked on its own, not trusted because an earlier step passed."""
    guarded.index_document("acme-docs", _doc())
    task = {
        "task": "plan",
        "index": "acme-docs",
        "criterion": {"id": "c1", "question": "Is data encrypted?"},
        "output_uri": "mem://run",
        "principal": ACME,
    }
    planned = plan_step(guarded, task).model_dump(mode="json")
    store = MemoryStore()
    assert retrieve_step(guarded, planned, store).hits == 1
    with pytest.raises(AccessDeniedError):
        retrieve_step(guarded, {**planned, "principal": GLOBEX}, store)
    with pytest.raises(AccessDeniedError):
        plan_step(guarded, {**task, "principal": ""})  # the state machine's "no principal"


def _doc() -> Any:
    from evidence.model import IndexDocumentRequest

    return IndexDocumentRequest.model_validate(DOC)


# --- S3 uploads follow the policy by key prefix -------------------------------------------------


def test_uploads_follow_the_key_prefix(
    uploads: Uploads,  # noqa: F811 (the imported fixture)
    service: EvidenceService,
    context: LambdaContext,
) -> None:
    from functions.indexer.handler import handler as indexer

    authorizer = Authorizer(AccessPolicy.model_validate(POLICY))
    runtime.configure(service=service, settings=service.settings, s3_client=uploads.s3, authorizer=authorizer)
    granted = "indexes/acme-docs/policy.md"
    refused = ["indexes/globex-docs/sneaky.md", "loose/file.md"]  # another index; no prefix at all
    for key in [granted, *refused]:
        uploads.s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Encryption\n\nAES-256 at rest.")
    event = uploads.event(3)
    ids = {
        json.loads(r["body"])["Records"][0]["s3"]["object"]["key"]: r["messageId"] for r in event["Records"]
    }
    failures = indexer(event, context)["batchItemFailures"]
    by_key = {quote_key(k): v for k, v in ids.items()}
    assert sorted(f["itemIdentifier"] for f in failures) == sorted(by_key[k] for k in refused)
    assert found(service, "acme-docs", "encryption at rest") == {f"s3://{BUCKET}/{granted}"}
    assert [i.name for i in service.backend.list_indexes()] == ["acme-docs"]
    # A remove outside the grant is refused too: it cannot delete from another tenant's index.
    uploads.s3.delete_object(Bucket=BUCKET, Key=refused[0])
    assert indexer(uploads.event(1), context)["batchItemFailures"]


def quote_key(raw: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(raw)


def found(service: EvidenceService, index: str, query: str) -> set[str]:
    from evidence.model import RetrieveRequest

    return {h.document_id for h in service.retrieve(index, RetrieveRequest(query=query, top_k=20)).hits}
