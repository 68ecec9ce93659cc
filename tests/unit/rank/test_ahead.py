"""Overlapping a retrieve's legs (`rank/ahead.py`): the same result as one after another, the
same errors, nothing left running, and a busy pool never makes a request wait."""

from __future__ import annotations

import contextvars
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.errors import BackendError, EmbedderMismatchError
from evidence.model import RetrieveRequest
from evidence.rank import ahead as ahead_module
from evidence.rank.ahead import Ahead, pool
from evidence.rank.first_stage import FirstStage
from evidence.rank.pipeline import Profile
from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend
from evidence.service import EvidenceService
from tests.unit.rank.rankkit import INDEX, chunk, ctx, new_backend, vec

WAIT_S = 30.0  # generous: only ever reached when something is broken


def _corpus() -> list[Any]:
    words = ["encryption", "rotation", "backup", "retention", "access", "audit"]
    return [
        chunk(f"c{i}", f"{words[i % 6]} policy {i} covers {words[(i * 5) % 6]} and keys", type=f"t{i % 2}")
        for i in range(240)  # more than a leg's depth (100): the legs differ, completion reads vectors
    ]


class _Embedder:
    model_id = "test-hash"
    dimension = 8

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def embed_query(self, text: str) -> Any:
        if self.error is not None:
            raise self.error
        return vec(text)


class _Watched:
    """The embedded backend, counting the lexical and vector reads in flight; one leg may fail."""

    def __init__(self, inner: EmbeddedBackend, fail: str | None = None) -> None:
        self.inner = inner
        self.fail = fail
        self.lexical_calls = 0
        self.in_flight = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _read(self, leg: str, fn: Any, *args: Any, **kw: Any) -> Any:
        with self._lock:
            self.in_flight += 1
            self.threads.add(threading.get_ident())
        try:
            if self.fail == leg:
                raise BackendError(f"the {leg} leg broke")
            return fn(*args, **kw)
        finally:
            with self._lock:
                self.in_flight -= 1

    def lexical(self, *args: Any, **kw: Any) -> Any:
        self.lexical_calls += 1
        return self._read("lexical", self.inner.lexical, *args, **kw)

    def dense(self, *args: Any, **kw: Any) -> Any:
        return self._read("dense", self.inner.dense, *args, **kw)

    def vectors(self, *args: Any, **kw: Any) -> Any:
        return self._read("vectors", self.inner.vectors, *args, **kw)


def _service(tmp_path: Path, backend: Any, embedder: _Embedder | None = None) -> EvidenceService:
    return EvidenceService(
        Settings(store_dir=tmp_path),
        backend=backend,
        embedder=embedder or _Embedder(),  # type: ignore[arg-type]
    )


def _hits(service: EvidenceService, **req: Any) -> list[tuple[str, float]]:
    resp = service.retrieve(INDEX, RetrieveRequest(**{"query": "encryption keys rotation", **req}))
    return [(h.chunk_id, h.score) for h in resp.hits]


def _sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path before overlap: nothing started early, and completion reads the vectors it needs
    after the dense leg (no `Ahead` is made: `stored` stays None)."""
    monkeypatch.setattr(Profile, "start", lambda self, ctx: None)
    monkeypatch.setattr("evidence.rank.first_stage.Ahead", lambda fn, key=None: None)


@pytest.mark.parametrize("filters", [None, {"type": "t1"}])
@pytest.mark.parametrize("profile", ["default", "vrm"])
def test_overlapped_legs_give_the_sequential_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: dict[str, str] | None, profile: str
) -> None:
    backend = _Watched(new_backend(tmp_path, _corpus()))
    service = _service(tmp_path, backend)
    queries = ["encryption keys rotation", "audit access", "backup retention policy 7"]
    overlapped = [_hits(service, query=q, filters=filters, profile=profile) for q in queries]
    assert len(backend.threads) > 1  # the legs did run on the pool
    resp = service.retrieve(INDEX, RetrieveRequest(query=queries[0], filters=filters, profile=profile))
    first = resp.telemetry.stages[0]
    assert first.detail is not None and first.detail.get("lexical_ahead") is True
    with monkeypatch.context() as m:
        _sequential(m)
        sequential = [_hits(service, query=q, filters=filters, profile=profile) for q in queries]
    assert overlapped == sequential and all(overlapped)
    assert backend.in_flight == 0


@pytest.mark.parametrize("leg", ["lexical", "dense", "vectors"])
def test_a_failing_leg_raises_what_it_raised_run_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leg: str
) -> None:
    backend = _Watched(new_backend(tmp_path, _corpus()), fail=leg)
    service = _service(tmp_path, backend)
    with pytest.raises(BackendError) as overlapped:
        _hits(service)
    assert backend.in_flight == 0  # the other leg's read ended with the request
    with monkeypatch.context() as m:
        _sequential(m)
        with pytest.raises(BackendError) as sequential:
            _hits(service)
    assert str(overlapped.value) == str(sequential.value) == f"the {leg} leg broke"
    assert overlapped.value.code == sequential.value.code


def test_an_embedding_error_wins_and_the_early_leg_is_not_left_running(tmp_path: Path) -> None:
    backend = _Watched(new_backend(tmp_path, _corpus()))
    error = EmbedderMismatchError("the query could not be embedded", field="index")
    service = _service(tmp_path, backend, _Embedder(error))
    with pytest.raises(EmbedderMismatchError) as raised:
        _hits(service)
    assert raised.value is error and backend.in_flight == 0


def test_work_started_for_other_inputs_is_not_used(tmp_path: Path) -> None:
    backend = _Watched(new_backend(tmp_path, _corpus()))
    c = ctx(backend, query="encryption keys", query_vector=vec("encryption keys"))
    stage = FirstStage()
    early = stage.start(c)
    assert early is not None
    assert early.matches(("lexical", INDEX, "encryption keys", 100, {}, ChunkKind.PASSAGE))
    other = FirstStage(leg_depth=7)  # another depth: another lexical leg
    calls = backend.lexical_calls
    got = other.retrieve(backend, INDEX, query="encryption keys", vector=c.query_vector, k=5, ahead=early)
    assert backend.lexical_calls > calls and got.detail.get("lexical_ahead") is None
    same = stage.retrieve(backend, INDEX, query="encryption keys", vector=c.query_vector, k=5, ahead=early)
    alone = stage.retrieve(backend, INDEX, query="encryption keys", vector=c.query_vector, k=5)
    assert same.detail["lexical_ahead"] is True and same.candidates == alone.candidates


def test_result_and_error_are_the_works_own() -> None:
    assert Ahead(lambda: 42).result() == 42
    error = ValueError("from the pool")

    def fail() -> None:
        raise error

    with pytest.raises(ValueError) as raised:
        Ahead(fail).result()
    assert raised.value is error
    Ahead(fail).abandon()  # an abandoned error is dropped


def test_the_callers_context_reaches_the_pool_thread() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("request-7")
    assert Ahead(var.get).result() == "request-7"


def test_work_no_thread_started_runs_on_the_callers_thread() -> None:
    """A pool busy with other requests' work: the caller does not queue behind it."""
    busy = pool()
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold() -> None:
        started.release()
        release.wait(WAIT_S)

    holders = [busy.submit(hold) for _ in range(busy._max_workers)]
    try:
        for _ in holders:
            assert started.acquire(timeout=WAIT_S)
        assert Ahead(threading.get_ident).result() == threading.get_ident()
    finally:
        release.set()
    for h in holders:
        h.result(timeout=WAIT_S)
    picked = threading.Event()

    def on_pool() -> int:
        picked.set()
        return threading.get_ident()

    free = Ahead(on_pool)
    assert picked.wait(WAIT_S) and free.result() != threading.get_ident()  # free again: the pool's


