"""Functions: the shared layer and the four Lambdas, each with its own least-privilege role."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from evidence.config import Settings
from evidence.observability import NAMESPACE as METRICS_NAMESPACE

from .assets import Assets
from .search import Search, add_vpc_access
from .settings import InfraSettings

RUNTIMES = {"3.12": lambda_.Runtime.PYTHON_3_12, "3.13": lambda_.Runtime.PYTHON_3_13}

#: The Bedrock models the functions call: the service's own defaults, so a grant cannot name
#: another model than the code invokes.
RERANK_MODEL = str(Settings.model_fields["bedrock_rerank_model"].default)
PLANNER_MODEL = str(Settings.model_fields["bedrock_planner_model"].default)


@dataclass(frozen=True)
class Spec:
    memory_mb: int
    timeout: Duration
    in_vpc: bool  # talks to the OpenSearch domain


class Functions(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: InfraSettings,
        assets: Assets,
        key: kms.IKey,
        search: Search,
        documents: s3.IBucket,
        results: s3.IBucket,
        queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, id)
        self.settings = settings
        self.runtime = RUNTIMES[settings.lambda_python]
        region = Stack.of(self).region
        self.layer = lambda_.LayerVersion(
            self,
            "SharedLayer",
            code=assets.layer,
            compatible_runtimes=[self.runtime],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="evidence package + runtime dependencies (infra/bundle.py)",
            # Each code change publishes a new ~220 MB version; only the current one is kept.
            removal_policy=RemovalPolicy.DESTROY,
        )
        common_env = {
            "EVIDENCE_BACKEND": "opensearch",
            "EVIDENCE_OPENSEARCH_ENDPOINT": search.endpoint,
            "EVIDENCE_OPENSEARCH_SERVICE": search.service,
            "EVIDENCE_OPENSEARCH_HYBRID_MODE": search.hybrid_mode,
            "EVIDENCE_AWS_REGION": region,
            "EVIDENCE_RERANKER": settings.reranker,
            "EVIDENCE_PLANNER": settings.planner,
            "EVIDENCE_DEFAULT_INDEX": settings.default_index,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "LOG_LEVEL": "INFO",
        }
        if settings.access_policy:
            # Every function checks it: the API per request, the indexer per key, each batch step.
            common_env["EVIDENCE_ACCESS_POLICY"] = settings.access_policy
        specs = {
            "indexer": Spec(3008, Duration.seconds(settings.indexer_timeout_s), True),
            "retriever": Spec(2048, Duration.seconds(29), True),  # API Gateway's integration limit
            "planner": Spec(512, Duration.seconds(30), False),
            "formatter": Spec(512, Duration.seconds(30), False),
        }
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        for name, spec in specs.items():
            role = iam.Role(
                self,
                f"{name.title()}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"evidence {name} function",
            )
            log_group = logs.LogGroup(
                self,
                f"{name.title()}Logs",
                retention=logs.RetentionDays.ONE_MONTH,
                removal_policy=RemovalPolicy.DESTROY,
            )
            log_group.grant_write(role)
            env = {**common_env, "POWERTOOLS_SERVICE_NAME": f"evidence-{name}"}
            if name == "indexer":
                # What one invocation can embed before its timeout (settings.indexer_document_limit).
                env["EVIDENCE_MAX_DOCUMENT_BYTES"] = str(settings.indexer_max_document_bytes)
            vpc, security_groups, subnets = search.placement(in_vpc=spec.in_vpc)
            if vpc is not None:
                add_vpc_access(role)
            fn = lambda_.Function(
                self,
                name.title(),
                runtime=self.runtime,
                architecture=lambda_.Architecture.X86_64,
                code=assets.functions[name],
                handler="handler.handler",
                layers=[self.layer],
                role=role,
                log_group=log_group,
                memory_size=spec.memory_mb,
                timeout=spec.timeout,
                environment=env,
                tracing=lambda_.Tracing.ACTIVE,
                # Opt-in: a reservation fails in accounts whose concurrency quota is 10 (new accounts);
                # the event source's MaximumConcurrency already caps the indexer.
                reserved_concurrent_executions=(
                    settings.indexer_reserved_concurrency or None if name == "indexer" else None
                ),
                description=f"evidence {name}",
                vpc=vpc,
                security_groups=security_groups,
                vpc_subnets=subnets,
            )
            self.functions[name] = fn
            self.roles[name] = role

        # indexer: the queue of S3 notifications; reads the uploaded objects; writes the index.
        self.indexer.add_event_source(
            sources.SqsEventSource(
                queue,
                # One document per invocation by default: a document that outruns the timeout fails
                # alone (a timed-out batch has no partial response: every message would come back).
                batch_size=settings.indexer_batch_size,
                max_batching_window=Duration.seconds(5) if settings.indexer_batch_size > 1 else None,
                report_batch_item_failures=True,
                max_concurrency=settings.indexer_max_concurrency,
            )
        )
        self.roles["indexer"].add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging"],
                resources=[documents.arn_for_objects("*")],
            )
        )
        # Without s3:ListBucket, S3 answers 403 (not 404) for a key that no longer exists, and the
        # indexer cannot tell a stale notification from a permission problem: it would retry the
        # message into the DLQ. Bucket-level action; no prefix condition (GetObject carries none).
        self.roles["indexer"].add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[documents.bucket_arn])
        )
        key.grant_decrypt(self.roles["indexer"])
        search.grant(self.roles["indexer"], write=True)

        # retriever: the HTTP API (its document routes write) and the batch "retrieve" task.
        search.grant(self.roles["retriever"], write=True)
        self._grant_results(self.roles["retriever"], results, key, read=False)
        if settings.reranker == "bedrock":
            self.roles["retriever"].add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["bedrock:InvokeModel"],
                    resources=[
                        f"arn:{Stack.of(self).partition}:bedrock:{region}::foundation-model/{RERANK_MODEL}"
                    ],
                )
            )
            # bedrock-agent-runtime:Rerank authorizes on no resource type: "*" is the only form.
            self.roles["retriever"].add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["bedrock:Rerank"],
                    resources=["*"],
                )
            )
        if settings.reranker == "cohere" and settings.cohere_secret_arn:
            self.retriever.add_environment("EVIDENCE_COHERE_API_KEY_SECRET_ARN", settings.cohere_secret_arn)
            self.roles["retriever"].add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[settings.cohere_secret_arn],
                )
            )

        # planner: Bedrock Converse (bedrock:InvokeModel) on one model.
        if settings.planner == "bedrock":
            self.roles["planner"].add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["bedrock:InvokeModel"],
                    resources=[
                        f"arn:{Stack.of(self).partition}:bedrock:{region}::foundation-model/{PLANNER_MODEL}"
                    ],
                )
            )

        # formatter: reads the retrieve result, writes the criterion's evidence.
        self._grant_results(self.roles["formatter"], results, key, read=True)

    def allow_batch_start(self, state_machine_arn: str, executions_arn: str) -> None:
        """The retriever starts batch assessments as the API caller and reads their status back
        (evidence/assess/stepfunctions.py): StartExecution on the machine, DescribeExecution on its runs."""
        self.retriever.add_environment("EVIDENCE_BATCH_STATE_MACHINE_ARN", state_machine_arn)
        self.roles["retriever"].add_to_principal_policy(
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[state_machine_arn])
        )
        self.roles["retriever"].add_to_principal_policy(
            iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions_arn])
        )

    @staticmethod
    def _grant_results(role: iam.IRole, results: s3.IBucket, key: kms.IKey, *, read: bool) -> None:
        actions = ["s3:PutObject"] + (["s3:GetObject"] if read else [])
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=actions, resources=[results.arn_for_objects("*")])
        )
        # SSE-KMS: a put needs a data key, a get needs decrypt. Named actions, not grant_*'s wildcards.
        key_actions = ["kms:GenerateDataKey"] + (["kms:Decrypt"] if read else [])
        role.add_to_principal_policy(iam.PolicyStatement(actions=key_actions, resources=[key.key_arn]))

    @property
    def indexer(self) -> lambda_.Function:
        return self.functions["indexer"]

    @property
    def retriever(self) -> lambda_.Function:
        return self.functions["retriever"]

    @property
    def planner(self) -> lambda_.Function:
        return self.functions["planner"]

    @property
    def formatter(self) -> lambda_.Function:
        return self.functions["formatter"]
