"""The bad-input catalogue of RELIABILITY.md: one row per input, each a clear 4xx naming the
field on the API (or, off the API, a typed and logged failure of that one S3 record), and
the documents already indexed are all still there afterwards."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from copy import deepcopy
from typing import Any

import pytest

from evidence.api import runtime
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.indexer.handler import handler as indexer
from functions.retriever.handler import handler
from tests.functional.test_indexer import BUCKET, Uploads, uploads  # noqa: F401 (the fixture)

INDEX = "vendor-acme"
SEED = [
    {"document_id": "acme/soc2", "filename": "soc2.md", "text": "# Encryption\n\nData at rest uses AES-256."},
    {"document_id": "acme/mfa", "filename": "mfa.md", "text": "# Access\n\nStaff sign in with MFA."},
]


def bomb_docx(inflated: int) -> bytes:
    """A docx whose body inflates ~1000x: small on the wire, `inflated` bytes in memory."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        head = b"<w:document xmlns:w='http://schemas.openxmlformats.org/wordprocessingml/2006/main'><w:body>"
        zf.writestr("word/document.xml", head + b" " * inflated + b"</w:body></w:document>")
    return out.getvalue()


def zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.txt", b"0" * (20 * 1024 * 1024))
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def doc(**fields: Any) -> dict[str, Any]:
    return {"filename": "x.txt", "text": "Some text.", **fields}


RETRIEVE = f"/v1/indexes/{INDEX}/retrieve"
DOCS = f"/v1/indexes/{INDEX}/documents"
COACH = f"/v1/indexes/{INDEX}/coach"
PLAN = "/v1/plan"

