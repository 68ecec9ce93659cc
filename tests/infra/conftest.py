"""Session fixtures: each flag set is synthesized once (see infra_synth.py)."""

from __future__ import annotations

import pytest

from tests.infra import infra_synth
from tests.infra.infra_synth import Synth, synth


@pytest.fixture(scope="session")
def default_synth() -> Synth:
    """Default flags: OpenSearch domain in a VPC, IAM auth, inline Map."""
    return infra_synth.default_synth()


@pytest.fixture(scope="session")
def alt_synth() -> Synth:
    """The other side of every flag: Serverless, API keys, Distributed Map, Cohere, Bedrock planner,
    an indexer reservation below its concurrency, data not retained, an alarm e-mail; another
    stack name (names derive from it)."""
    return synth(
        {
            "evidence:indexerConcurrency": "5",
            "evidence:indexerReservedConcurrency": "3",
            "evidence:indexerBatchSize": "4",
            "evidence:indexerTimeoutSeconds": "900",
            "evidence:retainData": "false",
            "evidence:alarmEmail": "ops@example.com",
            "evidence:search": "serverless",
            "evidence:apiAuth": "apikey",
            "evidence:distributedMap": "true",
            "evidence:reranker": "cohere",
            "evidence:cohereSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cohere-AbCdEf",
            "evidence:planner": "bedrock",
            "evidence:waf": "true",
        },
        stack_name="EvidenceDev",
    )
