"""S3 → SQS → indexer with moto: real notifications, real partial batch responses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from evidence.api import runtime
from evidence.api.indexer import DEFAULT_INDEX, NotificationError, parse_notification, target
from evidence.config import Settings
from evidence.errors import IndexNotFoundError
from evidence.model import RetrieveRequest
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.indexer.handler import handler
from tests.functional.conftest import REGION, sqs_event

BUCKET = "acme-evidence-uploads"


@dataclass
class Uploads:
    s3: Any
    sqs: Any
    queue_url: str
    queue_arn: str

    def receive(self, expect: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for _ in range(10):
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            messages += got
            if len(messages) >= expect:
                break
        assert len(messages) == expect, [m["Body"][:200] for m in messages]
        return messages

    def event(self, expect: int) -> dict[str, Any]:
        return sqs_event(self.receive(expect), self.queue_arn)


@pytest.fixture
def uploads(moto: None, service: EvidenceService) -> Iterator[Uploads]:
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="evidence-uploads")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_notification_configuration(
        Bucket=BUCKET,
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]
        },
    )
    runtime.configure(service=service, settings=service.settings, s3_client=s3)
    up = Uploads(s3, sqs, url, arn)
    first = up.receive(1)
    assert json.loads(first[0]["Body"])["Event"] == "s3:TestEvent"
    yield up


def found(service: EvidenceService, index: str, query: str) -> dict[str, dict[str, Any]]:
    response = service.retrieve(index, RetrieveRequest(query=query, top_k=20))
    return {h.document_id: h.metadata for h in response.hits}


FOLLOWUP = (
    "Q: Do you encrypt customer data at rest?\n"
    "A: Yes. Customer data at rest is encrypted with AES-256 through AWS KMS managed keys."
)


def test_upload_is_searchable_then_delete_removes_it(
    uploads: Uploads, service: EvidenceService, context: LambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "indexes/vendor-acme/followups/Round 2 answers (encryption).txt"
    uploads.s3.put_object(
        Bucket=BUCKET,
        Key=key,
        Body=FOLLOWUP.encode(),
        ContentType="text/plain",
        Metadata={"round-number": "2", "criterion-question": "Do you encrypt customer data at rest?"},
    )
    event = uploads.event(1)
    raw_key = json.loads(event["Records"][0]["body"])["Records"][0]["s3"]["object"]["key"]
    assert raw_key != key and "%2F" in raw_key  # moto encodes like S3: unquote_plus is needed

    assert handler(event, context) == {"batchItemFailures": []}
    doc_id = f"s3://{BUCKET}/{key}"
    hits = found(service, "vendor-acme", "customer data encrypted at rest")
    assert doc_id in hits
    meta = hits[doc_id]
    assert meta["type"] == "followup_document"
    assert meta["round_number"] == 2
    assert meta["criterion_question"] == "Do you encrypt customer data at rest?"

    # The same notification again (SQS at-least-once): nothing is written again. The hash alone
    # cannot show it (a re-index writes the same hash), so every upsert that reaches the backend
    # is counted.
    backend = service.backend
    written: list[str] = []
    upsert = backend.upsert

    def counting_upsert(index: str, documents: Any, vectors: Any) -> Any:
        written.extend(d.document_id for d in documents)
        return upsert(index, documents, vectors)

    monkeypatch.setattr(backend, "upsert", counting_upsert)
    status_before = backend.document_hash("vendor-acme", doc_id)
    assert handler(event, context) == {"batchItemFailures": []}
    assert written == []  # not re-embedded, not re-indexed
    assert backend.document_hash("vendor-acme", doc_id) == status_before

    uploads.s3.delete_object(Bucket=BUCKET, Key=key)
    removed = uploads.event(1)
    assert json.loads(removed["Records"][0]["body"])["Records"][0]["eventName"].startswith("ObjectRemoved")
    assert handler(removed, context) == {"batchItemFailures": []}
    assert doc_id not in found(service, "vendor-acme", "customer data encrypted at rest")
    # A redelivered remove is a no-op, not a failure.
    assert handler(removed, context) == {"batchItemFailures": []}


def test_mixed_batch_fails_exactly_the_bad_records(
    uploads: Uploads, service: EvidenceService, settings: Settings, context: LambdaContext
) -> None:
    small = settings.model_copy(update={"max_document_bytes": 2_000})
    runtime.configure(service=service, settings=small, s3_client=uploads.s3)
    uploads.s3.put_object(
        Bucket=BUCKET, Key="policies/encryption.md", Body=b"# Encryption\n\nAES-256 at rest."
    )
    uploads.s3.put_object(Bucket=BUCKET, Key="indexes/vendor-acme/huge.txt", Body=b"word " * 1_000)
    uploads.s3.put_object(
        Bucket=BUCKET, Key="indexes/vendor-acme/broken.pdf", Body=b"%PDF-1.7 not really a pdf"
    )
    event = uploads.event(3)
    by_key = {
        json.loads(r["body"])["Records"][0]["s3"]["object"]["key"]: r["messageId"] for r in event["Records"]
    }
    garbage = dict(event["Records"][0], messageId="garbage-1", body='{"Records": [{"eventSource": "aws:s3"')
    not_s3 = dict(
        event["Records"][0], messageId="not-s3-1", body=json.dumps({"Records": [{"eventSource": "aws:sns"}]})
    )
    test_event = load_event("sqs/s3_test_event")["Records"][0]
    event["Records"] += [garbage, not_s3, test_event]

    result = handler(event, context)
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    assert failed == {
        by_key["indexes%2Fvendor-acme%2Fhuge.txt"],
        by_key["indexes%2Fvendor-acme%2Fbroken.pdf"],
        "garbage-1",
        "not-s3-1",
    }
    # The good record landed in the default index despite its neighbours.
    assert f"s3://{BUCKET}/policies/encryption.md" in found(service, DEFAULT_INDEX, "encryption at rest AES")


def test_stale_notifications_are_skipped(
    uploads: Uploads, service: EvidenceService, context: LambdaContext
) -> None:
    key = "indexes/vendor-acme/gone.txt"
    uploads.s3.put_object(Bucket=BUCKET, Key=key, Body=b"Data is encrypted at rest.")
    created = uploads.event(1)
    uploads.s3.delete_object(Bucket=BUCKET, Key=key)
    removed = uploads.event(1)
    # Delivered out of order: the remove first (object absent, nothing to delete), then the
    # create for an object that no longer exists: skipped, so nothing is resurrected.
    assert handler(removed, context) == {"batchItemFailures": []}
    assert handler(created, context) == {"batchItemFailures": []}
    with pytest.raises(IndexNotFoundError):
        service.retrieve("vendor-acme", RetrieveRequest(query="encrypted"))


@pytest.mark.parametrize(
    ("event_name", "outcome"),
    [
        ("LifecycleExpiration:Delete", "absent"),
        ("ObjectRestore:Completed", "ignored"),
        ("ObjectTagging:Put", "ignored"),
    ],
)
def test_other_s3_event_types(
    uploads: Uploads, service: EvidenceService, event_name: str, outcome: str
) -> None:
    from evidence.api.indexer import S3Change, apply_change

    assert apply_change(S3Change(event_name=event_name, bucket=BUCKET, key="indexes/acme/x.txt")) == outcome


def test_all_failed_batch_still_answers_with_the_list(
    service: EvidenceService, context: LambdaContext
) -> None:
    event = load_event("sqs/batch_one_bad")
    event["Records"] = [r for r in event["Records"] if r["messageId"].startswith("9f1d")]
    assert handler(event, context) == {
        "batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]
    }


def test_event_files_parse() -> None:
    batch = load_event("sqs/batch_one_bad")["Records"]
    assert parse_notification(batch[0]["body"]) == []
    put = parse_notification(batch[1]["body"])[0]
    assert put.key == "indexes/vendor-acme/followups/Round 2 answers (encryption).txt"
    assert not put.removed and put.size == 412
    with pytest.raises(NotificationError):
        parse_notification(batch[2]["body"])
    assert parse_notification(batch[3]["body"])[0].removed
    sns = json.dumps({"Type": "Notification", "Message": batch[1]["body"]})
    assert parse_notification(sns) == [put]


@pytest.mark.parametrize(
    ("key", "meta", "index", "expected"),
    [
        ("a.txt", {}, DEFAULT_INDEX, {}),
        ("followups/r1.txt", {}, DEFAULT_INDEX, {"type": "followup_document"}),
        ("indexes/acme/followups/r1.txt", {}, "acme", {"type": "followup_document"}),
        ("indexes/acme/r1.txt", {"type": "tc_files", "index": "other"}, "acme", {"type": "tc_files"}),
        (
            "indexes/acme/followups/r.txt",
            {"type": "followup_response:2"},
            "acme",
            {"type": "followup_response:2"},
        ),
        (
            "x.txt",
            {"criterion-question": "=?UTF-8?B?w6l0w6k/?="},
            DEFAULT_INDEX,
            {"criterion_question": "été?"},
        ),
    ],
)
def test_index_and_type_conventions(
    key: str, meta: dict[str, str], index: str, expected: dict[str, Any]
) -> None:
    assert target(key, meta) == (index, expected)


@pytest.mark.parametrize("key", ["indexes/Bad Name/x.txt", "indexes/acme"])
def test_bad_index_prefix_is_a_typed_failure(key: str) -> None:
    with pytest.raises(NotificationError):
        target(key)