def test_abandon_waits_for_work_already_running() -> None:
    running, go, done = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        running.set()
        go.wait(WAIT_S)
        done.set()

    a = Ahead(work)
    assert running.wait(WAIT_S)
    go.set()
    a.abandon()
    assert done.is_set()


def test_a_forked_child_builds_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = pool()
    monkeypatch.setattr(ahead_module, "os", SimpleNamespace(getpid=lambda: -1, cpu_count=os.cpu_count))
    child = pool()
    assert child is not parent and pool() is child
    assert Ahead(lambda: np.float32(1.5)).result() == 1.5


def test_work_asked_for_by_several_threads_runs_once_and_each_gets_its_outcome() -> None:
    """A chained `Ahead` (the lexical hits' vectors) asks for the lexical leg on a pool thread
    while the caller asks for it too: one run, one result, the same error object for each."""
    runs: list[int] = []
    gate = threading.Event()

    def work() -> list[int]:
        gate.wait(WAIT_S)
        runs.append(threading.get_ident())
        return [7]

    first = Ahead(work)
    chained = Ahead(lambda: [*first.result(), 8])
    gate.set()
    assert chained.result() == [7, 8] and first.result() == [7] and first.result() is first.result()
    assert len(runs) == 1
    error = ValueError("once")
    calls: list[int] = []

    def fail() -> None:
        calls.append(1)
        raise error

    failing = Ahead(fail)
    chained_failing = Ahead(failing.result)
    for a in (failing, chained_failing, failing):
        with pytest.raises(ValueError) as raised:
            a.result()
        assert raised.value is error
    assert calls == [1]


class _LexicalAfterDense(_Watched):
    """A lexical leg that can only end once the dense leg has started: a first stage that waits
    for it before searching densely would wait out `WAIT_S` and see `dense_first` False."""

    def __init__(self, inner: EmbeddedBackend) -> None:
        super().__init__(inner)
        self.dense_started = threading.Event()
        self.dense_first: list[bool] = []

    def lexical(self, *args: Any, **kw: Any) -> Any:
        if kw.get("filters") is None or "chunk_id" not in kw["filters"]:  # not score completion's
            self.dense_first.append(self.dense_started.wait(WAIT_S))
        return super().lexical(*args, **kw)

    def dense(self, *args: Any, **kw: Any) -> Any:
        self.dense_started.set()
        return super().dense(*args, **kw)


def test_the_dense_leg_does_not_wait_for_a_lexical_leg_started_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _LexicalAfterDense(new_backend(tmp_path, _corpus()))
    service = _service(tmp_path, backend)
    resp = service.retrieve(INDEX, RetrieveRequest(query="encryption keys rotation"))
    first = resp.telemetry.stages[0]
    assert backend.dense_first[:1] == [True]
    assert first.detail is not None and first.detail.get("lexical_ahead") is True
    assert {"lexical_ms", "dense_ms", "complete_ms"} <= set(first.detail)
    overlapped = [(h.chunk_id, h.score) for h in resp.hits]
    with monkeypatch.context() as m:
        _sequential(m)
        backend.dense_started.set()  # run one after another, the lexical leg need not wait
        assert _hits(service) == overlapped and overlapped
    assert backend.in_flight == 0
