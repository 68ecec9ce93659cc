"""Cached getters for what handlers share across invocations of one Lambda container.

Built on first use from `Settings` (never at import), replaceable by tests, the local
server and `evidence invoke` through `configure()`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evidence.config import Settings, get_settings

if TYPE_CHECKING:
    from evidence.access import Authorizer
    from evidence.service import EvidenceService


@dataclass
class _State:
    service: EvidenceService | None = None
    settings: Settings | None = None
    s3: Any | None = None
    authorizer: Authorizer | None = None


_lock = threading.Lock()
_state = _State()


def settings() -> Settings:
    return _state.settings if _state.settings is not None else get_settings()


def get_service() -> EvidenceService:
    if _state.service is None:
        with _lock:
            if _state.service is None:
                from evidence.service import EvidenceService

                _state.service = EvidenceService(settings())
    return _state.service


def warm() -> None:
    """Warm the shared service before the first event is handled, so that model loading is never
    charged to a request's time budget (docs/coach.md#cold-start); free once done."""
    get_service().warm()


def get_authorizer() -> Authorizer:
    """The access check built from the settings' policy (a bad policy fails every request)."""
    if _state.authorizer is None:
        with _lock:
            if _state.authorizer is None:
                from evidence.access import Authorizer, parse_policy

                _state.authorizer = Authorizer(parse_policy(settings().access_policy))
    return _state.authorizer


def get_s3_client() -> Any:
    """boto3 S3 client, imported and built at the first S3 access."""
    if _state.s3 is None:
        with _lock:
            if _state.s3 is None:
                import boto3

                region = settings().aws_region
                _state.s3 = boto3.client("s3", region_name=region) if region else boto3.client("s3")
    return _state.s3


def configure(
    *,
    service: EvidenceService | None = None,
    settings: Settings | None = None,
    s3_client: Any | None = None,
    authorizer: Authorizer | None = None,
) -> None:
    """Replace the cached objects (None = build again from settings at next use)."""
    with _lock:
        _state.service, _state.settings, _state.s3 = service, settings, s3_client
        _state.authorizer = authorizer


def reset() -> None:
    configure()


def close() -> None:
    """Close the service if one was built, then forget everything."""
    with _lock:
        service, _state.service = _state.service, None
    if service is not None:
        service.close()
    reset()
