"""The evidence stack: every capability construct, wired together."""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_kms as kms
from constructs import Construct

from .api import Api
from .assets import Assets, load_assets
from .batch import Batch
from .functions import Functions
from .nag import suppress
from .observability import Observability
from .queues import Queues
from .search import Search
from .settings import InfraSettings
from .storage import Storage


class EvidenceStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: InfraSettings | None = None,
        assets: Assets | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, id, description="evidence: retrieval API, S3 indexing, batch assessments", **kwargs
        )
        # Distributed Map's ResultWriter is rendered only under this feature flag (set before any child).
        self.node.set_context("@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2", True)
        # Access logs delivered under a bucket policy, not the legacy LogDeliveryWrite ACL.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        region = None if Token.is_unresolved(self.region) else self.region
        self.settings = settings = settings or InfraSettings.from_context(self.node, region=region)
        assets = assets or load_assets(settings)
        # Stateful resources survive an update or a stack deletion, but a failed first deploy deletes
        # what it created (DeletionPolicy RetainExceptOnCreate): nothing is orphaned, and the VPC
        # is not left blocked by a retained domain's network interfaces. retainData=false: all go.
        self.removal = removal = (
            RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if settings.retain_data else RemovalPolicy.DESTROY
        )
        # Names derive from the stack name: two stacks (dev, prod) can share an account and region.
        name = self.stack_name.lower()
        self.key = kms.Key(
            self,
            "DataKey",
            enable_key_rotation=True,
            alias=f"alias/{name}-data",
            description=f"{self.stack_name}: buckets, topic, search",
            removal_policy=removal,
        )
        self.storage = Storage(self, "Storage", key=self.key, removal=removal)
        # The queues get their own key: S3 notifications need a statement for s3.amazonaws.com in the
        # queue key's policy naming the bucket, and the bucket is encrypted with the data key — one
        # shared key would be a dependency cycle.
        self.queue_key = kms.Key(
            self,
            "QueueKey",
            enable_key_rotation=True,
            alias=f"alias/{name}-queues",
            description=f"{self.stack_name}: indexing queue and its DLQ",
            removal_policy=removal,
        )
        self.queues = Queues(
            self,
            "Queues",
            key=self.queue_key,
            indexer_timeout=Duration.seconds(settings.indexer_timeout_s),
            max_receive_count=settings.max_receive_count,
        )
        self.storage.notify(self.queues.indexing)
        self.search = Search(self, "Search", settings=settings, key=self.key, removal=removal)
        self.functions = Functions(
            self,
            "Functions",
            settings=settings,
            assets=assets,
            key=self.key,
            search=self.search,
            documents=self.storage.documents,
            results=self.storage.results,
            queue=self.queues.indexing,
        )
        self.search.add_setup(
            layer=self.functions.layer,
            code=assets.functions["search_setup"],
            runtime=self.functions.runtime,
            version=assets.version,
        )
        self.api = Api(self, "Api", settings=settings, handler=self.functions.retriever)
        # The state machine invokes the retriever, and the retriever starts the state machine
        # (POST /v1/indexes/{index}/assessments): its ARN is built from a fixed name, not referenced.
        self.batch_name = batch_name = f"{name}-batch"
        self.functions.allow_batch_start(
            self.format_arn(
                service="states",
                resource="stateMachine",
                resource_name=batch_name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
            self.format_arn(
                service="states",
                resource="execution",
                resource_name=f"{batch_name}:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
        )
        self.batch = Batch(
            self,
            "Batch",
            settings=settings,
            state_machine_name=batch_name,
            results=self.storage.results,
            planner=self.functions.planner,
            retriever=self.functions.retriever,
            formatter=self.functions.formatter,
        )
        self.observability = Observability(
            self,
            "Observability",
            settings=settings,
            key=self.key,
            functions=self.functions.functions,
            queue=self.queues.indexing,
            dead_letter=self.queues.dead_letter,
            api=self.api.rest_api,
            state_machine=self.batch.state_machine,
            search=self.search,
        )
        CfnOutput(self, "ApiUrl", value=self.api.rest_api.url)
        CfnOutput(self, "DocumentsBucket", value=self.storage.documents.bucket_name)
        CfnOutput(self, "ResultsBucket", value=self.storage.results.bucket_name)
        CfnOutput(self, "BatchStateMachine", value=self.batch.state_machine.state_machine_arn)
        CfnOutput(self, "SearchEndpoint", value=self.search.endpoint)
        CfnOutput(self, "AlarmTopic", value=self.observability.topic.topic_arn)
        if self.api.api_key is not None:
            CfnOutput(self, "ApiKeyId", value=self.api.api_key.key_id)
        suppress(self)
