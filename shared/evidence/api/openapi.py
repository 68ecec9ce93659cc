"""The OpenAPI 3.1 document of the HTTP API, generated from the pydantic edge models.

Written out rather than derived from Powertools' validation layer so that the request
parsing, the error envelope and the document stay under one roof: every operation
documents exactly the statuses `evidence.api.app` can answer with, and the schemas are
the models the routes parse and dump. Rules a model enforces in code (exactly one of
`text`/`content_base64`, a non-blank query) are added here as JSON Schema so that
generated clients and fuzzers see the same contract.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from evidence.api.errors import ErrorEnvelope
from evidence.api.uploads import UPLOAD_ID_PATTERN, UploadAccepted, UploadStatus
from evidence.assess.contract import (
    ASSESSMENT_ID_PATTERN,
    AssessmentRequest,
    AssessmentStarted,
    AssessmentStatus,
    RequestCriterion,
)
from evidence.coach.contract import CoachRequest, CoachResponse
from evidence.model import (
    DeleteDocumentResponse,
    DocumentText,
    FormatRequest,
    FormatResponse,
    IndexDocumentRequest,
    IndexDocumentResponse,
    ListDocumentsResponse,
    ListIndexesResponse,
    Plan,
    PlanRequest,
    RetrieveRequest,
    RetrieveResponse,
)
from evidence.names import INDEX_NAME_RE, TEXT_CHAR_CLASS
from evidence.version import package_version
from evidence.workbench.evaluate import EvaluateRequest, EvaluateResponse, ListEvalSetsResponse

#: JSON Schema pattern: at least one character that Python's str.strip() keeps.
NOT_SPACE = r"[^\s\u001c-\u001f\u0085]"
REF = "#/components/schemas/{model}"
#: Request text: no C0 control characters but tab, LF and CR (names.reject_control_characters).
PLAIN_PATTERN = f"^{TEXT_CHAR_CLASS}*$"
#: A query: plain text with at least one character str.strip() keeps.
QUERY_PATTERN = f"^{TEXT_CHAR_CLASS}*[^\\s\\u0000-\\u001f\\u0085]{TEXT_CHAR_CLASS}*$"


def _string_branch(schema: dict[str, Any]) -> dict[str, Any]:
    branches: list[dict[str, Any]] = schema.get("anyOf", [schema])
    return next((b for b in branches if b.get("type") == "string"), schema)


class Health(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str
    version: str


_REQUESTS: tuple[type[BaseModel], ...] = (
    IndexDocumentRequest,
    RetrieveRequest,
    PlanRequest,
    FormatRequest,
    CoachRequest,
    AssessmentRequest,
    EvaluateRequest,
)
_RESPONSES: tuple[type[BaseModel], ...] = (
    IndexDocumentResponse,
    DeleteDocumentResponse,
    ListIndexesResponse,
    RetrieveResponse,
    Plan,
    FormatResponse,
    CoachResponse,
    Health,
    AssessmentStarted,
    AssessmentStatus,
    ListDocumentsResponse,
    DocumentText,
    ListEvalSetsResponse,
    EvaluateResponse,
    UploadAccepted,
    UploadStatus,
    ErrorEnvelope,
)

_ERRORS = {
    "400": "Malformed request (body is not JSON, missing body)",
    "403": "The access policy does not let this caller read or write this index "
    "(the same answer whether or not the index exists)",
    "404": "Unknown index, document or route",
    "409": "An assessment with this id already exists",
    "413": "Request body larger than 6 MB",
    "429": "This caller already has as many batches or background uploads queued as it may; "
    "try again after `Retry-After` seconds",
    "422": "A field is out of range or of the wrong shape; `error.field` names it",
    "502": "The batch state machine refused or failed the call",
    "503": "The batch state machine is throttling, the request's deadline passed (`deadline_exceeded`, "
    "nothing written) or `evidence serve` is at its connection limit; try again after `Retry-After` seconds",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: str) -> dict[str, Any]:
    return {s: _json(_ref("ErrorEnvelope"), _ERRORS[s]) for s in statuses}


def _index_param() -> dict[str, Any]:
    return {
        "name": "index",
        "in": "path",
        "required": True,
        "description": "Index name",
        "schema": {"type": "string", "pattern": INDEX_NAME_RE.pattern, "maxLength": 64},
    }


def _document_param() -> dict[str, Any]:
    return {
        "name": "document_id",
        "in": "path",
        "required": True,
        "description": "URL-encoded document id (`s3://b/k` → `s3%3A%2F%2Fb%2Fk`)",
        "schema": {"type": "string", "minLength": 1, "maxLength": 1024},
    }


def _tighten(schemas: dict[str, Any], names: Mapping[tuple[Any, str], str]) -> None:
    """Express in JSON Schema the rules the models check in code."""
    doc = schemas[names[(IndexDocumentRequest, "validation")]]
    props = doc["properties"]
    for key in ("text", "content_base64"):
        props[key] = {"type": "string", "description": props[key].get("description", key)}
    props["content_base64"]["contentEncoding"] = "base64"
    doc["oneOf"] = [
        {"required": ["text"], "not": {"required": ["content_base64"]}},
        {"required": ["content_base64"], "not": {"required": ["text"]}},
    ]
    for model, plain in (
        (RetrieveRequest, ["criterion_question"]),
        (PlanRequest, ["criterion_question"]),
        (CoachRequest, ["conversation_snippet"]),
    ):
        props = schemas[names[(model, "validation")]]["properties"]
        # A character Python does not strip: JSON Schema's \S (ECMA) counts U+0085 and U+001C-1F
        # as text, str.strip() as space, so "\u0085" passed the schema and failed the model.
        props["query"]["pattern"] = QUERY_PATTERN
        for key in plain:
            _string_branch(props[key])["pattern"] = PLAIN_PATTERN
    turn = schemas.get("ConversationTurn")
    if turn is not None:
        turn["properties"]["content"]["pattern"] = PLAIN_PATTERN
    constraints = schemas.get("Constraints")
    if constraints is not None:
        # Content types are trimmed and must keep a character (checked in code).
        types = constraints["properties"]["content_types"]
        for branch in types.get("anyOf", [types]):
            if branch.get("type") == "array":
                branch["items"] = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": NOT_SPACE}
    from evidence.profiles import profile_names

    criterion = schemas.get(RequestCriterion.__name__)
    if criterion is not None:
        criterion["properties"]["question"]["pattern"] = QUERY_PATTERN
    assessment = schemas[names[(AssessmentRequest, "validation")]]["properties"]["profile"]
    assessment.pop("maxLength", None)
    assessment["enum"] = profile_names()
    # Retrieval refuses an unknown profile (422); planning alone accepts any name.
    profile = schemas[names[(RetrieveRequest, "validation")]]["properties"]["profile"]
    profile.pop("maxLength", None)
    profile["enum"] = profile_names()
    setting = schemas.get("EvalSetting")
    if setting is not None:
        setting["properties"]["profile"].pop("maxLength", None)
        setting["properties"]["profile"]["enum"] = profile_names()
    evaluate = schemas[names[(EvaluateRequest, "validation")]]
    evaluate["properties"]["set"] = _string_branch(evaluate["properties"]["set"])
    evaluate["properties"]["jsonl"] = _string_branch(evaluate["properties"]["jsonl"])
    evaluate["oneOf"] = [
        {"required": ["set"], "not": {"required": ["jsonl"]}},
        {"required": ["jsonl"], "not": {"required": ["set"]}},
    ]


@dataclass(frozen=True)
class _Refs:
    """Where each model's schema is in `components.schemas`: request bodies and 200 responses."""

    names: Mapping[tuple[Any, str], str]

    def ref(self, key: tuple[type[BaseModel], str]) -> dict[str, Any]:
        return _ref(self.names[key])

    def req(self, model: type[BaseModel]) -> dict[str, Any]:
        return {
            "required": True,
            "content": {"application/json": {"schema": self.ref((model, "validation"))}},
        }

    def ok(self, model: type[BaseModel], description: str) -> dict[str, Any]:
        return {"200": _json(self.ref((model, "serialization")), description)}


