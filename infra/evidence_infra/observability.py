"""Observability: alarms (DLQ depth, function errors, retrieve p95 latency, batch failures), a dashboard."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from .settings import InfraSettings

FIVE_MINUTES = Duration.minutes(5)


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: InfraSettings,
        key: kms.IKey,
        functions: dict[str, lambda_.Function],
        queue: sqs.IQueue,
        dead_letter: sqs.IQueue,
        api: apigw.RestApi,
        state_machine: sfn.IStateMachine,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(
            self, "Alarms", display_name="evidence alarms", master_key=key, enforce_ssl=True
        )
        # CloudWatch publishes to the encrypted topic with the key: it needs the key too.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
        if settings.alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(settings.alarm_email))
        action = cw_actions.SnsAction(self.topic)
        self.alarms: list[cw.Alarm] = []

        def alarm(
            name: str, metric: cw.IMetric, threshold: float, description: str, periods: int = 1
        ) -> cw.Alarm:
            created = cw.Alarm(
                self,
                name,
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
            created.add_alarm_action(action)
            self.alarms.append(created)
            return created

        alarm(
            "DlqDepth",
            dead_letter.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            1,
            "Indexing messages failed every retry and sit in the DLQ: inspect, fix, redrive.",
        )
        alarm(
            "IndexingBacklog",
            queue.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES, statistic="Maximum"),
            900,
            "Uploads wait more than 15 minutes to be indexed.",
            periods=2,
        )
        for name, fn in functions.items():
            alarm(
                f"{name.title()}Errors",
                fn.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"The {name} function raised errors.",
            )
        retriever = functions["retriever"]
        p95 = retriever.metric_duration(period=FIVE_MINUTES, statistic="p95")
        alarm(
            "RetrieveLatencyP95",
            p95,
            settings.retrieve_p95_ms,
            f"Retriever p95 duration >= {settings.retrieve_p95_ms} ms for 15 minutes.",
            periods=3,
        )
        api_p95 = api.metric_latency(period=FIVE_MINUTES, statistic="p95")
        alarm(
            "ApiLatencyP95",
            api_p95,
            settings.retrieve_p95_ms + 500,
            "API Gateway p95 latency is high for 15 minutes.",
            periods=3,
        )
        alarm(
            "Api5xx",
            api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            5,
            "The API answered 5xx (never expected for bad input).",
        )
        alarm(
            "BatchFailures",
            state_machine.metric_failed(period=FIVE_MINUTES, statistic="Sum"),
            1,
            "A batch assessment execution failed as a whole.",
        )

        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=None)
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Retrieve latency (ms)",
                width=12,
                left=[
                    retriever.metric_duration(period=Duration.minutes(1), statistic=s)
                    for s in ("p50", "p95", "p99")
                ],
            ),
            cw.GraphWidget(
                title="API requests and errors",
                width=12,
                left=[api.metric_count(period=Duration.minutes(1), statistic="Sum")],
                right=[
                    api.metric_client_error(period=Duration.minutes(1), statistic="Sum"),
                    api.metric_server_error(period=Duration.minutes(1), statistic="Sum"),
                ],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Invocations",
                width=12,
                left=[
                    fn.metric_invocations(period=Duration.minutes(1), statistic="Sum", label=name)
                    for name, fn in functions.items()
                ],
            ),
            cw.GraphWidget(
                title="Errors and throttles",
                width=12,
                left=[
                    fn.metric_errors(period=Duration.minutes(1), statistic="Sum", label=f"{name} errors")
                    for name, fn in functions.items()
                ],
                right=[
                    fn.metric_throttles(
                        period=Duration.minutes(1), statistic="Sum", label=f"{name} throttles"
                    )
                    for name, fn in functions.items()
                ],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Indexing queue",
                width=12,
                left=[
                    queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(1)),
                    dead_letter.metric_approximate_number_of_messages_visible(
                        period=Duration.minutes(1), label="DLQ"
                    ),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=Duration.minutes(1))],
            ),
            cw.GraphWidget(
                title="Batch assessments",
                width=12,
                left=[
                    state_machine.metric_started(period=FIVE_MINUTES),
                    state_machine.metric_succeeded(period=FIVE_MINUTES),
                    state_machine.metric_failed(period=FIVE_MINUTES),
                ],
            ),
        )
        dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24))
