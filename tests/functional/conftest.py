"""Functional tests: handlers, the resolver, `evidence serve`, moto-backed S3/SQS.

Events come from events/ through `evidence.testing.load_event` (the one helper).
The service writes its embedded store under tmp_path and, unless a test is about the
real model, embeds with `HashingEmbedder` to stay fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence.api import runtime
from evidence.config import Settings
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, LambdaContext, lambda_context

REGION = "us-east-1"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(store_dir=tmp_path / "store", aws_region=REGION)


@pytest.fixture
def service(settings: Settings) -> Iterator[EvidenceService]:
    svc = EvidenceService(settings, embedder=HashingEmbedder())
    runtime.configure(service=svc, settings=settings)
    yield svc
    runtime.close()


@pytest.fixture
def context() -> LambdaContext:
    return lambda_context("evidence-test")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def moto(aws_env: None) -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
        yield


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """SQS ReceiveMessage results as the Lambda event source mapping delivers them."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }
