"""cdk-nag (v3) acknowledgements for the AwsSolutions pack: each names the finding and why it stands.

v3 acknowledges one finding at a time (`Rule[Finding]`), so resource-specific findings are built
from the logical ids of the resources they name. `ACKNOWLEDGED` collects every (path, id, reason)
for the docs and the tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct

from .settings import ApiAuth

if TYPE_CHECKING:
    from .stack import EvidenceStack

ACKNOWLEDGED: list[tuple[str, str, str]] = []

LAMBDA_RUNTIME = (
    "python3.12 on purpose: Amazon Linux 2023 (glibc 2.34) loads the locked onnxruntime/numpy wheels, "
    "and this "
    "machine can import-test the bundle with a local 3.12; bump with -c evidence:lambdaPython=3.13."
)
XRAY = (
    "X-Ray tracing (Tracing.ACTIVE) adds xray:PutTraceSegments/PutTelemetryRecords, which take no resource."
)
VPC_ENI = "Lambda in a VPC needs ec2:*NetworkInterface* actions, which IAM cannot scope to a resource."
OBJECTS = "Object-level access to this one bucket: object keys are not known in advance."
DOMAIN_PATHS = (
    "HTTP access to this one domain's paths (indexes are created at run time); FGAC narrows it further."
)
LAMBDA_VERSIONS = "Step Functions invokes these three functions; ':*' covers their versions and aliases only."


def _logical(construct: IConstruct) -> str:
    child = construct.node.default_child if not isinstance(construct, CfnResource) else construct
    assert isinstance(child, CfnResource)
    return str(Stack.of(construct).resolve(Stack.of(construct).get_logical_id(child)))


def ack(construct: IConstruct, finding: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=finding, reason=reason))
    ACKNOWLEDGED.append((construct.node.path, finding, reason))


def suppress(s: EvidenceStack) -> None:
    """Acknowledge the findings that stand, with reasons."""
    _functions(s)
    _state_machine(s)
    _search_domain(s)
    _api(s)
    _cdk_singletons(s)


def _functions(s: EvidenceStack) -> None:
    """The functions' runtimes and their roles' wildcards (X-Ray, VPC ENIs, the domain's paths)."""
    fns = s.functions
    search = s.search
    results_objects = f"Resource::<{_logical(s.storage.results)}.Arn>/*"
    documents_objects = f"Resource::<{_logical(s.storage.documents)}.Arn>/*"

    for name, fn in [*fns.functions.items(), ("search_setup", None)]:
        role = fns.roles[name] if fn is not None else search.setup_role
        target = fn if fn is not None else search.node.find_child("SetupFunction")
        ack(target, "AwsSolutions-L1", LAMBDA_RUNTIME)
        needs_star = fn is not None or search.domain is not None
        if needs_star:
            reasons = [XRAY] if fn is not None else []
            if (name in {"indexer", "retriever"} or fn is None) and search.vpc is not None:
                reasons.append(VPC_ENI)
            if name == "retriever" and s.settings.reranker == "bedrock":
                reasons.append(
                    "bedrock:Rerank authorizes on no resource type; InvokeModel is scoped to the model."
                )
            if reasons:
                ack(role, "AwsSolutions-IAM5[Resource::*]", " ".join(reasons))
        if search.domain is not None and (name in {"indexer", "retriever"} or fn is None):
            ack(role, f"AwsSolutions-IAM5[Resource::<{_logical(search.domain)}.Arn>/*]", DOMAIN_PATHS)
    ack(fns.roles["indexer"], f"AwsSolutions-IAM5[{documents_objects}]", OBJECTS)
    ack(fns.roles["retriever"], f"AwsSolutions-IAM5[{results_objects}]", OBJECTS)
    ack(fns.roles["formatter"], f"AwsSolutions-IAM5[{results_objects}]", OBJECTS)
    ack(
        fns.roles["retriever"],
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
        f"execution:{s.batch_name}:*]",
        "DescribeExecution on the batch state machine's own executions, named by the API at run time.",
    )


def _state_machine(s: EvidenceStack) -> None:
    """The batch state machine: function versions, the Distributed Map's own policies, logging."""
    fns = s.functions
    machine = s.batch.state_machine
    for name in ("planner", "retriever", "formatter"):
        ack(machine, f"AwsSolutions-IAM5[Resource::<{_logical(fns.functions[name])}.Arn>:*]", LAMBDA_VERSIONS)
    if s.settings.distributed_map:
        bucket = _logical(s.storage.results)
        ack(
            machine,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::<{bucket}>/*]",
            "CDK's ResultWriter policy for the Distributed Map: objects of the results bucket only.",
        )
        sm = _logical(machine)
        execution = (
            f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:"
            f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{sm}"}}]}}]}}'
        )
        for suffix in (":*", "/*:*"):
            ack(
                machine,
                f"AwsSolutions-IAM5[Resource::{execution}{suffix}]",
                "CDK's Distributed Map policy: this state machine's own child executions, named at run time.",
            )
    ack(
        machine,
        "AwsSolutions-IAM5[Resource::*]",
        "Step Functions logging to CloudWatch Logs (logs:*Delivery*, DescribeResourcePolicies) and X-Ray "
        "take no resource.",
    )


def _search_domain(s: EvidenceStack) -> None:
    search = s.search
    if search.domain is not None:
        ack(
            search.domain,
            "AwsSolutions-OS3",
            "VPC-only domain: reachable only from the evidence Lambdas' security group, "
            "so an IP allowlist adds "
            "nothing; every request is SigV4-signed and checked by IAM and fine-grained access control.",
        )
        ack(
            search.domain,
            "AwsSolutions-OS5",
            "No anonymous access: VPC-only, fine-grained access control with an IAM master user, "
            "no open resource "
            "policy; callers are the functions' IAM roles (identity policies) mapped by the setup resource.",
        )


def _api(s: EvidenceStack) -> None:
    api = s.api.rest_api
    if not s.settings.waf:
        ack(
            api,
            "AwsSolutions-APIG3",
            "No WAF by default: every method needs SigV4 (or an API key with a usage plan) and the stage "
            "throttles; -c evidence:waf=true attaches a web ACL (rate limit, AWS bad-input and IP lists).",
        )
    ack(
        api,
        "AwsSolutions-COG4",
        "Callers are backend services authenticated by IAM (SigV4) or API keys, not Cognito users.",
    )
    ack(
        api,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AmazonAPIGatewayPushToCloudWatchLogs]",
        "The account-level API Gateway logging role; AWS's managed policy is the documented one.",
    )
    if s.settings.api_auth is ApiAuth.API_KEY:
        ack(
            api,
            "AwsSolutions-APIG4",
            "apikey mode (-c evidence:apiAuth=apikey): methods require an API key and a usage plan "
            "instead of IAM.",
        )


def _cdk_singletons(s: EvidenceStack) -> None:
    """CDK's own singleton handlers (S3 notifications; the domain's log-group resource policy)."""
    search = s.search
    for child in s.node.children:
        cid = child.node.id
        if cid.startswith(("BucketNotificationsHandler", "AWS679f53fac002430cb0da5b7982bd2287")):
            ack(
                child,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                "CDK-managed singleton handler (S3 notifications / domain log policy): its role is CDK's.",
            )
            if cid.startswith("BucketNotificationsHandler"):
                ack(
                    child,
                    "AwsSolutions-IAM5[Resource::*]",
                    "CDK's notifications handler calls s3:PutBucketNotification, scoped by CDK to '*'.",
                )
            else:
                ack(child, "AwsSolutions-L1", "CDK-managed AwsCustomResource runtime, chosen by CDK.")
    if search.domain is not None:
        for child in search.domain.node.children:
            if child.node.id.startswith("ESLogGroupPolicy"):
                ack(
                    child,
                    "AwsSolutions-IAM5[Resource::*]",
                    "CDK's call to logs:PutResourcePolicy for the domain's log groups takes no resource.",
                )
