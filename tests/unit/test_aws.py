"""The lazy AWS client and the one Converse call (evidence/aws.py)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from evidence.aws import Converse, Lazy, boto3_client, lazy_boto3_client


def test_lazy_builds_once_even_when_threads_race() -> None:
    built: list[object] = []
    gate = threading.Barrier(8)

    def factory() -> object:
        built.append(object())
        return built[-1]

    lazy: Lazy[object] = Lazy(factory)
    assert lazy.built is None

    def get() -> object:
        gate.wait(timeout=30)
        return lazy.get()

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: get(), range(8)))
    assert len(built) == 1 and all(r is built[0] for r in results)


def test_a_given_client_is_used_and_none_is_built() -> None:
    stub = object()
    lazy = lazy_boto3_client("bedrock-runtime", region="us-east-1", timeout_s=1.0, client=stub)
    assert lazy.built is stub and lazy.get() is stub


def test_boto3_client_carries_the_timeouts_and_attempts() -> None:
    client = boto3_client("bedrock-runtime", region="eu-west-1", timeout_s=2.5, max_attempts=3)
    config = client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (2.5, 2.5)
    assert config.retries == {"total_max_attempts": 4, "mode": "standard"}  # botocore counts the first try
    assert client.meta.region_name == "eu-west-1"


def test_within_stops_waiting_at_the_budget_and_passes_errors_through() -> None:
    release = threading.Event()
    converse = Converse(region="us-east-1", timeout_s=1.0, client=object(), pool="test-aws")
    try:
        with pytest.raises(TimeoutError):
            converse.within(lambda: release.wait(30), 0.05)
    finally:
        release.set()

    def boom() -> Any:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        converse.within(boom, 5.0)
    assert converse.within(lambda: 7, 5.0) == 7
