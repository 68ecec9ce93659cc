"""Amazon OpenSearch Serverless and Service endpoints: which service signs (`es` or `aoss`) and
the SigV4 auth for it. Serverless's write-side differences (no `refresh`, no delete by query,
server-assigned ids with generation markers) live with the writes they change (`bulk.py`).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlparse

from evidence.config import Settings
from evidence.errors import (
    ConfigurationError,
)

logger = logging.getLogger(__name__)


def service_for(settings: Settings) -> str:
    """`es` or `aoss`: explicit setting first, else the endpoint's host decides."""
    if settings.opensearch_service:
        return settings.opensearch_service
    endpoint = settings.opensearch_endpoint or ""
    host = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}").hostname or ""
    return "aoss" if host.endswith(".aoss.amazonaws.com") else "es"


def _sigv4_auth(settings: Settings, host: str, service: str) -> Any:
    import boto3
    from opensearchpy import AWSV4SignerAuth

    session = boto3.Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise ConfigurationError(
            "SigV4 signing needs AWS credentials (environment, profile or role); none were found"
        )
    region = settings.aws_region or session.region_name or _region_from_host(host)
    if not region:
        raise ConfigurationError("SigV4 signing needs a region: set EVIDENCE_AWS_REGION")
    return AWSV4SignerAuth(credentials, region, service)


def _region_from_host(host: str) -> str | None:
    # search-x.eu-west-1.es.amazonaws.com / x.us-east-1.aoss.amazonaws.com
    parts = host.split(".")
    for i, part in enumerate(parts):
        if part in {"es", "aoss"} and i > 0:
            return parts[i - 1]
    return None
