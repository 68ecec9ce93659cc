"""Documents embed in a worker process at a lower priority; queries stay in the server
(evidence/embed/background.py, RELIABILITY.md "Load")."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evidence.config import BackendKind, EmbedderKind, Settings
from evidence.embed.background import (
    BackgroundDocuments,
    SharedEmbedding,
    lower_priority,
    serving_embedder,
    shared_embedding,
)
from evidence.embed.cache import CachedEmbedder
from evidence.errors import ServiceUnavailableError
from evidence.testing import HashingEmbedder

TEXTS = ["Customer data is encrypted at rest.", "Keys rotate every year.", "Backups run nightly."]


class QueryOnly(HashingEmbedder):
    """The server's side: it must never embed a document itself."""

    def embed_documents(self, texts: object) -> np.ndarray:
        raise AssertionError("a document was embedded in the server's process")


@pytest.fixture
def background() -> Iterator[BackgroundDocuments]:
    bg = BackgroundDocuments(QueryOnly(), build=HashingEmbedder, nice=7)
    yield bg
    bg.close()


def test_documents_embed_in_the_worker_at_its_niceness_and_queries_here(
    background: BackgroundDocuments,
) -> None:
    expected = HashingEmbedder().embed_documents(TEXTS)
    assert np.array_equal(background.embed_documents(TEXTS), expected)
    pool = background._executor()
    assert pool.submit(os.getpid).result() != os.getpid()
    assert pool.submit(os.nice, 0).result() >= 7
    assert np.array_equal(background.embed_query("keys"), HashingEmbedder().embed_query("keys"))
    assert background.embed_documents([]).shape == (0, 384)


def test_the_worker_starts_with_the_first_document_not_with_queries(
    background: BackgroundDocuments,
) -> None:
    """`evidence serve` no longer starts it at start: a server that only reads never pays it."""
    background.embed_query("keys")
    background.embed_documents([])
    assert not background.started
    background.embed_documents(TEXTS[:1])
    assert background.started


def test_a_killed_worker_is_replaced_and_the_call_succeeds(background: BackgroundDocuments) -> None:
    background.embed_documents(TEXTS[:1])
    pool = background._executor()
    os.kill(pool.submit(os.getpid).result(), signal.SIGKILL)
    assert np.array_equal(background.embed_documents(TEXTS), HashingEmbedder().embed_documents(TEXTS))


def test_lower_priority_is_idempotent_and_never_raises_it() -> None:
    def child() -> None:
        lower_priority(5)
        first = os.nice(0)
        lower_priority(5)
        lower_priority(2)
        os._exit(0 if first == os.nice(0) >= 5 else 1)

    pid = os.fork()  # a child: niceness cannot be lowered again in the test process
    if pid == 0:
        child()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_serve_uses_the_worker_for_minilm_only(tmp_path: Path) -> None:
    def settings(embedder: EmbedderKind, nice: int) -> Settings:
        return Settings(store_dir=tmp_path, backend=BackendKind.EMBEDDED, embedder=embedder, write_nice=nice)

    embedder, worker = serving_embedder(settings(EmbedderKind.MINILM, 10))
    try:
        assert isinstance(embedder, CachedEmbedder) and embedder.inner is worker
    finally:
        if worker is not None:
            worker.close()
    assert serving_embedder(settings(EmbedderKind.MINILM, 0)) == (None, None)
    assert serving_embedder(settings(EmbedderKind.TITAN, 10)) == (None, None)


#: In the shared process: a "pair" request returns only once another is in flight beside it.
_PAIR = threading.Barrier(2, timeout=60)


class Refusing(HashingEmbedder):
    """Fails on one text, as a model may on a document it cannot take."""

    def embed_documents(self, texts: object) -> np.ndarray:
        if "refuse" in list(texts):  # type: ignore[call-overload]
            raise ValueError("refused: refuse")
        if "pair" in list(texts):  # type: ignore[call-overload]
            _PAIR.wait()
        return super().embed_documents(texts)  # type: ignore[arg-type]


