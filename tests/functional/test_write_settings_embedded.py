"""The service's writers into an embedded index written under other indexing settings
(`search.written`) surface the refusal through their one error mapping: the HTTP API's document
post answers 409 `index_settings_mismatch`, the indexer Lambda fails that SQS record alone
(`batchItemFailures`). Nothing is written either way (docs/ingest.md#indexing-settings-of-an-index)."""

from __future__ import annotations

import json
from pathlib import Path

from evidence.api import runtime
from evidence.config import Settings
from evidence.ingest import chunk_document, parse_text
from evidence.search.factory import get_backend
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, lambda_context, load_event
from tests.s3kit import OneObjectS3

INDEX = "vendor-acme"  # the index of the bundled events


def test_the_api_and_the_indexer_lambda_refuse_it(tmp_path: Path) -> None:
    from functions.indexer.handler import handler as indexer
    from functions.retriever.handler import handler as api

    embedder = HashingEmbedder()
    store = tmp_path / "store"
    headed = get_backend(Settings(store_dir=store, section_header="heading"))
    headed.create_index(INDEX, embedder_id=embedder.model_id, dimension=embedder.dimension)
    doc = chunk_document(
        parse_text("# Keys\n\nKeys rotate yearly.\n", filename="k.md", fmt="md"),
        document_id="k",
        source="k.md",
        metadata={},
    )
    headed.upsert(INDEX, [doc], [embedder.embed_documents([c.search_text for c in doc.chunks])])
    headed.close()
    settings = Settings(store_dir=store, aws_region="us-east-1")
    service = EvidenceService(settings, embedder=embedder)
    runtime.configure(
        service=service, settings=settings, s3_client=OneObjectS3(b"Encryption at rest: AES-256.")
    )
    try:
        response = api(load_event("apigw/index_document"), lambda_context())
        assert response["statusCode"] == 409, response["body"]
        error = json.loads(response["body"])["error"]
        assert (error["code"], error["field"]) == ("index_settings_mismatch", "section_header")
        assert "EVIDENCE_SECTION_HEADER=heading" in error["message"]
        event = load_event("sqs/s3_put")
        assert indexer(event, lambda_context()) == {
            "batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]
        }
        info = service.backend.get_index(INDEX)
        assert (info.documents, info.extra["written_with"]["section_header"]) == (1, "heading")
    finally:
        runtime.close()
