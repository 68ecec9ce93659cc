"""Template assertions on the synthesized stack (default flags and the alternative flags)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from tests.infra.infra_synth import Synth, actions, resolve_join, statements

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


# --- storage -------------------------------------------------------------------------------------


def test_buckets_are_encrypted_versioned_private_logged(default_synth: Synth) -> None:
    buckets = default_synth.resources("AWS::S3::Bucket")
    assert len(buckets) == 3  # documents, results, access logs
    for logical_id, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["VersioningConfiguration"] == {"Status": "Enabled"}, logical_id
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, logical_id
        sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
            "ServerSideEncryptionByDefault"
        ]
        if not logical_id.startswith("StorageAccessLogs"):
            assert sse["SSEAlgorithm"] == "aws:kms", logical_id
            assert "LoggingConfiguration" in props, logical_id
    # TLS enforced: every bucket policy denies aws:SecureTransport=false.
    policies = default_synth.resources("AWS::S3::BucketPolicy")
    assert len(policies) == 3
    for policy in policies.values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert any(
            s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false" for s in denies
        )


def test_create_and_remove_notifications_go_to_the_indexing_queue(default_synth: Synth) -> None:
    _, notifications = default_synth.one("Custom::S3BucketNotifications")
    configs = notifications["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    assert sorted(c["Events"][0] for c in configs) == ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
    queue_ids = {c["QueueArn"]["Fn::GetAtt"][0] for c in configs}
    assert len(queue_ids) == 1 and next(iter(queue_ids)).startswith("QueuesIndexing")


# --- queues --------------------------------------------------------------------------------------


def test_indexing_queue_redrives_to_dlq_with_six_times_visibility(default_synth: Synth) -> None:
    queues = default_synth.resources("AWS::SQS::Queue")
    main = next(v for k, v in queues.items() if k.startswith("QueuesIndexing") and "Dlq" not in k)
    dlq_id = next(k for k in queues if k.startswith("QueuesIndexingDlq"))
    props = main["Properties"]
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": 5,
    }
    indexer = next(
        v
        for k, v in default_synth.resources("AWS::Lambda::Function").items()
        if k.startswith("FunctionsIndexer")
    )
    assert props["VisibilityTimeout"] >= 6 * indexer["Properties"]["Timeout"]
    for queue in queues.values():
        assert "KmsMasterKeyId" in queue["Properties"]


# --- functions -----------------------------------------------------------------------------------


def _functions(s: Synth) -> dict[str, dict[str, Any]]:
    out = {}
    for logical_id, fn in s.resources("AWS::Lambda::Function").items():
        for name in ("Indexer", "Retriever", "Planner", "Formatter", "SetupFunction"):
            if logical_id.startswith(("Functions" + name, "Search" + name)):
                out[name] = fn["Properties"]
    return out


def test_four_functions_and_setup_share_the_layer_python312_x86(default_synth: Synth) -> None:
    fns = _functions(default_synth)
    assert sorted(fns) == ["Formatter", "Indexer", "Planner", "Retriever", "SetupFunction"]
    layer_id, _ = default_synth.one("AWS::Lambda::LayerVersion")
    for name, fn in fns.items():
        assert fn["Runtime"] == "python3.12", name
        assert fn["Architectures"] == ["x86_64"], name
        assert fn["Layers"] == [{"Ref": layer_id}], name
    assert len({json.dumps(fn["Role"]) for fn in fns.values()}) == 5, "one role per function"
    env = fns["Retriever"]["Environment"]["Variables"]
    for key in (
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "LOG_LEVEL",
        "EVIDENCE_BACKEND",
        "EVIDENCE_OPENSEARCH_ENDPOINT",
        "EVIDENCE_OPENSEARCH_SERVICE",
        "EVIDENCE_AWS_REGION",
        "EVIDENCE_RERANKER",
        "EVIDENCE_DEFAULT_INDEX",
    ):
        assert key in env, key
    # Read by no handler (only the local state machine's launcher, a developer tool, reads it).
    assert all("EVIDENCE_RESULTS_BUCKET" not in fn["Environment"]["Variables"] for fn in fns.values())
    assert env["EVIDENCE_BACKEND"] == "opensearch" and env["EVIDENCE_OPENSEARCH_SERVICE"] == "es"
    # No reservation by default: it fails in accounts whose concurrency quota is 10 (new accounts).
    assert all("ReservedConcurrentExecutions" not in fn for fn in fns.values())
    assert (
        "VpcConfig" in fns["Indexer"]
        and "VpcConfig" in fns["Retriever"]
        and "VpcConfig" in fns["SetupFunction"]
    )
    assert "VpcConfig" not in fns["Planner"] and "VpcConfig" not in fns["Formatter"]


def test_indexer_event_source_reports_batch_item_failures(default_synth: Synth) -> None:
    _, mapping = default_synth.one("AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["FunctionName"]["Ref"].startswith("FunctionsIndexer")
    assert props["EventSourceArn"]["Fn::GetAtt"][0].startswith("QueuesIndexing")


def test_iam_is_least_privilege_per_function(default_synth: Synth) -> None:
    for policy in default_synth.resources("AWS::IAM::Policy").values():
        for stmt in policy["Properties"]["PolicyDocument"]["Statement"]:
            acts = [stmt["Action"]] if isinstance(stmt["Action"], str) else stmt["Action"]
            assert not any(a == "*" or a.endswith(":*") for a in acts), stmt
    indexer = actions(statements(default_synth, "FunctionsIndexerRole"))
    retriever = actions(statements(default_synth, "FunctionsRetrieverRole"))
    planner = actions(statements(default_synth, "FunctionsPlannerRole"))
    formatter = actions(statements(default_synth, "FunctionsFormatterRole"))
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "s3:GetObject", "es:ESHttpPut"} <= indexer
    assert not any(a.startswith(("bedrock:", "s3:Put")) for a in indexer)
    assert {"es:ESHttpPost", "bedrock:InvokeModel", "bedrock:Rerank", "s3:PutObject"} <= retriever
    assert not any(a.startswith(("sqs:", "secretsmanager:")) for a in retriever)
    assert not any(a.startswith(("es:", "s3:", "sqs:", "bedrock:")) for a in planner)  # rules planner
    assert {"s3:GetObject", "s3:PutObject"} <= formatter
    assert not any(a.startswith(("es:", "sqs:", "bedrock:")) for a in formatter)


def test_bedrock_planner_flag_grants_one_model(alt_synth: Synth) -> None:
    planner = actions(statements(alt_synth, "FunctionsPlannerRole"))
    assert "bedrock:InvokeModel" in planner
    # Bedrock model access names one model, not every model.
    for stmt in statements(alt_synth, "FunctionsPlannerRole"):
        if stmt["Action"] == "bedrock:InvokeModel":
            assert "foundation-model/anthropic." in resolve_join(stmt["Resource"])


# --- search --------------------------------------------------------------------------------------


def test_domain_is_encrypted_private_fine_grained_zone_aware(default_synth: Synth) -> None:
    default_synth.template.has_resource_properties(
        "AWS::OpenSearchService::Domain",
        {
            "EncryptionAtRestOptions": {"Enabled": True, "KmsKeyId": Match.any_value()},
            "NodeToNodeEncryptionOptions": {"Enabled": True},
            "DomainEndpointOptions": {
                "EnforceHTTPS": True,
                "TLSSecurityPolicy": "Policy-Min-TLS-1-2-PFS-2023-10",
            },
            "AdvancedSecurityOptions": {
                "Enabled": True,
                "InternalUserDatabaseEnabled": False,
                "MasterUserOptions": {"MasterUserARN": Match.any_value()},
            },
            "ClusterConfig": Match.object_like(
                {
                    "ZoneAwarenessEnabled": True,
                    "DedicatedMasterEnabled": True,
                    "ZoneAwarenessConfig": {"AvailabilityZoneCount": 2},
                }
            ),
            "VPCOptions": Match.object_like({"SubnetIds": Match.any_value()}),
            "EngineVersion": "OpenSearch_2.19",
        },
    )
    default_synth.template.resource_count_is("AWS::EC2::VPC", 1)
    default_synth.template.resource_count_is("AWS::EC2::FlowLog", 1)
    default_synth.template.resource_count_is("AWS::OpenSearchServerless::Collection", 0)


def test_setup_custom_resource_gets_roles_and_endpoint(default_synth: Synth) -> None:
    _, setup = default_synth.one("Custom::EvidenceSearchSetup")
    props = setup["Properties"]
    assert props["Service"] == "es" and props["HybridMode"] == "server"
    assert len(props["WriterRoles"]) == 2  # indexer, retriever
    assert props["ServiceToken"]["Fn::GetAtt"][0].startswith("SearchSetupFunction")
    fns = _functions(default_synth)
    assert fns["SetupFunction"]["Handler"] == "search_setup.on_event"
    # The domain refuses to create an evidence index implicitly (a bulk into an index another
    # process deleted); a property, so a deploy of an existing stack applies it too.
    assert props["AutoCreateIndex"] == "+.*,-*"


def test_serverless_collection_with_kms_network_and_data_policies(alt_synth: Synth) -> None:
    _, collection = alt_synth.one("AWS::OpenSearchServerless::Collection")
    assert collection["Properties"]["Type"] == "VECTORSEARCH"
    policies = {
        p["Properties"]["Type"]: p
        for p in alt_synth.resources("AWS::OpenSearchServerless::SecurityPolicy").values()
    }
    assert set(policies) == {"encryption", "network"}
    encryption = resolve_join(policies["encryption"]["Properties"]["Policy"])
    assert '"AWSOwnedKey":false' in encryption and '"KmsARN":"TOKEN"' in encryption
    _, data = alt_synth.one("AWS::OpenSearchServerless::AccessPolicy")
    rules = json.loads(resolve_join(data["Properties"]["Policy"]))
    assert len(rules[0]["Principal"]) == 3  # indexer, retriever, setup
    assert "aoss:DeleteIndex" not in json.dumps(rules)
    _, setup = alt_synth.one("Custom::EvidenceSearchSetup")
    assert "AutoCreateIndex" not in setup["Properties"]  # Serverless has no cluster settings
    alt_synth.template.resource_count_is("AWS::OpenSearchService::Domain", 0)
    alt_synth.template.resource_count_is("AWS::EC2::VPC", 0)
    env = _functions(alt_synth)["Retriever"]["Environment"]["Variables"]
    assert env["EVIDENCE_OPENSEARCH_SERVICE"] == "aoss" and env["EVIDENCE_OPENSEARCH_HYBRID_MODE"] == "client"
    assert env["EVIDENCE_RERANKER"] == "cohere"
    assert env["EVIDENCE_COHERE_API_KEY_SECRET_ARN"].startswith("arn:aws:secretsmanager:")
    retriever = statements(alt_synth, "FunctionsRetrieverRole")
    assert {"aoss:APIAccessAll", "secretsmanager:GetSecretValue"} <= actions(retriever)
    assert "bedrock:Rerank" not in actions(retriever)


# --- api -----------------------------------------------------------------------------------------


def test_api_iam_auth_validation_throttling_access_logs(default_synth: Synth) -> None:
    methods = default_synth.resources("AWS::ApiGateway::Method")
    # ANY /v1/{proxy+}; POST (body schema) and ANY on /v1/indexes/{index}/retrieve
    assert len(methods) == 3
    for method in methods.values():
        assert method["Properties"]["AuthorizationType"] == "AWS_IAM"
        assert "RequestValidatorId" in method["Properties"]
    _, stage = default_synth.one("AWS::ApiGateway::Stage")
    props = stage["Properties"]
    assert props["StageName"] == "live" and props["TracingEnabled"] is True
    assert "DestinationArn" in props["AccessLogSetting"]
    settings = props["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] == 50 and settings["ThrottlingBurstLimit"] == 100
    default_synth.template.has_resource_properties(
        "AWS::ApiGateway::Model",
        {
            "Schema": Match.object_like(
                {
                    "required": ["query"],
                    "properties": Match.object_like({"query": Match.object_like({"maxLength": 4096})}),
                }
            ),
        },
    )
    # API Gateway's own rejections use the product's error envelope.
    responses = default_synth.resources("AWS::ApiGateway::GatewayResponse")
    assert len(responses) == 6
    for response in responses.values():
        assert response["Properties"]["ResponseTemplates"]["application/json"].startswith(
            '{"error": {"code": '
        )
    default_synth.template.resource_count_is("AWS::ApiGateway::UsagePlan", 0)


def test_api_key_mode_has_usage_plan(alt_synth: Synth) -> None:
    for method in alt_synth.resources("AWS::ApiGateway::Method").values():
        assert method["Properties"]["ApiKeyRequired"] is True
        assert method["Properties"]["AuthorizationType"] == "NONE"
    alt_synth.template.has_resource_properties(
        "AWS::ApiGateway::UsagePlan", {"Throttle": {"RateLimit": 50, "BurstLimit": 100}}
    )
    alt_synth.template.resource_count_is("AWS::ApiGateway::ApiKey", 1)


def test_waf_by_flag(default_synth: Synth, alt_synth: Synth) -> None:
    default_synth.template.resource_count_is("AWS::WAFv2::WebACL", 0)
    _, acl = alt_synth.one("AWS::WAFv2::WebACL")
    rules = {r["Name"]: r for r in acl["Properties"]["Rules"]}
    assert rules["RateLimitPerIp"]["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "IP",
        "Limit": 2000,
    }
    # The common rule set would block legitimate uploads (HTML bodies, up to 6 MB): not used.
    assert "AWSManagedRulesCommonRuleSet" not in rules
    _, association = alt_synth.one("AWS::WAFv2::WebACLAssociation")
    assert association["Properties"]["WebACLArn"] == {
        "Fn::GetAtt": [next(iter(alt_synth.resources("AWS::WAFv2::WebACL"))), "Arn"]
    }


# --- batch ---------------------------------------------------------------------------------------


def _definition(s: Synth) -> dict[str, Any]:
    _, machine = s.one("AWS::StepFunctions::StateMachine")
    return dict(json.loads(resolve_join(machine["Properties"]["DefinitionString"])))


def test_state_machine_maps_criteria_with_retry_and_catch(default_synth: Synth) -> None:
    definition = _definition(default_synth)
    criteria = definition["States"]["Criteria"]
    assert criteria["Type"] == "Map" and criteria["MaxConcurrency"] == 10
    assert criteria["ItemsPath"] == "$.criteria"
    inner = criteria["ItemProcessor"]["States"]
    assert criteria["ItemProcessor"]["StartAt"] == "Plan"
    assert [inner["Plan"]["Next"], inner["Retrieve"]["Next"]] == ["Retrieve", "Format"]
    for name in ("Plan", "Retrieve", "Format"):
        task = inner[name]
        assert task["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "CriterionFailed"}
        ]
        assert all(r["BackoffRate"] == 2 for r in task["Retry"])
        assert any("Lambda.TooManyRequestsException" in r["ErrorEquals"] for r in task["Retry"])
        assert task["Parameters"]["task"] == name.lower()
        assert task["Parameters"]["criterion.$"] == "$.criterion"
    assert inner["CriterionFailed"]["Type"] == "Pass" and inner["CriterionFailed"].get("End") is True
    # Only pointers travel: the retrieve step keeps its URI and hit count, never the evidence.
    assert inner["Retrieve"]["ResultSelector"] == {"retrieve_uri.$": "$.retrieve_uri", "hits.$": "$.hits"}
    assert inner["Format"]["Parameters"]["retrieve_uri.$"] == "$.retrieved.retrieve_uri"
    _, machine = default_synth.one("AWS::StepFunctions::StateMachine")
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"
    assert machine["Properties"]["TracingConfiguration"] == {"Enabled": True}


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@pytest.mark.parametrize("which", ["default_synth", "alt_synth"])
def test_every_path_field_holds_a_path_or_an_intrinsic(which: str, request: pytest.FixtureRequest) -> None:
    """`key.$` must hold a JSONPath or an intrinsic function (and `.$.$` is never right)."""
    s: Synth = request.getfixturevalue(which)
    for key, value in _walk(_definition(s)):
        if isinstance(key, str) and key.endswith(".$"):
            assert not key.endswith(".$.$"), key
            assert isinstance(value, str) and value.startswith(("$", "States.")), (key, value)


def test_defaults_fill_profile_and_output_location(default_synth: Synth) -> None:
    states = _definition(default_synth)["States"]
    defaults = states["Defaults"]["Parameters"]["defaults"]
    assert defaults["profile"] == "default"
    assert defaults["principal"] == ""  # no principal: refused by every step once a policy is set
    assert defaults["output_s3_uri.$"] == "States.Format('s3://{}/batches/{}', 'TOKEN', $$.Execution.Name)"
    # Caller's values win: JsonMerge(defaults, input) - the input is the second argument.
    assert states["ApplyDefaults"]["Parameters"]["merged.$"] == "States.JsonMerge($.defaults, $.input, false)"
    assert states["Defaults"]["Parameters"]["input.$"] == "$"


def test_distributed_map_by_flag_writes_results_to_s3(alt_synth: Synth) -> None:
    criteria = _definition(alt_synth)["States"]["Criteria"]
    assert criteria["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert criteria["ResultWriter"]["Resource"].endswith(":states:::s3:putObject")
    assert criteria["ResultWriter"]["Parameters"]["Prefix"] == "batches/map-results"
    assert criteria["MaxConcurrency"] == 10


# --- observability -------------------------------------------------------------------------------


def test_alarms_on_dlq_errors_and_p95_and_a_dashboard(default_synth: Synth) -> None:
    alarms = [a["Properties"] for a in default_synth.resources("AWS::CloudWatch::Alarm").values()]
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for alarm in alarms:
        by_metric.setdefault(alarm["MetricName"], []).append(alarm)
        assert alarm["AlarmActions"], "every alarm notifies the topic"
    dlq = by_metric["ApproximateNumberOfMessagesVisible"][0]
    assert dlq["Dimensions"][0]["Value"]["Fn::GetAtt"][0].startswith("QueuesIndexingDlq")
    assert dlq["Threshold"] == 1
    assert len(by_metric["Errors"]) == 4
    (p95,) = list(by_metric["Duration"])
    assert p95["ExtendedStatistic"] == "p95" and p95["Threshold"] == 2000
    assert any(a.get("ExtendedStatistic") == "p95" for a in by_metric["Latency"])
    default_synth.template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    default_synth.template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


# --- security checks -----------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default_synth", "alt_synth"])
def test_cdk_nag_has_no_unacknowledged_findings(which: str, request: pytest.FixtureRequest) -> None:
    s: Synth = request.getfixturevalue(which)
    findings = [
        f"{v.rule_name} at {r.construct_path}" for v in s.report.violations for r in v.violating_resources
    ]
    assert s.report.success, "\n".join(findings)
    assert findings == []


def test_every_acknowledgement_has_a_reason(default_synth: Synth) -> None:
    from infra.evidence_infra.nag import ACKNOWLEDGED

    assert ACKNOWLEDGED
    for path, finding, reason in ACKNOWLEDGED:
        assert finding.startswith("AwsSolutions-"), finding
        assert len(reason) >= 30, (path, finding, reason)


@pytest.mark.parametrize("which", ["default_synth", "alt_synth"])
def test_cfn_lint_finds_no_errors(which: str, request: pytest.FixtureRequest) -> None:
    from cfnlint.api import ManualArgs, lint

    s: Synth = request.getfixturevalue(which)
    matches = lint(json.dumps(s.json), config=ManualArgs(regions=["us-east-1"]))
    # W3005 (a DependsOn that a GetAtt already implies) is how CDK writes its own L2s: the only allowance.
    found = [
        f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches if m.rule.id != "W3005"
    ]
    assert found == [], "\n".join(found)


def _render(template: Any, state: dict[str, Any], item: Any = None) -> Any:
    """Step Functions' Parameters/ResultSelector rendering for the paths used (`$.a.b`, Map item)."""
    if isinstance(template, dict):
        out: dict[str, Any] = {}
        for key, value in template.items():
            if key.endswith(".$"):
                if value == "$$.Map.Item.Value":
                    out[key[:-2]] = item
                    continue
                assert value.startswith("$."), value
                node: Any = state
                for part in value[2:].split("."):
                    node = node[part]
                out[key[:-2]] = node
            else:
                out[key] = _render(value, state, item)
        return out
    return template