@pytest.fixture
def shared() -> Iterator[SharedEmbedding]:
    """The shared process of `serve --workers N`, started here as the supervisor starts it."""
    embedding = SharedEmbedding(Refusing, nice=7, concurrency=2)
    embedding.start()
    yield embedding
    process = embedding.process
    assert process is not None and process.pid is not None
    os.kill(process.pid, signal.SIGTERM)
    process.join(60)
    embedding.close()


def test_every_worker_embeds_documents_in_the_one_shared_process_at_its_niceness(
    shared: SharedEmbedding,
) -> None:
    first, second = shared.client(QueryOnly()), shared.client(QueryOnly())
    expected = HashingEmbedder().embed_documents(TEXTS)
    assert np.array_equal(first.embed_documents(TEXTS), expected)
    assert np.array_equal(second.embed_documents(TEXTS[:1]), expected[:1])
    assert first.embed_documents([]).shape == (0, 384)
    assert np.array_equal(first.embed_query("keys"), HashingEmbedder().embed_query("keys"))
    assert shared.process is not None and shared.process.pid is not None
    assert os.getpriority(os.PRIO_PROCESS, shared.process.pid) >= 7
    assert first.model_id == HashingEmbedder().model_id and first.dimension == 384


def test_an_embedding_error_reaches_the_caller_and_the_process_serves_on(shared: SharedEmbedding) -> None:
    client = shared.client(QueryOnly())
    with pytest.raises(ValueError, match="refused"):
        client.embed_documents(["refuse"])
    assert np.array_equal(client.embed_documents(TEXTS[:1]), HashingEmbedder().embed_documents(TEXTS[:1]))


def test_one_request_per_worker_runs_at_once_on_the_one_model(shared: SharedEmbedding) -> None:
    """`concurrency` 2 (two workers): the second worker's upload does not queue behind the first."""
    results: list[object] = []

    def embed() -> None:
        try:
            results.append(shared.client(QueryOnly()).embed_documents(["pair"]).shape)
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=embed) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [(1, 384), (1, 384)]


def test_a_client_waits_for_a_restarted_process(shared: SharedEmbedding) -> None:
    """The supervisor starts another when it dies; a call meanwhile waits for its socket."""
    client = shared.client(QueryOnly())
    client.embed_documents(TEXTS[:1])
    process = shared.process
    assert process is not None and process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(60)
    shared.start()
    assert np.array_equal(client.embed_documents(TEXTS), HashingEmbedder().embed_documents(TEXTS))


def test_no_process_is_a_503_after_the_wait() -> None:
    embedding = SharedEmbedding(HashingEmbedder, nice=7)  # never started
    try:
        client = embedding.client(QueryOnly())
        client.wait_s = 0.2
        with pytest.raises(ServiceUnavailableError, match="not accepting"):
            client.embed_documents(TEXTS)
    finally:
        embedding.close()
    assert not embedding.directory.exists()


def test_serve_workers_share_an_embedder_for_minilm_only(tmp_path: Path) -> None:
    def settings(embedder: EmbedderKind, nice: int) -> Settings:
        return Settings(store_dir=tmp_path, backend=BackendKind.EMBEDDED, embedder=embedder, write_nice=nice)

    embedding = shared_embedding(settings(EmbedderKind.MINILM, 10), 2)
    assert embedding is not None
    try:
        embedder, client = serving_embedder(settings(EmbedderKind.MINILM, 10), embedding)
        assert isinstance(embedder, CachedEmbedder) and embedder.inner is client
        assert client is not None and client.address == embedding.address  # type: ignore[union-attr]
    finally:
        embedding.close()
    assert embedding.concurrency == 2
    assert shared_embedding(settings(EmbedderKind.MINILM, 0), 2) is None
    assert shared_embedding(settings(EmbedderKind.TITAN, 10), 2) is None
