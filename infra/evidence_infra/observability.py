"""Observability: alarms (DLQ depth, function errors, retrieve p95 latency, reranker fallbacks, batch
failures, the OpenSearch domain's health), the alarm topic, a dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from evidence.observability import NAMESPACE, RERANK_FALLBACKS

from .search import Search
from .settings import InfraSettings

FIVE_MINUTES = Duration.minutes(5)
ONE_MINUTE = Duration.minutes(1)
#: Share of retrieves that fell back from the reranker to first-stage order, over 15 minutes.
RERANK_FALLBACK_RATE = 0.05


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
        search: Search | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(
            self, "Alarms", display_name="evidence alarms", master_key=key, enforce_ssl=True
        )
        # CloudWatch publishes to the encrypted topic with the key: it needs the key too, but only on
        # behalf of this account's alarms (no confused deputy from another account).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
        if settings.alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(settings.alarm_email))
        else:
            Annotations.of(self.topic).add_warning_v2(
                "evidence:noAlarmSubscriber",
                "No alarm subscriber: alarms go to an SNS topic nobody reads. Deploy with "
                "-c evidence:alarmEmail=you@example.com (or subscribe to the AlarmTopic output).",
            )
        action = cw_actions.SnsAction(self.topic)
        self.alarms: list[cw.Alarm] = []

        def alarm(
            name: str,
            metric: cw.IMetric,
            threshold: float,
            description: str,
            *,
            periods: int = 1,
            comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        ) -> cw.Alarm:
            created = cw.Alarm(
                self,
                name,
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=comparison,
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
        # The application's own EMF metric (evidence.observability): 0/1 per retrieve, so the average
        # is the fallback rate. A reranker that is down or absent in the region shows here first.
        rerank_fallbacks = cw.Metric(
            namespace=NAMESPACE,
            metric_name=RERANK_FALLBACKS,
            dimensions_map={"service": "evidence-retriever", "function": "retriever"},
            period=FIVE_MINUTES,
            statistic="Average",
        )
        if settings.reranker != "none":
            alarm(
                "RerankFallbacks",
                rerank_fallbacks,
                RERANK_FALLBACK_RATE,
                f"More than {RERANK_FALLBACK_RATE:.0%} of retrieves fell back to first-stage order for 15 "
                "minutes: the reranker fails (model access, region, key, timeouts). See the retriever logs "
                "('retrieval degraded').",
                periods=3,
            )
        alarm(
            "BatchFailures",
            state_machine.metric_failed(period=FIVE_MINUTES, statistic="Sum"),
            1,
            "A batch assessment execution failed as a whole.",
        )

        domain = search.domain if search is not None else None
        if domain is not None:
            self._domain_alarms(alarm, domain, settings)

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

    @staticmethod
    def _domain_alarms(alarm: Any, domain: opensearch.Domain, settings: InfraSettings) -> None:
        """AWS's recommended alarms for an OpenSearch Service domain ("Recommended CloudWatch alarms
        for Amazon OpenSearch Service"), plus the k-NN graph memory the vector leg lives in."""
        below = cw.ComparisonOperator.LESS_THAN_THRESHOLD
        at_most = cw.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD
        alarm(
            "DomainRed",
            domain.metric_cluster_status_red(statistic="Maximum", period=ONE_MINUTE),
            1,
            "Cluster status red: a primary shard is unassigned; searches on it fail.",
        )
        alarm(
            "DomainYellow",
            domain.metric_cluster_status_yellow(statistic="Maximum", period=ONE_MINUTE),
            1,
            "Cluster status yellow for 5 minutes: a replica shard is unassigned.",
            periods=5,
        )
        # FreeStorageSpace is per node, in MiB: alarm at a quarter of one node's volume.
        free_floor_mib = settings.opensearch_volume_gb * 1024 // 4
        alarm(
            "DomainFreeStorage",
            domain.metric_free_storage_space(statistic="Minimum", period=ONE_MINUTE),
            free_floor_mib,
            f"A data node has <= {free_floor_mib} MiB (25%) free storage; writes block at the watermark.",
            comparison=at_most,
        )
        alarm(
            "DomainWritesBlocked",
            domain.metric_cluster_index_writes_blocked(statistic="Maximum", period=FIVE_MINUTES),
            1,
            "The cluster blocks writes (ClusterBlockException): indexing fails.",
        )
        alarm(
            "DomainJvmPressure",
            domain.metric_jvm_memory_pressure(statistic="Maximum", period=ONE_MINUTE),
            95,
            "JVM memory pressure >= 95% for 3 minutes: out-of-memory errors are near; scale up.",
            periods=3,
        )
        alarm(
            "DomainMasterJvmPressure",
            domain.metric_master_jvm_memory_pressure(statistic="Maximum", period=ONE_MINUTE),
            95,
            "Dedicated master JVM memory pressure >= 95% for 3 minutes.",
            periods=3,
        )
        alarm(
            "DomainMasterUnreachable",
            domain.metric("MasterReachableFromNode", statistic="Maximum", period=Duration.days(1)),
            1,
            "The master node was unreachable from a node for a day.",
            comparison=below,
        )
        alarm(
            "DomainKnnGraphMemory",
            domain.metric("KNNGraphMemoryUsagePercentage", statistic="Maximum", period=FIVE_MINUTES),
            80,
            "k-NN graphs use >= 80% of their native memory budget for 15 minutes: vector search will evict "
            "graphs and slow down; scale memory.",
            periods=3,
        )
        alarm(
            "DomainKnnCircuitBreaker",
            domain.metric("KNNCircuitBreakerTriggered", statistic="Maximum", period=ONE_MINUTE),
            1,
            "The k-NN circuit breaker tripped: vector indexing is refused until graph memory drops.",
        )
        alarm(
            "DomainSnapshotFailure",
            domain.metric_automated_snapshot_failure(statistic="Maximum", period=ONE_MINUTE),
            1,
            "An automated snapshot failed (often a red cluster).",
        )
        alarm(
            "DomainKmsKeyInaccessible",
            domain.metric_kms_key_inaccessible(statistic="Maximum", period=ONE_MINUTE),
            1,
            "The domain cannot use its KMS key: the data is unreadable until access is restored.",
        )