def test_state_machine_payloads_match_the_assess_contract(default_synth: Synth) -> None:
    """The payloads the state machine builds are what evidence.assess's steps (the handlers) accept,
    and what the handlers return is what the next state selects: run the chain on those payloads."""
    from evidence.assess import CriterionResult, CriterionTask, MemoryStore, format_step, retrieve_step
    from evidence.model import Plan, RetrieveResponse, Telemetry

    definition = _definition(default_synth)
    criteria = definition["States"]["Criteria"]
    inner = criteria["ItemProcessor"]["States"]
    batch = {
        "index": "vendor",
        "profile": "vrm",
        "output_s3_uri": "s3://results/batches/run-1",
        "principal": "arn:aws:iam::123456789012:role/vendor-backend",
        "criteria": [{"id": "c/1", "question": "Is data encrypted at rest?"}],
    }
    state = _render(criteria["ItemSelector"], batch, batch["criteria"][0])

    plan_payload = _render(inner["Plan"]["Parameters"], state)
    task = CriterionTask.model_validate(plan_payload)
    assert (task.index, task.profile, task.output_uri) == ("vendor", "vrm", "s3://results/batches/run-1")
    # The batch runs as its caller: every step's payload carries the principal it checks.
    for step in ("Plan", "Retrieve", "Format"):
        assert inner[step]["Parameters"]["principal.$"] == "$.principal"
    assert task.principal == batch["principal"]
    plan = Plan(query=task.criterion.question, normalized_query="data encrypted rest", profile="vrm")
    planner_output = task.model_copy(update={"plan": plan}).model_dump(mode="json")
    state["planned"] = _render(inner["Plan"]["ResultSelector"], planner_output)

    class Service:
        def retrieve(self, index: str, request: Any) -> RetrieveResponse:
            assert request.query == "Is data encrypted at rest?"
            return RetrieveResponse(
                hits=[],
                followups=[],
                evidence_xml="",
                valid_indexes=[],
                plan=plan,
                telemetry=Telemetry(stages=[], path_used="hybrid", total_ms=1.0),
                can_answer=False,
                needs_clarification=False,
                confidence=0.0,
            )

        def format(self, request: Any) -> Any:
            from evidence.model import FormatResponse

            return FormatResponse(evidence_xml="", valid_indexes=[])

    store = MemoryStore()
    retrieved = retrieve_step(Service(), _render(inner["Retrieve"]["Parameters"], state), store)  # type: ignore[arg-type]
    state["retrieved"] = _render(inner["Retrieve"]["ResultSelector"], retrieved.model_dump(mode="json"))
    assert set(state["retrieved"]) == {"retrieve_uri", "hits"}
    result = format_step(Service(), _render(inner["Format"]["Parameters"], state), store)  # type: ignore[arg-type]
    assert isinstance(result, CriterionResult) and result.status == "ok"
    assert result.result_uri == "s3://results/batches/run-1/c%2F1.json"