def _service_paths(refs: _Refs) -> dict[str, Any]:
    """The service itself: liveness, this document, the caller's indexes."""
    return {
        "/v1/health": {
            "get": {
                "operationId": "health",
                "summary": "Liveness",
                "responses": refs.ok(Health, "The service is up"),
            }
        },
        "/v1/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1 document")},
            }
        },
        "/v1/indexes": {
            "get": {
                "operationId": "listIndexes",
                "summary": "The indexes this caller may read or write",
                "responses": refs.ok(ListIndexesResponse, "Index names with their document and chunk counts"),
            }
        },
    }


def _document_paths(refs: _Refs) -> dict[str, Any]:
    """Documents: index (or upload in the background), read back, delete."""
    return {
        "/v1/indexes/{index}/documents": {
            "get": {
                "operationId": "listDocuments",
                "summary": "The index's documents with their passage and span counts (embedded store)",
                "parameters": [_index_param()],
                "responses": {
                    **refs.ok(ListDocumentsResponse, "Documents, by id"),
                    **_errors("400", "403", "404", "422"),
                },
            },
            "post": {
                "operationId": "indexDocument",
                "summary": "Index (or replace) one document; creates the index if missing",
                "parameters": [_index_param()],
                "requestBody": refs.req(IndexDocumentRequest),
                "responses": {
                    **refs.ok(IndexDocumentResponse, "Indexed; `status` says created, updated or unchanged"),
                    "202": {
                        **_json(
                            refs.ref((UploadAccepted, "serialization")),
                            "`evidence serve` only: a document larger than EVIDENCE_ASYNC_UPLOAD_BYTES "
                            "is indexed in the background; poll `status_url`",
                        ),
                        "headers": {
                            "Location": {"description": "The status URL", "schema": {"type": "string"}}
                        },
                    },
                    **_errors("400", "403", "404", "413", "422", "429", "503"),
                    "409": _json(
                        _ref("ErrorEnvelope"),
                        "The index was built with another embedder (`embedder_mismatch`), or was "
                        "written under other indexing settings than the service runs with "
                        "(`index_settings_mismatch`, `error.field` names the setting); nothing written",
                    ),
                },
            },
        },
        "/v1/uploads/{upload_id}": {
            "get": {
                "operationId": "getUpload",
                "summary": "Status (and once finished, the result or the error) of a background upload "
                "the caller sent; anyone else's is a 404",
                "parameters": [
                    {
                        "name": "upload_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": UPLOAD_ID_PATTERN},
                    }
                ],
                "responses": {**refs.ok(UploadStatus, "The upload"), **_errors("404", "422")},
            }
        },
        "/v1/indexes/{index}/documents/{document_id}": {
            "get": {
                "operationId": "getDocumentText",
                "summary": "The text a document's offsets refer to, rebuilt from its chunks "
                "(`citation.char_start`/`char_end` index into it); `gaps` lists what no chunk covers",
                "parameters": [_index_param(), _document_param()],
                "responses": {**refs.ok(DocumentText, "The document's text"), **_errors("403", "404", "422")},
            },
            "delete": {
                "operationId": "deleteDocument",
                "summary": "Delete every chunk of a document (URL-encode ids such as s3://bucket/key)",
                "parameters": [_index_param(), _document_param()],
                "responses": {
                    **refs.ok(DeleteDocumentResponse, "Deleted"),
                    **_errors("400", "403", "404", "422"),
                },
            },
        },
    }


def _evaluation_paths(refs: _Refs) -> dict[str, Any]:
    """The workbench's evaluation sets and runs."""
    return {
        "/v1/indexes/{index}/eval-sets": {
            "get": {
                "operationId": "listEvalSets",
                "summary": "QA and qrels sets in the store's eval folder for this index "
                "(<store>/eval/<index>/)",
                "parameters": [_index_param()],
                "responses": {**refs.ok(ListEvalSetsResponse, "The sets"), **_errors("403", "404", "422")},
            }
        },
        "/v1/indexes/{index}/evaluate": {
            "post": {
                "operationId": "evaluate",
                "summary": "`evidence eval`'s metrics for a QA or qrels set under one or two settings, "
                "with per-question wins and losses (docs/workbench.md)",
                "parameters": [_index_param()],
                "requestBody": refs.req(EvaluateRequest),
                "responses": {
                    **refs.ok(EvaluateResponse, "Metrics per setting and per question"),
                    **_errors("400", "403", "404", "413", "422"),
                },
            }
        },
    }


def _retrieval_paths(refs: _Refs) -> dict[str, Any]:
    """Retrieval: evidence for a question, and the coach."""
    return {
        "/v1/indexes/{index}/retrieve": {
            "post": {
                "operationId": "retrieve",
                "summary": "Evidence for a question: hits, follow-ups, evidence XML, telemetry",
                "parameters": [_index_param()],
                "requestBody": refs.req(RetrieveRequest),
                "responses": {
                    **refs.ok(RetrieveResponse, "Evidence"),
                    **_errors("400", "403", "404", "413", "422"),
                },
            }
        },
        "/v1/indexes/{index}/coach": {
            "post": {
                "operationId": "coach",
                "summary": "Seed 004's coach request over a knowledge-graph index: minimal cited context, "
                "or a clarifying question, or out of scope (docs/coach.md)",
                "parameters": [_index_param()],
                "requestBody": refs.req(CoachRequest),
                "responses": {
                    **refs.ok(CoachResponse, "Context to teach from, a clarifying question, or a refusal"),
                    **_errors("400", "403", "404", "413", "422"),
                },
            }
        },
    }


