"""Deployment flags, read from CDK context (`cdk.json`, or `-c evidence:KEY=VALUE`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from constructs import Node

from evidence.names import DEFAULT_INDEX, INDEX_NAME_RE, INDEX_NAME_RULE

PREFIX = "evidence:"

#: Regions where Bedrock serves `cohere.rerank-v3-5:0` in-region (AWS Bedrock user guide,
#: "Supported Regions and models for reranking", read 2026-11-23). Elsewhere every rerank call
#: fails and retrieval silently falls back to the first-stage order.
BEDROCK_RERANK_REGIONS = frozenset(
    {"ap-northeast-1", "ca-central-1", "eu-central-1", "us-east-1", "us-west-2"}
)

#: What one indexer invocation can embed, from measurements (README, "Benchmarks"): MiniLM int8
#: embeds 4,143 word pieces/s on 2 cores; SciFact's plain text is 4.5 bytes per word piece; passages
#: overlap 32 of 256 pieces. Halved for a Lambda's smaller CPU share and parser overhead.
EMBED_TOKENS_PER_S = 4_143
BYTES_PER_TOKEN = 4.5
OVERLAP_FACTOR = 256 / 224
SAFETY = 0.5
#: Cold start (model load ~0.7 s), S3 read, index writes and the response: kept out of the budget.
INDEXER_MARGIN_S = 30

#: Largest gp3 volume (GiB) per data node for the instance types this stack is sized around: the
#: OpenSearch Service gp2 quotas ("EBS volume size quotas"), doubled for gp3 as AWS announced with
#: gp3 support (Big Data Blog, "Lower your Amazon OpenSearch Service storage cost with gp3"). Not
#: read from an account here; other types are not checked (`aws opensearch
#: describe-instance-type-limits` tells the exact figure).
EBS_MAX_GB = {
    "m7g.large.search": 1024,
    "m7g.xlarge.search": 2048,
    "m7g.2xlarge.search": 3072,
    "r7g.large.search": 2048,
    "r7g.xlarge.search": 3072,
    "r7g.2xlarge.search": 6144,
}
EBS_MIN_GB = 10


def indexer_document_limit(timeout_s: int) -> int:
    """Largest object (bytes) the indexer takes, so one document cannot outrun its timeout."""
    budget_s = max(timeout_s - INDEXER_MARGIN_S, 1)
    return int(budget_s * EMBED_TOKENS_PER_S * BYTES_PER_TOKEN / OVERLAP_FACTOR * SAFETY)


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


#: Room left for the policy in a function's 4 KB environment next to the other variables.
ACCESS_POLICY_MAX_CHARS = 2500


@dataclass(frozen=True)
class InfraSettings:
    search: SearchKind = SearchKind.DOMAIN
    api_auth: ApiAuth = ApiAuth.IAM
    assets: AssetMode = AssetMode.BUILD
    lambda_python: str = "3.12"
    distributed_map: bool = False
    map_concurrency: int = 10
    indexer_concurrency: int = 5  # the SQS event source's MaximumConcurrency (2..1000)
    indexer_reserved_concurrency: int = 0  # 0: none (a reservation fails in accounts with quota 10)
    indexer_batch_size: int = 1  # one document per invocation: a slow one times out only itself
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
    default_index: str = DEFAULT_INDEX  # EVIDENCE_DEFAULT_INDEX: uploads outside indexes/<index>/
    retain_data: bool = True  # domain, collection, buckets, keys: RETAIN_ON_UPDATE_OR_DELETE
    region: str | None = None  # the deploy region when known at synth (CDK_DEFAULT_REGION)
    #: EVIDENCE_ACCESS_POLICY for every function (evidence/access.py), JSON; unset: open.
    access_policy: str | None = None

    @property
    def indexer_max_concurrency(self) -> int:
        """Never above the reservation: SQS would start pollers that Lambda then throttles."""
        if self.indexer_reserved_concurrency:
            return min(self.indexer_concurrency, self.indexer_reserved_concurrency)
        return self.indexer_concurrency

    @property
    def indexer_max_document_bytes(self) -> int:
        return indexer_document_limit(self.indexer_timeout_s)

    @classmethod
    def from_context(cls, node: Node, *, region: str | None = None) -> InfraSettings:
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
        if not INDEX_NAME_RE.fullmatch(default_index):
            raise InfraConfigError(
                f"{PREFIX}defaultIndex={default_index!r}: not a valid index name ({INDEX_NAME_RULE})"
            )
        if reranker == "bedrock" and region and region not in BEDROCK_RERANK_REGIONS:
            raise InfraConfigError(
                f"{PREFIX}reranker=bedrock: Bedrock has no cohere.rerank-v3-5:0 in {region} (it has it in "
                f"{', '.join(sorted(BEDROCK_RERANK_REGIONS))}); deploy there, or use "
                f"-c {PREFIX}reranker=cohere (with cohereSecretArn) or -c {PREFIX}reranker=none"
            )
        concurrency = _int("indexerConcurrency", get("indexerConcurrency", d.indexer_concurrency), 2, 1000)
        reserved = _int(
            "indexerReservedConcurrency",
            get("indexerReservedConcurrency", d.indexer_reserved_concurrency),
            0,
            1000,
        )
        if reserved == 1:
            raise InfraConfigError(
                f"{PREFIX}indexerReservedConcurrency=1: an SQS event source polls with at least 2 "
                "concurrent invocations; reserve 0 (none) or at least 2"
            )
        instance = str(get("opensearchInstanceType", d.opensearch_instance_type))
        volume = _int(
            "opensearchVolumeGb", get("opensearchVolumeGb", d.opensearch_volume_gb), EBS_MIN_GB, 24576
        )
        if instance in EBS_MAX_GB and volume > EBS_MAX_GB[instance]:
            raise InfraConfigError(
                f"{PREFIX}opensearchVolumeGb={volume}: {instance} takes at most {EBS_MAX_GB[instance]} GiB "
                "of gp3 per node; choose a larger instance type or a smaller volume"
            )
        policy = get("accessPolicy", None)
        if policy is not None:
            policy = policy if isinstance(policy, str) else json.dumps(policy)
            from evidence.access import parse_policy
            from evidence.errors import ConfigurationError

            try:
                parse_policy(policy)
            except ConfigurationError as exc:
                raise InfraConfigError(f"{PREFIX}accessPolicy: {exc.message}") from exc
            if policy.lstrip().startswith("{") and len(policy) > ACCESS_POLICY_MAX_CHARS:
                raise InfraConfigError(
                    f"{PREFIX}accessPolicy is {len(policy)} characters: Lambda environments hold 4 KB "
                    f"in all; keep it under {ACCESS_POLICY_MAX_CHARS} (shorter patterns, fewer entries)"
                )
        return cls(
            access_policy=policy,
            default_index=default_index,
            region=region,
            retain_data=_bool(get("retainData", d.retain_data)),
            indexer_reserved_concurrency=reserved,
            indexer_batch_size=_int("indexerBatchSize", get("indexerBatchSize", d.indexer_batch_size), 1, 10),
            waf=_bool(get("waf", d.waf)),
            waf_rate_limit=_int("wafRateLimit", get("wafRateLimit", d.waf_rate_limit), 100, 2_000_000_000),
            search=_enum(SearchKind, "search", get("search", d.search)),
            api_auth=_enum(ApiAuth, "apiAuth", get("apiAuth", d.api_auth)),
            assets=_enum(AssetMode, "assets", get("assets", d.assets)),
            lambda_python=python,
            distributed_map=_bool(get("distributedMap", d.distributed_map)),
            map_concurrency=_int("mapConcurrency", get("mapConcurrency", d.map_concurrency), 1, 1000),
            indexer_concurrency=concurrency,
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
            opensearch_instance_type=instance,
            opensearch_master_instance_type=str(
                get("opensearchMasterInstanceType", d.opensearch_master_instance_type)
            ),
            opensearch_volume_gb=volume,
            embed_dimension=_int("embedDimension", get("embedDimension", d.embed_dimension), 8, 4096),
        )
