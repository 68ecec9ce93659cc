"""Stateful fuzzing of API sequences across two tenants (hypothesis): create → upload → retrieve
→ delete → list, in any order, each as either tenant, against the retriever Lambda with an
access policy. A model of what each index should hold is checked after every step: every
answer is the expected status (never a 5xx), a tenant never sees or changes the other's
documents, retrieval returns only documents that were uploaded and not deleted, and the
store holds exactly the model's documents after every step."""

from __future__ import annotations

import json
import shutil
import tempfile
from copy import deepcopy
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from evidence.access import AccessPolicy, Authorizer
from evidence.api import runtime
from evidence.config import Settings
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, lambda_context, load_event
from functions.retriever.handler import handler

TENANTS = {"acme": "apikey:acme0001", "globex": "apikey:globex001"}
POLICY = AccessPolicy.model_validate(
    {"principals": {key: {"read": [f"{t}-*"], "write": [f"{t}-*"]} for t, key in TENANTS.items()}}
)
INDEXES = [f"{t}-{s}" for t in TENANTS for s in ("a", "b")]
WORDS = ["encryption", "rotation", "backup", "incident", "vendor", "audit", "mfa", "retention"]

tenants = st.sampled_from(sorted(TENANTS))
indexes = st.sampled_from(INDEXES)
doc_ids = st.sampled_from([f"doc-{i}" for i in range(6)] + ["s3://b/k y", "ü/ä"])
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


class ApiSequences(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="fuzz-stateful-"))
        cfg = Settings(store_dir=self.dir / "store")
        self.service = EvidenceService(cfg, embedder=HashingEmbedder())
        runtime.configure(service=self.service, settings=cfg, authorizer=Authorizer(POLICY))
        self.context = lambda_context("fuzz")
        #: index → document id → text: what each index should hold.
        self.model: dict[str, dict[str, str]] = {}

    def teardown(self) -> None:
        runtime.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, tenant: str, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
        event = deepcopy(load_event("apigw/retrieve"))
        event.update(httpMethod=method, path=path, resource="/{proxy+}")
        event["body"] = json.dumps(payload) if payload is not None else None
        event["requestContext"]["identity"]["apiKeyId"] = TENANTS[tenant].removeprefix("apikey:")
        response = handler(event, self.context)
        status = int(response["statusCode"])
        assert status < 500, response["body"]
        return status, json.loads(response["body"])

    @staticmethod
    def owns(tenant: str, index: str) -> bool:
        return index.startswith(tenant + "-")

    @rule(tenant=tenants, index=indexes, doc_id=doc_ids, text=texts)
    def upload(self, tenant: str, index: str, doc_id: str, text: str) -> None:
        payload = {"document_id": doc_id, "filename": "d.txt", "text": text}
        status, body = self.call(tenant, "POST", f"/v1/indexes/{index}/documents", payload)
        if not self.owns(tenant, index):
            assert status == 403, body
            return
        assert status == 200, body
        before = self.model.setdefault(index, {}).get(doc_id)
        assert body["status"] == (
            "created" if before is None else "unchanged" if before == text else "updated"
        )
        self.model[index][doc_id] = text

    @rule(tenant=tenants, index=indexes, doc_id=doc_ids)
    def delete(self, tenant: str, index: str, doc_id: str) -> None:
        status, body = self.call(tenant, "DELETE", f"/v1/indexes/{index}/documents/{quote(doc_id, safe='')}")
        if not self.owns(tenant, index):
            assert status == 403, body
        elif doc_id in self.model.get(index, {}):
            assert status == 200, body
            del self.model[index][doc_id]
        else:
            assert status == 404, body

    @rule(tenant=tenants, index=indexes, query=texts)
    def retrieve(self, tenant: str, index: str, query: str) -> None:
        payload = {"query": query, "top_k": 50, "rerank_cutoff": 0}
        status, body = self.call(tenant, "POST", f"/v1/indexes/{index}/retrieve", payload)
        if not self.owns(tenant, index):
            assert status == 403, body
        elif index not in self.model:
            assert status == 404, body
        else:
            assert status == 200, body
            found = {h["document_id"] for h in body["hits"]}
            assert found <= set(self.model[index]), (found, self.model[index])

    @rule(tenant=tenants)
    def list_indexes(self, tenant: str) -> None:
        status, body = self.call(tenant, "GET", "/v1/indexes")
        assert status == 200
        mine = {i for i in self.model if self.owns(tenant, i)}
        assert {i["name"] for i in body["indexes"]} == mine

    @invariant()
    def store_matches_the_model(self) -> None:
        for index, docs in self.model.items():
            info = self.service.backend.get_index(index)
            assert info.documents == len(docs), (index, info, docs)


TestApiSequences = ApiSequences.TestCase
TestApiSequences.settings = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