def _assessment_paths(refs: _Refs) -> dict[str, Any]:
    """Batch assessments started through the API."""
    return {
        "/v1/indexes/{index}/assessments": {
            "post": {
                "operationId": "startAssessment",
                "summary": "Start a batch assessment (plan, retrieve, format per criterion) as the caller; "
                "poll `status_url`",
                "parameters": [_index_param()],
                "requestBody": refs.req(AssessmentRequest),
                "responses": {
                    "202": {
                        **_json(refs.ref((AssessmentStarted, "serialization")), "Started"),
                        "headers": {
                            "Location": {"description": "The status URL", "schema": {"type": "string"}}
                        },
                    },
                    **_errors("400", "403", "404", "409", "413", "422", "429", "502", "503"),
                },
            }
        },
        "/v1/assessments/{assessment_id}": {
            "get": {
                "operationId": "getAssessment",
                "summary": "Status, progress and (once finished) per-criterion results of an assessment "
                "the caller started; anyone else's is a 404",
                "parameters": [
                    {
                        "name": "assessment_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": ASSESSMENT_ID_PATTERN},
                    }
                ],
                "responses": {
                    **refs.ok(AssessmentStatus, "The assessment"),
                    **_errors("404", "422", "502", "503"),
                },
            }
        },
    }


def _function_paths(refs: _Refs) -> dict[str, Any]:
    """The planner's and formatter's payloads over HTTP."""
    return {
        "/v1/plan": {
            "post": {
                "operationId": "plan",
                "summary": "The retrieval plan for a query (the planner function's payload)",
                "requestBody": refs.req(PlanRequest),
                "responses": {**refs.ok(Plan, "The plan"), **_errors("400", "413", "422")},
            }
        },
        "/v1/format": {
            "post": {
                "operationId": "format",
                "summary": "Evidence XML for hits and follow-ups (the formatter function's payload)",
                "requestBody": refs.req(FormatRequest),
                "responses": {
                    **refs.ok(FormatResponse, "Formatted evidence"),
                    **_errors("400", "413", "422"),
                },
            }
        },
    }


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "validation") for m in _REQUESTS]
    pairs += [(m, "serialization") for m in _RESPONSES]
    keys, defs = models_json_schema(pairs, ref_template=REF)
    schemas: dict[str, Any] = defs.get("$defs", {})
    names: dict[tuple[Any, str], str] = {k: v["$ref"].rsplit("/", 1)[-1] for k, v in keys.items()}
    _tighten(schemas, names)
    refs = _Refs(names)
    paths: dict[str, Any] = {}
    for group in (
        _service_paths,
        _document_paths,
        _evaluation_paths,
        _retrieval_paths,
        _assessment_paths,
        _function_paths,
    ):
        paths.update(group(refs))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "evidence",
            "version": package_version(),
            "description": "Evidence retrieval for assessment workflows. Every error is "
            '`{"error": {"code", "message", "field"?}}`.',
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }


def openapi_document() -> dict[str, Any]:
    """A copy: callers may not mutate the cached document."""
    return copy.deepcopy(_document())
