"""The Cohere key from Secrets Manager (moto), read once on first use."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from evidence.config import RerankerKind, Settings
from evidence.errors import ConfigurationError
from evidence.rank.rerank import build_reranker, secret_string


@pytest.fixture(autouse=True)
def _clear_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    secret_string.cache_clear()


@mock_aws
def test_cohere_key_from_secret_plain_and_json() -> None:
    sm = boto3.client("secretsmanager", region_name="eu-west-1")
    plain = sm.create_secret(Name="cohere-plain", SecretString="k-123\n")["ARN"]
    as_json = sm.create_secret(Name="cohere-json", SecretString=json.dumps({"api_key": "k-456"}))["ARN"]
    assert secret_string(plain, "eu-west-1") == "k-123"
    assert secret_string(as_json, "eu-west-1") == "k-456"
    reranker = build_reranker(
        Settings(reranker=RerankerKind.COHERE, cohere_api_key_secret_arn=plain, aws_region="eu-west-1")
    )
    assert reranker is not None and reranker._api_key == "k-123"  # type: ignore[attr-defined]


@mock_aws
def test_missing_secret_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        secret_string("arn:aws:secretsmanager:eu-west-1:123456789012:secret:nope", "eu-west-1")