#: (row, path, raw body or JSON payload, base64-flagged body?, status, code, field)
CATALOGUE = [
    # One range for min_similarity everywhere (settings, request, profile defaults): 0-1.
    (
        "min_similarity below 0",
        RETRIEVE,
        {"query": "x", "min_similarity": -0.5},
        False,
        422,
        "validation_error",
        "min_similarity",
    ),
    (
        "min_similarity above 1",
        RETRIEVE,
        {"query": "x", "min_similarity": 1.5},
        False,
        422,
        "validation_error",
        "min_similarity",
    ),
    ("malformed JSON", RETRIEVE, '{"query": ', False, 400, "bad_request", "body"),
    ("body is not an object", RETRIEVE, "[1, 2]", False, 422, "validation_error", None),
    ("missing body", RETRIEVE, "", False, 400, "bad_request", "body"),
    ("wrong type: query", RETRIEVE, {"query": 5}, False, 422, "validation_error", "query"),
    (
        "wrong type: top_k as string",
        RETRIEVE,
        {"query": "x", "top_k": "3"},
        False,
        422,
        "validation_error",
        "top_k",
    ),
    (
        "wrong type: explain as 0",
        RETRIEVE,
        {"query": "x", "explain": 0},
        False,
        422,
        "validation_error",
        "explain",
    ),
    ("unknown field", RETRIEVE, {"query": "x", "bogus": 1}, False, 422, "validation_error", "bogus"),
    ("empty query", RETRIEVE, {"query": ""}, False, 422, "validation_error", "query"),
    ("whitespace query", RETRIEVE, {"query": " \t\n"}, False, 422, "validation_error", "query"),
    ("whitespace query: plan", PLAN, {"query": "  "}, False, 422, "validation_error", "query"),
    ("whitespace query: coach", COACH, {"query": "\n"}, False, 422, "validation_error", "query"),
    ("100 kB query", RETRIEVE, {"query": "encryption " * 9310}, False, 422, "validation_error", "query"),
    ("invalid UTF-8", RETRIEVE, b64(b'{"query": "\xff\xfe"}'), True, 400, "bad_request", "body"),
    ("lone surrogate", RETRIEVE, '{"query": "\\udcff"}', False, 400, "bad_request", "body"),
    ("bad base64 flag", RETRIEVE, "not base64!", True, 400, "bad_request", "body"),
    (
        "control characters",
        RETRIEVE,
        {"query": "abc\u0000def\u0007"},
        False,
        422,
        "validation_error",
        "query",
    ),
    (
        "control characters: criterion",
        RETRIEVE,
        {"query": "x", "criterion_question": "a\u001bb"},
        False,
        422,
        "validation_error",
        "criterion_question",
    ),
    ("huge top_k", RETRIEVE, {"query": "x", "top_k": 10**9}, False, 422, "validation_error", "top_k"),
    ("negative top_k", RETRIEVE, {"query": "x", "top_k": -1}, False, 422, "validation_error", "top_k"),
    (
        "negative budget: max_chars",
        RETRIEVE,
        {"query": "x", "max_chars": -1},
        False,
        422,
        "validation_error",
        "max_chars",
    ),
    (
        "negative budget: coach token_budget",
        COACH,
        {"query": "x", "constraints": {"token_budget": -5}},
        False,
        422,
        "validation_error",
        "constraints.token_budget",
    ),
    (
        "unknown profile",
        RETRIEVE,
        {"query": "x", "profile": "nope"},
        False,
        422,
        "validation_error",
        "profile",
    ),
    (
        "a PDF that is not a PDF",
        DOCS,
        doc(filename="report.pdf", text=None, content_base64=b64(b"hello, I am plain text")),
        False,
        422,
        "unparseable_document",
        "content",
    ),
    (
        "decompression bomb: docx",
        DOCS,
        doc(filename="bomb.docx", text=None, content_base64=b64(bomb_docx(60 * 1024 * 1024))),
        False,
        422,
        "unparseable_document",
        "content",
    ),
    (
        "decompression bomb: zip",
        DOCS,
        doc(filename="bomb.zip", text=None, content_base64=b64(zip_bomb())),
        False,
        422,
        "unparseable_document",
        "content",
    ),
    (
        "bad base64 content",
        DOCS,
        doc(text=None, content_base64="%%%"),
        False,
        422,
        "validation_error",
        "content_base64",
    ),
    (
        "follow-up with a non-numeric round (type)",
        DOCS,
        doc(metadata={"type": "followup_response:two"}),
        False,
        422,
        "validation_error",
        "metadata.type",
    ),
    (
        "follow-up with a non-numeric round (round_number)",
        DOCS,
        doc(metadata={"type": "followup_response", "round_number": "two"}),
        False,
        422,
        "validation_error",
        "metadata.round_number",
    ),
    (
        "index name escaping the store",
        "/v1/indexes/..%2Fx/retrieve",
        {"query": "x"},
        False,
        422,
        "validation_error",
        "index",
    ),
    (
        "index name in upper case",
        "/v1/indexes/Acme/retrieve",
        {"query": "x"},
        False,
        422,
        "validation_error",
        "index",
    ),
]


def _strip_none(payload: Any) -> Any:
    return {k: v for k, v in payload.items() if v is not None} if isinstance(payload, dict) else payload


@pytest.fixture
def seeded(service: EvidenceService, context: LambdaContext) -> EvidenceService:
    for payload in SEED:
        assert call("POST", DOCS, payload, False, context)[0] == 200
    return service


def call(method: str, path: str, payload: Any, is_b64: bool, context: LambdaContext) -> tuple[int, Any]:
    event = deepcopy(load_event("apigw/retrieve"))
    raw = payload if isinstance(payload, str) else json.dumps(_strip_none(payload))
    event.update(httpMethod=method, path=path, resource="/{proxy+}", body=raw, isBase64Encoded=is_b64)
    response = handler(event, context)
    return int(response["statusCode"]), json.loads(response["body"])


def still_there(context: LambdaContext) -> None:
    status, answer = call("POST", RETRIEVE, {"query": "encryption at rest MFA", "top_k": 10}, False, context)
    assert status == 200, answer
    assert {h["document_id"] for h in answer["hits"]} == {d["document_id"] for d in SEED}


