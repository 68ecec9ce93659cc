"""The one retry policy (evidence.retry) both the OpenSearch adapter and the Cohere reranker use."""

from __future__ import annotations

import time

import pytest

from evidence.retry import (
    Backoff,
    Deadline,
    RetriesExhausted,
    Retry,
    call_with_retries,
    current_deadline,
    deadline_scope,
    parse_retry_after,
)


class Flaky(Exception):
    pass


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    b = Backoff(retries=5, base_s=0.1, max_s=1.0)
    assert b.delay(0, rng=lambda: 0.0) == pytest.approx(0.05)
    assert b.delay(0, rng=lambda: 1.0) == pytest.approx(0.1)
    assert b.delay(2, rng=lambda: 1.0) == pytest.approx(0.4)
    assert b.delay(10, rng=lambda: 1.0) == pytest.approx(1.0)
    assert b.delay(10_000, rng=lambda: 1.0) == pytest.approx(1.0)  # no overflow


def test_retry_after_wins_but_is_capped() -> None:
    b = Backoff(retries=1, base_s=0.1, max_s=2.0)
    assert b.delay(0, 0.7) == 0.7 and b.delay(0, 99.0) == 2.0 and b.delay(0, -1.0) == 0.0
    assert parse_retry_after("3") == 3.0 and parse_retry_after("0.5") == 0.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after("nan") is None and parse_retry_after(None) is None


def test_retries_transient_failures_then_succeeds() -> None:
    sleeps: list[float] = []
    calls: list[int] = []

    def fn(attempt: int) -> str:
        calls.append(attempt)
        if attempt < 2:
            raise Flaky
        return "ok"

    out = call_with_retries(
        fn, backoff=Backoff(retries=3, base_s=0.01), classify=lambda e: Retry(), sleep=sleeps.append
    )
    assert out == "ok" and calls == [0, 1, 2] and len(sleeps) == 2


def test_permanent_failures_propagate_untouched() -> None:
    calls: list[int] = []

    def fn(attempt: int) -> None:
        calls.append(attempt)
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        call_with_retries(fn, backoff=Backoff(retries=3), classify=lambda e: None, sleep=lambda s: None)
    assert calls == [0]


def test_gives_up_after_the_attempts_with_the_cause() -> None:
    def fn(attempt: int) -> None:
        raise Flaky(f"attempt {attempt}")

    with pytest.raises(RetriesExhausted) as err:
        call_with_retries(
            fn, backoff=Backoff(retries=2, base_s=0.0), classify=lambda e: Retry(), sleep=lambda s: None
        )
    assert err.value.attempts == 3 and not err.value.deadline_reached
    assert isinstance(err.value.__cause__, Flaky) and str(err.value.cause) == "attempt 2"
    assert err.value.retry_after_s >= 1


def test_stops_before_a_wait_that_would_pass_the_deadline() -> None:
    sleeps: list[float] = []
    calls: list[int] = []

    def fn(attempt: int) -> None:
        calls.append(attempt)
        raise Flaky

    with pytest.raises(RetriesExhausted) as err:
        call_with_retries(
            fn,
            backoff=Backoff(retries=10, base_s=1.0),
            classify=lambda e: Retry(),
            deadline=Deadline.after(0.5),
            sleep=sleeps.append,
        )
    assert err.value.deadline_reached and calls == [0] and sleeps == []


def test_an_expired_deadline_makes_no_call() -> None:
    calls: list[int] = []
    with pytest.raises(RetriesExhausted) as err:
        call_with_retries(
            calls.append, backoff=Backoff(), classify=lambda e: Retry(), deadline=Deadline.after(0.0)
        )
    assert calls == [] and err.value.deadline_reached


def test_deadline_scopes_nest_and_keep_the_earlier() -> None:
    assert current_deadline() is None
    with deadline_scope(10.0) as outer:
        assert current_deadline() is outer and outer is not None
        with deadline_scope(60.0) as inner:
            assert inner is outer  # a callee cannot extend its caller's budget
        with deadline_scope(0.5) as tighter:
            assert tighter is not None and tighter.at < outer.at
            assert tighter.clamp(10.0) <= 0.5
        with deadline_scope(None) as unbounded:
            assert unbounded is outer
    assert current_deadline() is None


def test_clamp_never_outlives_the_deadline() -> None:
    d = Deadline.after(0.2)
    assert d.clamp(10.0) <= 0.2 and d.clamp(0.05) == 0.05
    time.sleep(0.21)
    assert d.expired and d.clamp(10.0) == 0.0
