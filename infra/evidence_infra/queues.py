"""Queues: the indexing queue (S3 notifications) with its dead-letter queue."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: AWS's guidance for SQS event sources: visibility timeout at least six times the function's timeout,
#: so a message is not redelivered while a retried batch is still running.
VISIBILITY_FACTOR = 6


class Queues(Construct):
    def __init__(
        self, scope: Construct, id: str, *, key: kms.IKey, indexer_timeout: Duration, max_receive_count: int
    ) -> None:
        super().__init__(scope, id)
        self.dead_letter = sqs.Queue(
            self,
            "IndexingDlq",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.indexing = sqs.Queue(
            self,
            "Indexing",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(indexer_timeout.to_seconds() * VISIBILITY_FACTOR),
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter, max_receive_count=max_receive_count
            ),
        )