# --- batch assessments started through the API ---------------------------------------------------


def _arn_text(value: Any) -> str:
    """An ARN the stack builds (Fn::Join of partition, region, account and the name) as text."""
    if isinstance(value, str):
        return value
    sep, parts = value["Fn::Join"]
    names = {"AWS::Partition": "aws", "AWS::Region": "REGION", "AWS::AccountId": "ACCOUNT"}
    return str(sep).join(p if isinstance(p, str) else names[p["Ref"]] for p in parts)


@pytest.mark.parametrize(("which", "name"), [("default_synth", "evidence"), ("alt_synth", "evidencedev")])
def test_retriever_starts_the_batch_as_the_caller(
    which: str, name: str, request: pytest.FixtureRequest
) -> None:
    """The retriever gets the state machine's ARN and may start it and read its executions, nothing
    more; the ARN is built from the machine's fixed name, so the template has no cycle."""
    s: Synth = request.getfixturevalue(which)
    machine_id, machine = s.one("AWS::StepFunctions::StateMachine")
    assert machine["Properties"]["StateMachineName"] == f"{name}-batch"
    machine_arn = f"arn:aws:states:REGION:ACCOUNT:stateMachine:{name}-batch"
    env = _functions(s)["Retriever"]["Environment"]["Variables"]
    assert _arn_text(env["EVIDENCE_BATCH_STATE_MACHINE_ARN"]) == machine_arn
    granted = [
        (stmt["Action"], _arn_text(stmt["Resource"]))
        for stmt in statements(s, "FunctionsRetrieverRole")
        if any(
            a.startswith("states:")
            for a in ([stmt["Action"]] if isinstance(stmt["Action"], str) else stmt["Action"])
        )
    ]
    assert sorted(granted) == [
        ("states:DescribeExecution", f"arn:aws:states:REGION:ACCOUNT:execution:{name}-batch:*"),
        ("states:StartExecution", machine_arn),
    ]
    # No other function may start a batch.
    for role in ("FunctionsIndexerRole", "FunctionsPlannerRole", "FunctionsFormatterRole"):
        assert not any(a.startswith("states:") for a in actions(statements(s, role))), role
    # No reference from the retriever (or its policies) to the state machine resource: no cycle.
    retriever = next(
        v for k, v in s.resources("AWS::Lambda::Function").items() if k.startswith("FunctionsRetriever")
    )
    policies = list(s.resources("AWS::IAM::Policy").values())
    assert machine_id not in json.dumps(retriever) and not any(
        machine_id in json.dumps(p["Properties"]["PolicyDocument"])
        for p in policies
        if "Retriever" in json.dumps(p["Properties"]["Roles"])
    )
    _assert_acyclic(s.json["Resources"])


def _assert_acyclic(resources: dict[str, Any]) -> None:
    """Every Ref / Fn::GetAtt / DependsOn edge between resources: a topological order exists."""

    def refs(node: Any) -> Any:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "Ref" and isinstance(value, str):
                    yield value
                elif key == "Fn::GetAtt":
                    yield value[0] if isinstance(value, list) else str(value).split(".")[0]
                else:
                    yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    edges: dict[str, set[str]] = {}
    for rid, res in resources.items():
        depends = res.get("DependsOn", [])
        deps = set(refs(res.get("Properties", {}))) | set([depends] if isinstance(depends, str) else depends)
        edges[rid] = {d for d in deps if d in resources}
    done: set[str] = set()
    while len(done) < len(edges):
        ready = [r for r, deps in edges.items() if r not in done and deps <= done]
        assert ready, f"dependency cycle among {sorted(set(edges) - done)[:10]}"
        done.update(ready)