@pytest.mark.parametrize(
    ("path", "payload", "is_b64", "status", "code", "field"),
    [pytest.param(*row[1:], id=row[0]) for row in CATALOGUE],
)
def test_bad_input_row(  # noqa: PLR0917
    seeded: EvidenceService,
    context: LambdaContext,
    path: str,
    payload: Any,
    is_b64: bool,
    status: int,
    code: str,
    field: str | None,
) -> None:
    got, answer = call("POST", path, payload, is_b64, context)
    assert (got, answer["error"]["code"]) == (status, code), answer
    assert answer["error"].get("field") == field, answer
    assert answer["error"]["message"] and "Traceback" not in answer["error"]["message"]
    still_there(context)


# --- off the API: S3 uploads, each bad record a typed failure of that record alone ---------------


def test_bad_uploads_fail_alone(
    uploads: Uploads,  # noqa: F811 (the imported fixture)
    service: EvidenceService,
    context: LambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = service.settings.model_copy(update={"max_document_bytes": 10 * 1024 * 1024})
    reads: list[str] = []

    class Counting:
        """The moto client, counting downloads: an oversized object must be refused before one."""

        def __getattr__(self, name: str) -> Any:
            return getattr(uploads.s3, name)

        def get_object(self, **kwargs: Any) -> Any:
            reads.append(kwargs["Key"])
            return uploads.s3.get_object(**kwargs)

    runtime.configure(service=service, settings=settings, s3_client=Counting())
    for payload in SEED:
        service.index_document(INDEX, _request(payload))
    objects = {
        "indexes/vendor-acme/good.md": (b"# Retention\n\nLogs are kept for a year.", {}),
        "indexes/vendor-acme/huge.pdf": (b"%PDF-1.7 small, but announced as 200 MB", {}),
        "indexes/vendor-acme/bomb.docx": (bomb_docx(30 * 1024 * 1024), {}),
        "indexes/vendor-acme/followups/r.txt": (b"Q: a?\nA: b.", {"round-number": "two"}),
        "indexes/vendor-acme/fake.pdf": (b"not a pdf at all", {}),
    }
    for key, (data, meta) in objects.items():
        uploads.s3.put_object(Bucket=BUCKET, Key=key, Body=data, Metadata=meta)
    event = uploads.event(len(objects))
    ids = {}
    for record in event["Records"]:
        body = json.loads(record["body"])
        s3 = body["Records"][0]["s3"]
        if s3["object"]["key"].endswith("huge.pdf"):
            s3["object"]["size"] = 200 * 1024 * 1024  # what S3 announces for a 200 MB object
            record["body"] = json.dumps(body)
        ids[s3["object"]["key"].rsplit("%2F", 1)[-1]] = record["messageId"]
    # An event for an object that is not there (deleted since, or never written).
    missing = deepcopy(event["Records"][0])
    body = json.loads(missing["body"])
    body["Records"][0]["s3"]["object"]["key"] = "indexes/vendor-acme/never-written.md"
    missing.update(messageId="missing-1", body=json.dumps(body))
    event["Records"].append(missing)

    failures = {f["itemIdentifier"] for f in indexer(event, context)["batchItemFailures"]}
    assert failures == {ids["huge.pdf"], ids["bomb.docx"], ids["r.txt"], ids["fake.pdf"]}
    assert "indexes/vendor-acme/huge.pdf" not in reads  # refused on the announced size
    # Each failure is logged with its typed error code (Powertools' JSON logs on stdout).
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"record failed"' in line]
    assert sorted(entry["error_code"] for entry in logged) == sorted(
        ["payload_too_large", "unparseable_document", "validation_error", "unparseable_document"]
    )
    found = {h.document_id for h in service.retrieve(INDEX, _retrieve("retention logs encryption MFA")).hits}
    assert found == {"acme/soc2", "acme/mfa", f"s3://{BUCKET}/indexes/vendor-acme/good.md"}


def _request(payload: dict[str, Any]) -> Any:
    from evidence.model import IndexDocumentRequest

    return IndexDocumentRequest.model_validate(payload)


def _retrieve(query: str) -> Any:
    from evidence.model import RetrieveRequest

    return RetrieveRequest(query=query, top_k=20)
