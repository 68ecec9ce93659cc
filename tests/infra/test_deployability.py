"""Deployable by a stranger: a failed first deploy cleans up, new accounts fit, the reranker's
region is checked, the indexer reads and bounds its work, the domain is watched, and the names,
models and settings are the service's own."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from evidence.config import Settings, unknown_environment
from evidence.observability import NAMESPACE, RERANK_FALLBACKS
from infra.evidence_infra import api
from infra.evidence_infra.settings import (
    BEDROCK_RERANK_REGIONS,
    InfraConfigError,
    InfraSettings,
    indexer_document_limit,
)
from tests.infra.infra_synth import Synth, actions, statements

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

STATEFUL = (
    "AWS::OpenSearchService::Domain",
    "AWS::KMS::Key",
    "AWS::S3::Bucket",
    "AWS::OpenSearchServerless::Collection",
)


def settings(region: str | None = None, **context: Any) -> InfraSettings:
    from aws_cdk import App

    node = App(context={f"evidence:{k}": v for k, v in context.items()}).node
    return InfraSettings.from_context(node, region=region)


def _function(s: Synth, name: str) -> dict[str, Any]:
    (props,) = [
        v["Properties"]
        for k, v in s.resources("AWS::Lambda::Function").items()
        if k.startswith(f"Functions{name}")
    ]
    function: dict[str, Any] = props
    return function


# --- 1. a failed first deploy -----------------------------------------------------------------------


def test_stateful_resources_are_retained_except_on_create(default_synth: Synth) -> None:
    """RetainExceptOnCreate: a rollback of the first deploy deletes the domain, keys and buckets it
    created (no orphan whose network interfaces block the VPC); later deletions keep the data."""
    for type_ in STATEFUL:
        for logical_id, resource in default_synth.resources(type_).items():
            assert resource["DeletionPolicy"] == "RetainExceptOnCreate", logical_id
            assert resource["UpdateReplacePolicy"] == "Retain", logical_id
    assert default_synth.resources("AWS::OpenSearchService::Domain")


def test_what_a_retained_domain_sits_in_is_retained_with_it(default_synth: Synth) -> None:
    """Deleting the stack keeps the domain; its VPC, private subnets and security group would then
    fail to delete (DELETE_FAILED), so they are kept too. Everything else goes."""
    kept = {
        k: v["Type"]
        for k, v in default_synth.json["Resources"].items()
        if v.get("DeletionPolicy") in {"Retain", "RetainExceptOnCreate"}
    }
    assert sorted(t for t in kept.values() if t.startswith("AWS::EC2::")) == [
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::Subnet",
        "AWS::EC2::Subnet",
        "AWS::EC2::VPC",
    ]
    (sg,) = [k for k, t in kept.items() if t == "AWS::EC2::SecurityGroup"]
    assert sg.startswith("SearchDomainSg")
    assert not [k for k, t in kept.items() if t.startswith("AWS::EC2::NatGateway")], "NAT costs money"
    # CDK keeps API Gateway's account-wide logging role on purpose (other APIs in the account use it).
    cdk_own = {"AWS::ApiGateway::Account", "AWS::IAM::Role"}
    assert set(kept.values()) <= {
        *STATEFUL,
        *cdk_own,
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::Subnet",
        "AWS::EC2::VPC",
    }


def test_retain_data_false_deletes_everything(alt_synth: Synth) -> None:
    for type_ in STATEFUL:
        for logical_id, resource in alt_synth.resources(type_).items():
            assert resource["DeletionPolicy"] == "Delete", logical_id


def test_only_the_current_layer_version_is_kept(default_synth: Synth) -> None:
    _, layer = default_synth.one("AWS::Lambda::LayerVersion")
    assert layer.get("DeletionPolicy", "Delete") == "Delete"


# --- 2. new accounts --------------------------------------------------------------------------------


def test_no_reservation_by_default_and_max_concurrency_within_a_reservation(
    default_synth: Synth, alt_synth: Synth
) -> None:
    assert "ReservedConcurrentExecutions" not in _function(default_synth, "Indexer")
    _, mapping = default_synth.one("AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 5}
    # indexerConcurrency=5 with a reservation of 3: SQS never starts more pollers than may run.
    assert _function(alt_synth, "Indexer")["ReservedConcurrentExecutions"] == 3
    _, mapping = alt_synth.one("AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 3}


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"indexerReservedConcurrency": 1}, "at least 2"),
        ({"indexerConcurrency": 1}, "expected 2..1000"),
        ({"indexerBatchSize": 11}, "expected 1..10"),
    ],
)
def test_concurrency_flags_that_cannot_work_are_refused(context: dict[str, Any], message: str) -> None:
    with pytest.raises(InfraConfigError, match=message):
        settings(**context)


# --- 3. the reranker's region -----------------------------------------------------------------------


def test_bedrock_reranker_in_a_region_without_the_model_is_refused_at_synth() -> None:
    with pytest.raises(InfraConfigError, match=r"no cohere.rerank-v3-5:0 in eu-west-1.*reranker=none"):
        settings(region="eu-west-1")
    assert settings(region="eu-central-1").reranker == "bedrock"
    assert settings(region="eu-west-1", reranker="none").reranker == "none"
    assert settings(region=None).reranker == "bedrock"  # environment-agnostic synth: not known
    assert "eu-west-1" not in BEDROCK_RERANK_REGIONS


def test_reranker_fallbacks_have_a_rate_alarm_on_the_metric_the_code_emits(
    default_synth: Synth, alt_synth: Synth
) -> None:
    def fallback_alarms(s: Synth) -> list[dict[str, Any]]:
        return [
            a["Properties"]
            for a in s.resources("AWS::CloudWatch::Alarm").values()
            if a["Properties"].get("MetricName") == RERANK_FALLBACKS
        ]

    (alarm,) = fallback_alarms(default_synth)
    assert alarm["Namespace"] == NAMESPACE and alarm["Statistic"] == "Average"
    env = _function(default_synth, "Retriever")["Environment"]["Variables"]
    # Powertools' dimensions: the service name the stack sets, and lambda_handler's function name.
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
        "service": env["POWERTOOLS_SERVICE_NAME"],
        "function": "retriever",
    }
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == NAMESPACE
    assert 0 < alarm["Threshold"] < 1 and alarm["EvaluationPeriods"] == 3
    assert len(fallback_alarms(alt_synth)) == 1  # cohere reranks too


# --- 4. missing object → 404 -------------------------------------------------------------------------


def test_indexer_may_list_the_documents_bucket_so_a_gone_object_is_404(default_synth: Synth) -> None:
    stmts = statements(default_synth, "FunctionsIndexerRole")
    (listing,) = [s for s in stmts if s["Action"] == "s3:ListBucket"]
    assert listing["Resource"]["Fn::GetAtt"][0].startswith("StorageDocuments")
    assert listing["Resource"]["Fn::GetAtt"][1] == "Arn", "the bucket, not its objects"
    for role in ("Retriever", "Planner", "Formatter"):
        assert "s3:ListBucket" not in actions(statements(default_synth, f"Functions{role}Role"))


# --- 5. large documents ------------------------------------------------------------------------------


def test_one_document_per_invocation_and_a_size_bound_from_the_timeout(
    default_synth: Synth, alt_synth: Synth
) -> None:
    _, mapping = default_synth.one("AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["BatchSize"] == 1
    assert "MaximumBatchingWindowInSeconds" not in mapping["Properties"]
    env = _function(default_synth, "Indexer")["Environment"]["Variables"]
    assert int(env["EVIDENCE_MAX_DOCUMENT_BYTES"]) == indexer_document_limit(300)
    assert (
        "EVIDENCE_MAX_DOCUMENT_BYTES" not in _function(default_synth, "Retriever")["Environment"]["Variables"]
    )
    alt = _function(alt_synth, "Indexer")["Environment"]["Variables"]
    assert int(alt["EVIDENCE_MAX_DOCUMENT_BYTES"]) == indexer_document_limit(900)
    _, mapping = alt_synth.one("AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["BatchSize"] == 4


def test_document_limit_follows_measured_throughput() -> None:
    # 270 s of 4,143 word pieces/s, 4.5 bytes each, 12.5% passage overlap, halved: ~2.2 MB.
    assert 2_000_000 < indexer_document_limit(300) < 2_400_000
    assert indexer_document_limit(900) > 3 * indexer_document_limit(300)
    assert indexer_document_limit(900) < Settings().max_document_bytes  # tighter than the API's 50 MB


# --- 6. nobody is told ---------------------------------------------------------------------------------


def test_domain_health_alarms(default_synth: Synth, alt_synth: Synth) -> None:
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in default_synth.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/ES"
    }
    assert {
        "ClusterStatus.red",
        "ClusterStatus.yellow",
        "FreeStorageSpace",
        "JVMMemoryPressure",
        "MasterJVMMemoryPressure",
        "MasterReachableFromNode",
        "KNNGraphMemoryUsagePercentage",
        "KNNCircuitBreakerTriggered",
        "ClusterIndexWritesBlocked",
    } <= set(alarms)
    free = alarms["FreeStorageSpace"]
    assert free["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    assert free["Threshold"] == 100 * 1024 // 4  # a quarter of the 100 GiB volume, in MiB
    assert alarms["MasterReachableFromNode"]["ComparisonOperator"] == "LessThanThreshold"
    for alarm in alarms.values():
        assert {d["Name"] for d in alarm["Dimensions"]} == {"DomainName", "ClientId"}
        assert alarm["AlarmActions"]
    assert not [
        a
        for a in alt_synth.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/ES"
    ]


def test_unset_alarm_email_is_a_synth_warning(default_synth: Synth, alt_synth: Synth) -> None:
    from aws_cdk.assertions import Annotations, Match

    Annotations.from_stack(default_synth.stack).has_warning(
        "*", Match.string_like_regexp("No alarm subscriber")
    )
    default_synth.template.resource_count_is("AWS::SNS::Subscription", 0)
    alt_synth.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    assert not Annotations.from_stack(alt_synth.stack).find_warning(
        "*", Match.string_like_regexp("No alarm subscriber")
    )


# --- 7. smaller ----------------------------------------------------------------------------------------


def test_cloudwatch_uses_the_data_key_only_for_this_account(default_synth: Synth) -> None:
    keys = default_synth.resources("AWS::KMS::Key")
    (data_key,) = [v for k, v in keys.items() if k.startswith("DataKey")]
    (stmt,) = [
        s
        for s in data_key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com"
    ]
    assert stmt["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_names_derive_from_the_stack_name(default_synth: Synth, alt_synth: Synth) -> None:
    aliases = sorted(
        a["Properties"]["AliasName"] for a in default_synth.resources("AWS::KMS::Alias").values()
    )
    assert aliases == ["alias/evidence-data", "alias/evidence-queues"]
    aliases = sorted(a["Properties"]["AliasName"] for a in alt_synth.resources("AWS::KMS::Alias").values())
    assert aliases == ["alias/evidencedev-data", "alias/evidencedev-queues"]
    _, collection = alt_synth.one("AWS::OpenSearchServerless::Collection")
    assert collection["Properties"]["Name"] == "evidencedev"
    names = {
        p["Properties"]["Name"]
        for p in alt_synth.resources("AWS::OpenSearchServerless::SecurityPolicy").values()
    }
    assert names == {"evidencedev-enc", "evidencedev-net"}


def test_ebs_volume_larger_than_the_instance_takes_is_refused() -> None:
    with pytest.raises(InfraConfigError, match=r"r7g\.large\.search takes at most 2048 GiB"):
        settings(opensearchVolumeGb=3000)
    assert settings(opensearchVolumeGb=2048).opensearch_volume_gb == 2048
    with pytest.raises(InfraConfigError, match=r"expected 10\.\."):
        settings(opensearchVolumeGb=5)


def test_waf_refuses_bodies_lambda_cannot_take_with_our_413(alt_synth: Synth) -> None:
    _, acl = alt_synth.one("AWS::WAFv2::WebACL")
    rules = {r["Name"]: r for r in acl["Properties"]["Rules"]}
    block = rules["BodyTooLarge"]["Action"]["Block"]["CustomResponse"]
    assert block["ResponseCode"] == 413
    body = json.loads(acl["Properties"]["CustomResponseBodies"][block["CustomResponseBodyKey"]]["Content"])
    assert body["error"]["code"] == "payload_too_large"
    statement = rules["BodyTooLarge"]["Statement"]["RegexPatternSetReferenceStatement"]
    assert statement["FieldToMatch"] == {"SingleHeader": {"Name": "content-length"}}
    _, patterns = alt_synth.one("AWS::WAFv2::RegexPatternSet")
    assert patterns["Properties"]["RegularExpressionList"] == [api.CONTENT_LENGTH_TOO_LARGE]


@pytest.mark.parametrize(
    ("length", "refused"),
    [(0, False), (5_999_999, False), (6_000_000, True), (9_999_999, True), (10_485_760, True), (123, False)],
)
def test_content_length_pattern_matches_exactly_the_too_large(length: int, refused: bool) -> None:
    assert bool(re.fullmatch(api.CONTENT_LENGTH_TOO_LARGE, str(length))) is refused
    assert Settings().max_body_bytes >= api.MAX_BODY_BYTES


# --- one source of truth ------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default_synth", "alt_synth"])
def test_every_evidence_variable_the_stack_sets_is_a_setting(
    which: str, request: pytest.FixtureRequest
) -> None:
    s: Synth = request.getfixturevalue(which)
    seen = set()
    for fn in s.resources("AWS::Lambda::Function").values():
        env = fn["Properties"].get("Environment", {}).get("Variables", {})
        names = {k: "x" for k in env if k.startswith("EVIDENCE_")}
        seen |= set(names)
        assert unknown_environment(names) == [], sorted(names)
    assert {"EVIDENCE_BACKEND", "EVIDENCE_DEFAULT_INDEX", "EVIDENCE_MAX_DOCUMENT_BYTES"} <= seen


def test_granted_models_are_the_ones_the_service_calls(default_synth: Synth, alt_synth: Synth) -> None:
    def invoke_resources(s: Synth, role: str) -> str:
        return json.dumps(
            [st["Resource"] for st in statements(s, role) if st["Action"] == "bedrock:InvokeModel"]
        )

    assert f"foundation-model/{Settings().bedrock_rerank_model}" in invoke_resources(
        default_synth, "FunctionsRetrieverRole"
    )
    assert f"foundation-model/{Settings().bedrock_planner_model}" in invoke_resources(
        alt_synth, "FunctionsPlannerRole"
    )
