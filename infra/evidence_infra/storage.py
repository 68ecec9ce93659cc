"""Storage: the documents bucket (uploads become searchable), the batch results bucket, access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct


class Storage(Construct):
    def __init__(self, scope: Construct, id: str, *, key: kms.IKey, removal: RemovalPolicy) -> None:
        super().__init__(scope, id)
        self.removal = removal
        # Server access logs cannot go to a KMS-encrypted bucket: S3-managed keys here.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=Duration.days(365), noncurrent_version_expiration=Duration.days(30)
                )
            ],
            removal_policy=removal,
        )
        self.documents = self._data_bucket("Documents", key, "documents/", [])
        self.results = self._data_bucket(
            "Results", key, "results/", [s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30))]
        )

    def _data_bucket(
        self, id: str, key: kms.IKey, log_prefix: str, lifecycle_rules: list[s3.LifecycleRule]
    ) -> s3.Bucket:
        return s3.Bucket(
            self,
            id,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=log_prefix,
            lifecycle_rules=lifecycle_rules or None,
            removal_policy=self.removal,
        )

    def notify(self, queue: sqs.IQueue) -> None:
        """Every create and remove in the documents bucket goes to the indexing queue."""
        destination = s3n.SqsDestination(queue)
        self.documents.add_event_notification(s3.EventType.OBJECT_CREATED, destination)
        self.documents.add_event_notification(s3.EventType.OBJECT_REMOVED, destination)
