"""Deployment flags, read from CDK context (`cdk.json`, or `-c evidence:KEY=VALUE`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from constructs import Node

PREFIX = "evidence:"


class SearchKind(StrEnum):
    DOMAIN = "domain"  # Amazon OpenSearch Service domain in a VPC the stack builds
    SERVERLESS = "serverless"  # OpenSearch Serverless VECTORSEARCH collection


class ApiAuth(StrEnum):
    IAM = "iam"
    API_KEY = "apikey"


class AssetMode(StrEnum):
    BUILD = "build"  # infra/bundle.py output (built on demand, cached)
    PLACEHOLDER = "placeholder"  # tiny stand-ins: synth-only unit tests, never deployable


E = TypeVar("E", bound=StrEnum)


class InfraConfigError(ValueError):
    """A context flag has an invalid value."""


def _enum(kind: type[E], key: str, raw: Any) -> E:
    try:
        return kind(str(raw))
    except ValueError:
        valid = ", ".join(m.value for m in kind)
        raise InfraConfigError(f"{PREFIX}{key}={raw!r}: expected one of {valid}") from None


def _int(key: str, raw: Any, low: int, high: int) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InfraConfigError(f"{PREFIX}{key}={raw!r}: expected an integer") from None
    if not low <= value <= high:
        raise InfraConfigError(f"{PREFIX}{key}={value}: expected {low}..{high}")
    return value


def _bool(raw: Any) -> bool:
    return raw if isinstance(raw, bool) else str(raw).strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class InfraSettings:
    search: SearchKind = SearchKind.DOMAIN
    api_auth: ApiAuth = ApiAuth.IAM
    assets: AssetMode = AssetMode.BUILD
    lambda_python: str = "3.12"
    distributed_map: bool = False
    map_concurrency: int = 10
    indexer_concurrency: int = 5
    indexer_timeout_s: int = 300
    max_receive_count: int = 5
    reranker: str = "bedrock"  # none | cohere | bedrock (EVIDENCE_RERANKER)
    # rules | bedrock (EVIDENCE_PLANNER). Rules by default: the service has no LLM planner yet,
    # so granting Bedrock to the planner by default would be an unused permission.
    planner: str = "rules"
    cohere_secret_arn: str | None = None
    retrieve_p95_ms: int = 2000
    api_rate_limit: int = 50
    api_burst_limit: int = 100
    alarm_email: str | None = None
    opensearch_data_nodes: int = 2
    opensearch_instance_type: str = "r7g.large.search"
    opensearch_master_instance_type: str = "m7g.large.search"
    opensearch_volume_gb: int = 100
    embed_dimension: int = 384
    waf: bool = False  # a WAFv2 web ACL on the API stage
    waf_rate_limit: int = 2000  # requests per 5 minutes per source IP
    default_index: str = "documents"  # EVIDENCE_DEFAULT_INDEX: uploads outside indexes/<index>/

    @classmethod
    def from_context(cls, node: Node) -> InfraSettings:
        def get(key: str, default: Any) -> Any:
            value = node.try_get_context(PREFIX + key)
            return default if value is None or value == "" else value

        d = cls()
        reranker = str(get("reranker", d.reranker))
        if reranker not in {"none", "cohere", "bedrock"}:
            raise InfraConfigError(f"{PREFIX}reranker={reranker!r}: expected one of none, cohere, bedrock")
        planner = str(get("planner", d.planner))
        if planner not in {"rules", "bedrock"}:
            raise InfraConfigError(f"{PREFIX}planner={planner!r}: expected one of rules, bedrock")
        secret = get("cohereSecretArn", None)
        if reranker == "cohere" and not secret:
            raise InfraConfigError(
                f"{PREFIX}reranker=cohere needs {PREFIX}cohereSecretArn (a Secrets Manager ARN)"
            )
        python = str(get("lambdaPython", d.lambda_python))
        if python not in {"3.12", "3.13"}:
            raise InfraConfigError(
                f"{PREFIX}lambdaPython={python!r}: expected 3.12 or 3.13 (python3.11 runs on Amazon Linux 2, "
                "whose glibc 2.26 cannot load the locked onnxruntime/numpy wheels)"
            )
        nodes = _int("opensearchDataNodes", get("opensearchDataNodes", d.opensearch_data_nodes), 2, 20)
        if nodes % 2:
            raise InfraConfigError(
                f"{PREFIX}opensearchDataNodes={nodes}: zone awareness over 2 AZs needs an even count"
            )
        default_index = str(get("defaultIndex", d.default_index))
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", default_index):
            raise InfraConfigError(f"{PREFIX}defaultIndex={default_index!r}: not a valid index name")
        return cls(
            default_index=default_index,
            waf=_bool(get("waf", d.waf)),
            waf_rate_limit=_int("wafRateLimit", get("wafRateLimit", d.waf_rate_limit), 100, 2_000_000_000),
            search=_enum(SearchKind, "search", get("search", d.search)),
            api_auth=_enum(ApiAuth, "apiAuth", get("apiAuth", d.api_auth)),
            assets=_enum(AssetMode, "assets", get("assets", d.assets)),
            lambda_python=python,
            distributed_map=_bool(get("distributedMap", d.distributed_map)),
            map_concurrency=_int("mapConcurrency", get("mapConcurrency", d.map_concurrency), 1, 1000),
            indexer_concurrency=_int(
                "indexerConcurrency", get("indexerConcurrency", d.indexer_concurrency), 1, 100
            ),
            indexer_timeout_s=_int(
                "indexerTimeoutSeconds", get("indexerTimeoutSeconds", d.indexer_timeout_s), 30, 900
            ),
            max_receive_count=_int("maxReceiveCount", get("maxReceiveCount", d.max_receive_count), 1, 100),
            reranker=reranker,
            planner=planner,
            cohere_secret_arn=str(secret) if secret else None,
            retrieve_p95_ms=_int("retrieveP95Ms", get("retrieveP95Ms", d.retrieve_p95_ms), 50, 29000),
            api_rate_limit=_int("apiRateLimit", get("apiRateLimit", d.api_rate_limit), 1, 10000),
            api_burst_limit=_int("apiBurstLimit", get("apiBurstLimit", d.api_burst_limit), 1, 5000),
            alarm_email=get("alarmEmail", None),
            opensearch_data_nodes=nodes,
            opensearch_instance_type=str(get("opensearchInstanceType", d.opensearch_instance_type)),
            opensearch_master_instance_type=str(
                get("opensearchMasterInstanceType", d.opensearch_master_instance_type)
            ),
            opensearch_volume_gb=_int(
                "opensearchVolumeGb", get("opensearchVolumeGb", d.opensearch_volume_gb), 10, 3000
            ),
            embed_dimension=_int("embedDimension", get("embedDimension", d.embed_dimension), 8, 4096),
        )
