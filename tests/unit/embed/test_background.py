"""Documents embed in a worker process at a lower priority; queries stay in the server
(evidence/embed/background.py, RELIABILITY.md "Load")."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evidence.config import BackendKind, EmbedderKind, Settings
from evidence.embed.background import BackgroundDocuments, lower_priority, serving_embedder
from evidence.embed.cache import CachedEmbedder
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
