"""API: API Gateway REST in front of the retriever (every route under /v1), IAM auth or API keys."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as waf
from constructs import Construct

from evidence.names import MAX_QUERY_CHARS

from .settings import ApiAuth, InfraSettings

STAGE = "live"
#: Lambda refuses an invoke payload over 6,291,456 bytes, and the proxy event wraps the body in a few
#: kB of headers and context, so API Gateway turns a 6-10 MB body into a 5xx before our own 413.
#: The web ACL refuses such bodies by Content-Length first, with the product's 413 envelope.
MAX_BODY_BYTES = 6_000_000
#: Content-Length values >= MAX_BODY_BYTES (WAF compares header text, not numbers).
CONTENT_LENGTH_TOO_LARGE = r"^0*([1-9][0-9]{7,}|[6-9][0-9]{6})$"
TOO_LARGE_BODY = (
    '{"error": {"code": "payload_too_large", "message": "request bodies are limited to '
    f'{MAX_BODY_BYTES} bytes"' + "}}"
)

#: API Gateway's own rejections in the product's error envelope (docs/contracts.md#errors). messageString is
#: already a quoted JSON string, so it is inserted bare.
GATEWAY_ERRORS: dict[apigw.ResponseType, tuple[str | None, str]] = {
    apigw.ResponseType.BAD_REQUEST_BODY: ("400", "validation_error"),
    apigw.ResponseType.BAD_REQUEST_PARAMETERS: ("400", "validation_error"),
    apigw.ResponseType.REQUEST_TOO_LARGE: ("413", "too_large"),
    apigw.ResponseType.THROTTLED: ("429", "throttled"),
    apigw.ResponseType.DEFAULT_4_XX: (None, "request_rejected"),
    apigw.ResponseType.DEFAULT_5_XX: (None, "gateway_error"),
}


class Api(Construct):
    def __init__(
        self, scope: Construct, id: str, *, settings: InfraSettings, handler: lambda_.IFunction
    ) -> None:
        super().__init__(scope, id)
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.DESTROY,
        )
        use_keys = settings.api_auth is ApiAuth.API_KEY
        method_options = apigw.MethodOptions(
            authorization_type=apigw.AuthorizationType.NONE if use_keys else apigw.AuthorizationType.IAM,
            api_key_required=use_keys,
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name="evidence",
            description="evidence retrieval API",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                metrics_enabled=True,
                tracing_enabled=True,
                throttling_rate_limit=settings.api_rate_limit,
                throttling_burst_limit=settings.api_burst_limit,
            ),
            default_method_options=method_options,
        )
        for response_type, (status, code) in GATEWAY_ERRORS.items():
            self.rest_api.add_gateway_response(
                f"Envelope{response_type.response_type}",
                type=response_type,
                status_code=status,
                templates={
                    "application/json": (
                        f'{{"error": {{"code": "{code}", "message": $context.error.messageString}}}}'
                    )
                },
            )
        integration = apigw.LambdaIntegration(handler, proxy=True)
        validate_params = apigw.RequestValidator(
            self,
            "ParamsValidator",
            rest_api=self.rest_api,
            validate_request_parameters=True,
            validate_request_body=False,
        )
        validate_body = apigw.RequestValidator(
            self,
            "BodyValidator",
            rest_api=self.rest_api,
            validate_request_parameters=True,
            validate_request_body=True,
        )
        v1 = self.rest_api.root.add_resource("v1")
        proxy = v1.add_resource("{proxy+}")
        proxy.add_method(
            "ANY",
            integration,
            request_validator=validate_params,
            request_parameters={"method.request.path.proxy": True},
        )
        # The hot route gets a body schema: a missing or oversized query is refused before Lambda runs.
        retrieve_model = self.rest_api.add_model(
            "RetrieveRequest",
            content_type="application/json",
            model_name="RetrieveRequest",
            schema=apigw.JsonSchema(
                schema=apigw.JsonSchemaVersion.DRAFT4,
                type=apigw.JsonSchemaType.OBJECT,
                required=["query"],
                properties={
                    "query": apigw.JsonSchema(
                        type=apigw.JsonSchemaType.STRING, min_length=1, max_length=MAX_QUERY_CHARS
                    ),
                    "profile": apigw.JsonSchema(type=apigw.JsonSchemaType.STRING),
                    "explain": apigw.JsonSchema(type=apigw.JsonSchemaType.BOOLEAN),
                },
            ),
        )
        retrieve = v1.add_resource("indexes").add_resource("{index}").add_resource("retrieve")
        retrieve.add_method(
            "POST",
            integration,
            request_validator=validate_body,
            request_models={"application/json": retrieve_model},
            request_parameters={"method.request.path.index": True},
        )
        # Other verbs on this path still reach the handler (its 404/405 envelope), as under the proxy.
        retrieve.add_method(
            "ANY",
            integration,
            request_validator=validate_params,
            request_parameters={"method.request.path.index": True},
        )
        self.api_key: apigw.IApiKey | None = None
        if use_keys:
            plan = self.rest_api.add_usage_plan(
                "UsagePlan",
                name="evidence",
                throttle=apigw.ThrottleSettings(
                    rate_limit=settings.api_rate_limit, burst_limit=settings.api_burst_limit
                ),
            )
            plan.add_api_stage(stage=self.rest_api.deployment_stage)
            self.api_key = self.rest_api.add_api_key("ApiKey", api_key_name="evidence-default")
            plan.add_api_key(self.api_key)
        if settings.waf:
            self._web_acl(settings.waf_rate_limit)

    def _web_acl(self, rate_limit: int) -> None:
        """Rate limiting per IP and AWS's managed lists of bad inputs and bad IPs. Not the common rule
        set: its body-size and XSS rules would block legitimate document uploads (HTML, up to 6 MB)."""

        def visibility(name: str) -> waf.CfnWebACL.VisibilityConfigProperty:
            return waf.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
            )

        def managed(name: str, priority: int) -> waf.CfnWebACL.RuleProperty:
            return waf.CfnWebACL.RuleProperty(
                name=name,
                priority=priority,
                statement=waf.CfnWebACL.StatementProperty(
                    managed_rule_group_statement=waf.CfnWebACL.ManagedRuleGroupStatementProperty(
                        vendor_name="AWS", name=name
                    )
                ),
                override_action=waf.CfnWebACL.OverrideActionProperty(none={}),
                visibility_config=visibility(f"evidence-{name}"),
            )

        too_large = waf.CfnRegexPatternSet(
            self,
            "ContentLengthTooLarge",
            scope="REGIONAL",
            regular_expression_list=[CONTENT_LENGTH_TOO_LARGE],
            description=f"Content-Length of {MAX_BODY_BYTES} bytes or more",
        )
        acl = waf.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=waf.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=visibility("evidence-api"),
            custom_response_bodies={
                "too_large": waf.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON", content=TOO_LARGE_BODY
                )
            },
            rules=[
                waf.CfnWebACL.RuleProperty(
                    name="BodyTooLarge",
                    priority=10,
                    statement=waf.CfnWebACL.StatementProperty(
                        regex_pattern_set_reference_statement=waf.CfnWebACL.RegexPatternSetReferenceStatementProperty(
                            arn=too_large.attr_arn,
                            field_to_match=waf.CfnWebACL.FieldToMatchProperty(
                                single_header={"Name": "content-length"}
                            ),
                            text_transformations=[
                                waf.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
                            ],
                        )
                    ),
                    action=waf.CfnWebACL.RuleActionProperty(
                        block=waf.CfnWebACL.BlockActionProperty(
                            custom_response=waf.CfnWebACL.CustomResponseProperty(
                                response_code=413, custom_response_body_key="too_large"
                            )
                        )
                    ),
                    visibility_config=visibility("evidence-body-too-large"),
                ),
                waf.CfnWebACL.RuleProperty(
                    name="RateLimitPerIp",
                    priority=0,
                    statement=waf.CfnWebACL.StatementProperty(
                        rate_based_statement=waf.CfnWebACL.RateBasedStatementProperty(
                            aggregate_key_type="IP", limit=rate_limit
                        )
                    ),
                    action=waf.CfnWebACL.RuleActionProperty(block={}),
                    visibility_config=visibility("evidence-rate-limit"),
                ),
                managed("AWSManagedRulesKnownBadInputsRuleSet", 1),
                managed("AWSManagedRulesAmazonIpReputationList", 2),
            ],
        )
        waf.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            resource_arn=self.rest_api.deployment_stage.stage_arn,
            web_acl_arn=acl.attr_arn,
        )
