"""Batch: the Step Functions state machine for batch assessments (docs/contracts.md#events).

Input `{index, profile?, criteria: [{id, question}], output_s3_uri?, principal?}`; the API's
`POST /v1/indexes/{index}/assessments` starts it as the caller (evidence/assess/launch.py). Per criterion:
plan -> retrieve -> format, each a direct Lambda invoke. The retrieve and format tasks write their
results under `output_s3_uri` (default `s3://<results bucket>/batches/<execution name>`) and
return pointers, so the state stays far below Step Functions' 256 KB payload limit. A Catch per
criterion turns any failure into a `{"status": "failed"}` item: one bad criterion never fails the batch.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from evidence.access import AccessDeniedError
from evidence.errors import (
    BadRequestError,
    EmbedderMismatchError,
    IndexNotFoundError,
    NotFoundError,
    RequestValidationError,
)

from .settings import InfraSettings

#: Transient failures worth a retry with backoff; a deterministic error (bad input) stops after two.
THROTTLES = [
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "States.Timeout",
]


#: The caller's errors: a batch step fails under its error's code (evidence.api.tasks.batch_step),
#: and these fail the same way again, so they go straight to the Catch (executed locally, a
#: refused batch otherwise took three invocations per criterion and step).
CALLERS_ERRORS = [
    e.code
    for e in (
        AccessDeniedError,
        RequestValidationError,
        BadRequestError,
        IndexNotFoundError,
        NotFoundError,
        EmbedderMismatchError,
    )
]

MAP_RESULTS_PREFIX = "batches/map-results"


class Batch(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: InfraSettings,
        state_machine_name: str,
        results: s3.IBucket,
        planner: lambda_.IFunction,
        retriever: lambda_.IFunction,
        formatter: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, id)
        defaults = sfn.Pass(
            self,
            "Defaults",
            state_name="Defaults",
            parameters={
                "defaults": {
                    "profile": "default",
                    # Whom the batch runs as (evidence/access.py); every step checks it.
                    "principal": "",
                    "output_s3_uri": sfn.JsonPath.format(
                        "s3://{}/batches/{}", results.bucket_name, sfn.JsonPath.string_at("$$.Execution.Name")
                    ),
                },
                "input.$": "$",
            },
        )
        apply_defaults = sfn.Pass(
            self,
            "ApplyDefaults",
            state_name="ApplyDefaults",
            parameters={"merged.$": "States.JsonMerge($.defaults, $.input, false)"},
            output_path="$.merged",
        )

        def invoke(
            name: str,
            fn: lambda_.IFunction,
            payload: dict[str, object],
            *,
            selector: dict[str, str] | None,
            result_path: str,
        ) -> tasks.LambdaInvoke:
            task = tasks.LambdaInvoke(
                self,
                name,
                state_name=name,
                lambda_function=fn,
                payload=sfn.TaskInput.from_object(payload),
                payload_response_only=True,
                result_selector=selector,
                result_path=result_path,
                retry_on_service_exceptions=False,
                task_timeout=sfn.Timeout.duration(Duration.minutes(5)),
            )
            task.add_retry(errors=CALLERS_ERRORS, max_attempts=0, backoff_rate=2.0)
            task.add_retry(
                errors=THROTTLES,
                interval=Duration.seconds(2),
                max_attempts=6,
                backoff_rate=2.0,
                max_delay=Duration.seconds(60),
                jitter_strategy=sfn.JitterType.FULL,
            )
            task.add_retry(
                errors=["States.TaskFailed"],
                interval=Duration.seconds(2),
                max_attempts=2,
                backoff_rate=2.0,
                jitter_strategy=sfn.JitterType.FULL,
            )
            task.add_catch(failed, errors=["States.ALL"], result_path="$.error")
            return task

        # evidence.assess.CriterionTask: what one iteration carries between states (pointers only).
        task_fields = {
            "index.$": "$.index",
            "profile.$": "$.profile",
            "criterion.$": "$.criterion",
            "output_uri.$": "$.output_uri",
            "principal.$": "$.principal",
        }
        failed = sfn.Pass(
            self,
            "CriterionFailed",
            state_name="CriterionFailed",
            # The error name only (evidence.assess.CriterionResult): a Cause can hold a 32 KB stack
            # trace, and hundreds of them would break the 256 KB state limit. Logs keep the cause.
            parameters={
                "id.$": "$.criterion.id",
                "status": "failed",
                "error": {"code.$": "$.error.Error", "message": "see the execution history"},
            },
        )
        plan = invoke(
            "Plan",
            planner,
            {"task": "plan", **task_fields},
            selector={"plan.$": "$.plan"},
            result_path="$.planned",
        )
        retrieve = invoke(
            "Retrieve",
            retriever,
            {"task": "retrieve", **task_fields, "plan.$": "$.planned.plan"},
            selector={"retrieve_uri.$": "$.retrieve_uri", "hits.$": "$.hits"},
            result_path="$.retrieved",
        )
        # The formatter's answer ({id, status, result_uri, hits}) is the iteration's output.
        format_ = invoke(
            "Format",
            formatter,
            {
                "task": "format",
                **task_fields,
                "plan.$": "$.planned.plan",
                "retrieve_uri.$": "$.retrieved.retrieve_uri",
                "hits.$": "$.retrieved.hits",
            },
            selector=None,
            result_path="$",
        )
        per_criterion = plan.next(retrieve).next(format_)

        item_selector = {
            "index.$": "$.index",
            "profile.$": "$.profile",
            "output_uri.$": "$.output_s3_uri",
            "principal.$": "$.principal",
            "criterion.$": "$$.Map.Item.Value",
        }
        criteria: sfn.Map | sfn.DistributedMap
        if settings.distributed_map:
            # Thousands of criteria: child executions, results written to S3 by Step Functions itself.
            criteria = sfn.DistributedMap(
                self,
                "Criteria",
                state_name="Criteria",
                items_path="$.criteria",
                item_selector=item_selector,
                max_concurrency=settings.map_concurrency,
                result_path="$.results",
                map_execution_type=sfn.StateMachineType.STANDARD,
                result_writer_v2=sfn.ResultWriterV2(bucket=results, prefix=MAP_RESULTS_PREFIX),
            )
        else:
            criteria = sfn.Map(
                self,
                "Criteria",
                state_name="Criteria",
                items_path="$.criteria",
                item_selector=item_selector,
                max_concurrency=settings.map_concurrency,
                result_path="$.results",
            )
        criteria.item_processor(per_criterion)
        summary = sfn.Pass(
            self,
            "Summary",
            state_name="Summary",
            parameters={
                "batch_id.$": "$$.Execution.Name",
                "index.$": "$.index",
                "profile.$": "$.profile",
                "output_uri.$": "$.output_s3_uri",
                "results.$": "$.results",
            },
        )
        log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.DESTROY
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            # A fixed name: the retriever (which this machine invokes) starts it by an ARN built from
            # the name, since a reference to this resource's ARN would be a dependency cycle.
            state_machine_name=state_machine_name,
            definition_body=sfn.DefinitionBody.from_chainable(
                defaults.next(apply_defaults).next(criteria).next(summary)
            ),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=Duration.hours(12),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
            comment="evidence batch assessment: plan -> retrieve -> format per criterion",
        )
        if settings.distributed_map and results.encryption_key is not None:
            # CDK's ResultWriter policy covers S3 but not the bucket's KMS key.
            self.state_machine.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=[results.encryption_key.key_arn],
                )
            )
