"""Deployment flags: parsed from CDK context, invalid values refused with the valid ones listed."""

from __future__ import annotations

from typing import Any

import pytest

from infra.evidence_infra.settings import ApiAuth, InfraConfigError, InfraSettings, SearchKind

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


def settings(**context: Any) -> InfraSettings:
    from aws_cdk import App

    return InfraSettings.from_context(App(context={f"evidence:{k}": v for k, v in context.items()}).node)


def test_defaults_match_cdk_json() -> None:
    import json
    from pathlib import Path

    cdk_json = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())["context"]
    assert settings(**{k.removeprefix("evidence:"): v for k, v in cdk_json.items()}) == settings()


def test_flags_parse() -> None:
    s = settings(search="serverless", apiAuth="apikey", distributedMap="true", mapConcurrency="40")
    assert (s.search, s.api_auth, s.distributed_map, s.map_concurrency) == (
        SearchKind.SERVERLESS,
        ApiAuth.API_KEY,
        True,
        40,
    )


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"search": "elastic"}, "expected one of domain, serverless"),
        ({"lambdaPython": "3.11"}, "glibc 2.26"),
        ({"opensearchDataNodes": 3}, "even count"),
        ({"reranker": "cohere"}, "cohereSecretArn"),
        ({"mapConcurrency": 0}, "expected 1..1000"),
        ({"indexerTimeoutSeconds": "soon"}, "expected an integer"),
        ({"defaultIndex": "../etc"}, "not a valid index name"),
    ],
)
def test_invalid_flags_are_refused(context: dict[str, Any], message: str) -> None:
    with pytest.raises(InfraConfigError, match=message):
        settings(**context)


def test_access_policy_is_validated_at_synth() -> None:
    policy = {"principals": {"apikey:abc": {"read": ["acme-*"]}}}
    assert (
        settings(accessPolicy=policy).access_policy == '{"principals": {"apikey:abc": {"read": ["acme-*"]}}}'
    )
    assert settings().access_policy is None
    with pytest.raises(InfraConfigError, match="accessPolicy"):
        settings(accessPolicy={"principals": {"x": {"read": ["Acme"]}}})
