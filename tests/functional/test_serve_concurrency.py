"""Noisy neighbours (issues 26.3, 26.5, 26.7 and 23.6): writes never block reads, a write is
invisible until it commits, every request is bounded, large uploads go to the background, the
embedding cache tells no tenant about another, and batches take turns across callers.

Each test holds the slow part (a write, an embedding) on an Event rather than on time, so what
it proves does not depend on the machine's speed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from evidence.access import Access, Authorizer
from evidence.api import runtime
from evidence.api.uploads import UploadJobs, UploadNotFoundError, configure_uploads
from evidence.assess.models import AssessmentInput, Criterion
from evidence.assess.threads import ThreadLauncher
from evidence.config import Settings
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.errors import IndexNotFoundError, TooManyRequestsError
from evidence.model import IndexDocumentRequest
from evidence.records import ChunkKind, SearchHit
from evidence.server import ApiServer, make_server
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder
from tests.functional.conftest import REGION
from tests.unit.search.groupkit import grouped

POLICY_TEXT = "Customer data is encrypted at rest with AES-256 and keys rotate every year."


class GatedEmbedder(HashingEmbedder):
    """Document embedding waits for `gate` once `armed`; `entered` says a write is inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.armed:
            self.entered.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return super().embed_documents(texts)


def call(
    url: str, method: str = "GET", payload: Any = None, timeout: float = 30
) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


@contextmanager
def serving(service: EvidenceService) -> Iterator[ApiServer]:
    runtime.configure(service=service, settings=service.settings)
    srv = make_server("127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def doc(doc_id: str, text: str = POLICY_TEXT) -> dict[str, Any]:
    return {"document_id": doc_id, "filename": f"{doc_id}.txt", "text": text}


# --- writes never block reads -------------------------------------------------------------------


def test_a_retrieve_does_not_wait_for_another_tenants_write(tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    service = EvidenceService(Settings(store_dir=tmp_path / "store", aws_region=REGION), embedder=embedder)
    with serving(service) as srv:
        assert call(f"{srv.url}/v1/indexes/b-docs/documents", "POST", doc("b1"))[0] == 200
        embedder.armed = True
        writer: list[int] = []
        thread = threading.Thread(
            target=lambda: writer.append(call(f"{srv.url}/v1/indexes/a-docs/documents", "POST", doc("a1"))[0])
        )
        thread.start()
        try:
            assert embedder.entered.wait(30)
            # The old server resolved one request at a time: this waited for the write's end.
            status, _, answer = call(
                f"{srv.url}/v1/indexes/b-docs/retrieve", "POST", {"query": "AES-256"}, timeout=15
            )
            assert status == 200 and answer["hits"][0]["document_id"] == "b1"
            assert call(f"{srv.url}/v1/health", timeout=15)[0] == 200
            assert thread.is_alive() and not writer  # the write is still embedding
        finally:
            embedder.gate.set()
            thread.join(60)
        assert writer == [200]
    runtime.close()


def test_a_write_is_invisible_until_it_commits(
    service: EvidenceService, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evidence.search.embedded_store as store_module

    service.index_document(
        "idx", IndexDocumentRequest(document_id="old", filename="old.txt", text=POLICY_TEXT)
    )
    backend = service.backend
    vector = service.query_vector("idx", "quarterly revenue grew")
    assert vector is not None
    before = backend.get_index("idx")
    original = store_module._vector_blob
    inside, release = threading.Event(), threading.Event()
    calls = 0

    def gated(vec: Any) -> bytes | None:
        nonlocal calls
        calls += 1
        if calls == 2:  # the new document's row and its first chunk are written, not committed
            inside.set()
            assert release.wait(60)
        return original(vec)

    monkeypatch.setattr(store_module, "_vector_blob", gated)
    text = "Quarterly revenue grew by eleven percent. " * 40
    writer = threading.Thread(
        target=service.index_document,
        args=("idx", IndexDocumentRequest(document_id="new", filename="new.txt", text=text)),
    )
    writer.start()
    seen: dict[str, Any] = {}

    def read() -> None:
        seen["info"] = backend.get_index("idx")
        seen["dense"] = {h.chunk.document_id for h in backend.dense("idx", vector, k=50)}
        seen["lexical"] = {h.chunk.document_id for h in backend.lexical("idx", "quarterly revenue", k=50)}
        seen["hash"] = backend.document_hash("idx", "new")

    try:
        assert inside.wait(30)
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(15)
        # The old store served reads on the writer's connection under the writer's lock: they
        # waited for the commit (or, lock aside, would have seen its uncommitted rows).
        assert not reader.is_alive(), "a read waited for a write"
        assert seen == {"info": before, "dense": {"old"}, "lexical": set(), "hash": None}
    finally:
        release.set()
        writer.join(60)
    assert "new" in {h.chunk.document_id for h in backend.dense("idx", vector, k=50)}
    assert "new" in {h.chunk.document_id for h in backend.lexical("idx", "quarterly revenue", k=50)}
    assert backend.get_index("idx").documents == 2


def test_dense_results_follow_writes_without_a_rebuild(service: EvidenceService) -> None:
    """This process's writes carry the dense matrix to their generation (no full reload), and
    what it holds is exactly what a reload from disk would hold."""
    for i in range(3):
        service.index_document(
            "idx", IndexDocumentRequest(document_id=f"d{i}", filename="x.txt", text=f"{POLICY_TEXT} {i}")
        )
    vector = service.query_vector("idx", "encrypted at rest")
    assert vector is not None
    service.backend.dense("idx", vector, k=10)
    store = service.backend.index_store("idx")  # type: ignore[attr-defined]
    service.delete_document("idx", "d1")
    service.index_document(
        "idx", IndexDocumentRequest(document_id="d3", filename="x.txt", text="Backups run nightly.")
    )
    carried = store._dense
    assert carried is not None and carried.generation == store.generation()
    fresh = store._load_dense()
    assert sorted(carried.rowids.tolist()) == sorted(fresh.rowids.tolist())
    by_row = dict(zip(fresh.rowids.tolist(), fresh.matrix, strict=True))
    for rowid, row, is_passage in zip(carried.rowids.tolist(), carried.matrix, carried.kinds, strict=True):
        assert np.array_equal(row, by_row[rowid])
        assert is_passage == bool(fresh.kinds[fresh.rowids.tolist().index(rowid)])
    hits = {h.chunk.document_id for h in service.backend.dense("idx", vector, k=10, kind=ChunkKind.PASSAGE)}
    assert hits == {"d0", "d2", "d3"}


class _WatchedLock:
    """A lock that reports when a thread other than `owner` asks for it (it then waits)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.owner: int | None = None
        self.asked = threading.Event()

    def __enter__(self) -> bool:
        if self.owner is not None and threading.get_ident() != self.owner:
            self.asked.set()
        return bool(self.inner.acquire())

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


def test_a_reader_that_sees_a_commit_waits_for_the_carried_matrix_not_a_rebuild(
    service: EvidenceService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between a write's COMMIT and the dense matrix carried to it, a reader sees the new
    generation with the old matrix. It used to rebuild the matrix from the records (every
    vector read again, the other readers queued behind it) on most writes under load; now it
    waits for the writer's patch, and sees the write whole: every passage, none of the old."""
    service.index_document("idx", IndexDocumentRequest(document_id="old", filename="o.txt", text=POLICY_TEXT))
    vector = service.query_vector("idx", "quarterly revenue grew")
    assert vector is not None
    backend = service.backend
    backend.dense("idx", vector, k=50)  # the matrix is loaded, at the current generation
    store = backend.index_store("idx")  # type: ignore[attr-defined]
    rebuilds = 0
    load_dense = store._load_dense

    def counted() -> Any:
        nonlocal rebuilds
        rebuilds += 1
        return load_dense()

    monkeypatch.setattr(store, "_load_dense", counted)
    lock = _WatchedLock(store._dense_lock)
    monkeypatch.setattr(store, "_dense_lock", lock)
    committed, release = threading.Event(), threading.Event()
    after_write = store._after_write

    def held(*args: Any) -> None:
        lock.owner = threading.get_ident()
        committed.set()  # COMMIT is done: readers see the new generation
        assert release.wait(60), "the test never released the writer"
        after_write(*args)

    monkeypatch.setattr(store, "_after_write", held)
    text = " ".join(f"Quarterly revenue grew in region {i}, by {i} percent." * 12 for i in range(12))
    writer = threading.Thread(
        target=service.index_document,
        args=("idx", IndexDocumentRequest(document_id="new", filename="new.txt", text=text)),
    )
    writer.start()
    seen: list[SearchHit] = []
    try:
        assert committed.wait(30)
        reader = threading.Thread(target=lambda: seen.extend(backend.dense("idx", vector, k=500)))
        reader.start()
        assert lock.asked.wait(30), "the reader did not wait for the carried matrix"
        release.set()
        reader.join(60)
    finally:
        release.set()
        writer.join(60)
    passages = [c for c in store._chunks_of("new") if c.kind is ChunkKind.PASSAGE]
    assert len(passages) > 1
    assert {h.chunk.chunk_id for h in seen if h.chunk.document_id == "new"} >= {c.chunk_id for c in passages}
    assert rebuilds == 0


def test_uploads_and_deletes_sent_together_commit_together_each_with_its_own_answer(
    service: EvidenceService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit over HTTP: requests that arrive while a write commits are committed in one
    transaction; each gets its own response: a 200 with its own status, a 404 for a delete of
    nothing, and a document the store refuses its own 4xx while the others land."""
    from evidence.errors import RequestValidationError

    service.index_document("idx", IndexDocumentRequest(document_id="old", filename="o.txt", text=POLICY_TEXT))
    store = service.backend.index_store("idx")  # type: ignore[attr-defined]
    insert = store._insert_chunks

    def refusing(document: Any, *args: Any) -> None:
        if document.document_id == "bad":  # inside the group's transaction, after its rows began
            raise RequestValidationError("refused by the test", field="text")
        insert(document, *args)

    monkeypatch.setattr(store, "_insert_chunks", refusing)
    generation, batches = store.generation(), store._group.batches
    answers: dict[str, tuple[int, Any]] = {}
    with serving(service) as srv:
        url = f"{srv.url}/v1/indexes/idx/documents"

        def send(name: str, method: str, target: str, payload: Any = None) -> None:
            status, _, body = call(target, method, payload)
            answers[name] = (status, body)

        rest = [
            ("a", "POST", url, doc("a", "Keys rotate every ninety days.")),
            ("b", "POST", url, doc("b", "Access reviews happen quarterly.")),
            ("bad", "POST", url, doc("bad", "A document the store refuses.")),
            ("gone", "DELETE", f"{url}/never-indexed", None),
            ("old", "DELETE", f"{url}/old", None),
        ]
        first = partial(send, "first", "POST", url, doc("first", "Backups run nightly."))
        with grouped(store, monkeypatch, first, [partial(send, *args) for args in rest]) as outcomes:
            assert outcomes == [None] * (1 + len(rest))  # every request was answered
    assert answers["first"][0] == answers["a"][0] == answers["b"][0] == 200
    assert [answers[n][1]["document_id"] for n in ("first", "a", "b")] == ["first", "a", "b"]
    assert answers["bad"][0] == 422 and answers["bad"][1]["error"]["field"] == "text"
    assert answers["gone"][0] == 404
    assert answers["old"][0] == 200 and answers["old"][1]["deleted_chunks"] >= 1
    assert store._group.batches - batches == 2 and store.generation() == generation + 2
    assert {i.document_id for i in store.document_infos()} == {"first", "a", "b"}
    assert store.consistency().ok


# --- no request runs unbounded ------------------------------------------------------------------


class SlowEmbedder(HashingEmbedder):
    """Each call takes `seconds`: embedding that outlives a request's deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.texts = 0

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        time.sleep(self.seconds)
        self.texts += len(texts)
        return super().embed_documents(texts)


def _documents(service: EvidenceService, index: str) -> int:
    try:
        return service.backend.get_index(index).documents
    except IndexNotFoundError:
        return 0  # the index is created with its first write


def test_the_request_deadline_covers_embedding_and_a_retry_resumes(tmp_path: Path) -> None:
    settings = Settings(
        store_dir=tmp_path / "store",
        aws_region=REGION,
        # Generous beside parsing (a busy machine parses this in well under 3 s), short beside
        # embedding (1.5 s a slice of passages, ~7 slices): the deadline falls inside embedding.
        request_deadline_s=3.0,
        passage_tokens=32,
        passage_overlap=4,
    )
    slow = SlowEmbedder(1.5)
    service = EvidenceService(
        settings, embedder=CachedEmbedder(slow, EmbeddingCache(tmp_path / "cache.sqlite3"))
    )
    words = " ".join(f"clause{i} requires control{i % 97} evidence." for i in range(600))
    with serving(service) as srv:
        url = f"{srv.url}/v1/indexes/idx/documents"
        status, headers, answer = call(url, "POST", doc("long", words))
        # Before: the request embedded every passage however long it took.
        assert status == 503 and answer["error"]["code"] == "deadline_exceeded", answer
        assert headers["Retry-After"] == "1"
        assert _documents(service, "idx") == 0  # nothing written
        done_first = slow.texts
        attempts = 1
        while status != 200 and attempts < 20:
            status, _, answer = call(url, "POST", doc("long", words))
            attempts += 1
        assert status == 200 and answer["status"] == "created"
        # Each attempt's vectors were cached: the retries embedded each passage once.
        assert slow.texts == answer["chunks"] and 0 < done_first < answer["chunks"]
    runtime.close()


def test_a_large_upload_is_indexed_in_the_background(tmp_path: Path) -> None:
    settings = Settings(store_dir=tmp_path / "store", aws_region=REGION, async_upload_bytes=2_000)
    service = EvidenceService(settings, embedder=HashingEmbedder())
    configure_uploads(UploadJobs(tmp_path / "store" / "uploads", runtime.get_service, deadline_s=60))
    try:
        with serving(service) as srv:
            base = f"{srv.url}/v1/indexes/idx/documents"
            assert call(base, "POST", doc("small"))[0] == 200  # under the threshold: at once
            big = "Vendor backups are encrypted and tested every quarter. " * 100
            status, headers, accepted = call(base, "POST", doc("big", big))
            assert status == 202 and headers["Location"] == accepted["status_url"]
            assert accepted["document_id"] == "big" and accepted["bytes"] == len(big)
            end = time.monotonic() + 60
            while True:
                status, _, state = call(srv.url + accepted["status_url"])
                assert status == 200
                if state["status"] in {"succeeded", "failed"} or time.monotonic() > end:
                    break
                time.sleep(0.05)
            assert state["status"] == "succeeded" and state["result"]["status"] == "created", state
            status, _, answer = call(
                f"{srv.url}/v1/indexes/idx/retrieve", "POST", {"query": "backups tested quarter"}
            )
            assert answer["hits"][0]["document_id"] == "big"
            assert call(f"{srv.url}/v1/uploads/{'0' * 32}")[0] == 404
            assert call(f"{srv.url}/v1/uploads/nope")[0] == 422
    finally:
        configure_uploads(None)
        runtime.close()


# --- no cross-tenant cache signal ---------------------------------------------------------------


@pytest.mark.parametrize("scope", ["index", "shared"])
def test_the_embedding_cache_is_scoped_by_index(tmp_path: Path, scope: str) -> None:
    inner = GatedEmbedder()
    cache = EmbeddingCache(tmp_path / "store" / "embeddings.sqlite3")
    settings = Settings(store_dir=tmp_path / "store", aws_region=REGION, embedding_cache_scope=scope)
    service = EvidenceService(settings, embedder=CachedEmbedder(inner, cache))
    request = IndexDocumentRequest(document_id="p", filename="p.txt", text=POLICY_TEXT)
    service.index_document("tenant-a", request)
    assert inner.calls == 1
    service.index_document("tenant-b", request)  # the same text, another tenant's index
    # Shared, tenant B's upload came back from A's cached vectors: fast, and so a signal.
    assert inner.calls == (2 if scope == "index" else 1)
    service.delete_index("tenant-a")
    service.index_document("tenant-a", request)
    assert inner.calls == (3 if scope == "index" else 1)  # a deleted index's vectors are gone
    service.close()


def test_a_delete_in_a_fresh_process_drops_the_indexs_cached_vectors(tmp_path: Path) -> None:
    # A process whose first call is a delete has built no embedder: the cache file is still
    # cleared, or the deleted index's vectors would answer its next upload.
    settings = Settings(store_dir=tmp_path / "store", aws_region=REGION)
    inner = GatedEmbedder()
    first = EvidenceService(
        settings, embedder=CachedEmbedder(inner, EmbeddingCache(settings.store_dir / "embeddings.sqlite3"))
    )
    request = IndexDocumentRequest(document_id="p", filename="p.txt", text=POLICY_TEXT)
    first.index_document("tenant-a", request)
    first.close()
    fresh = EvidenceService(settings)
    fresh.delete_index("tenant-a")
    fresh.close()
    again = EvidenceService(
        settings, embedder=CachedEmbedder(inner, EmbeddingCache(settings.store_dir / "embeddings.sqlite3"))
    )
    again.index_document("tenant-a", request)
    assert inner.calls == 2
    again.close()


# --- fair batches -------------------------------------------------------------------------------


def test_batches_take_turns_across_callers(service: EvidenceService) -> None:
    for name in ("big-index", "small-index"):
        service.index_document(
            name, IndexDocumentRequest(document_id="p", filename="p.txt", text=POLICY_TEXT)
        )
    launcher = ThreadLauncher(service.settings.store_dir / "assessments", lambda: service)
    many = [Criterion(id=f"c{i}", question=f"Is data encrypted at rest ({i})?") for i in range(300)]
    launcher.start(
        "a" * 32, AssessmentInput(index="big-index", profile="default", criteria=many, principal="tenant-a")
    )
    one = [Criterion(id="only", question="Is AES-256 used?")]
    launcher.start(
        "b" * 32, AssessmentInput(index="small-index", profile="default", criteria=one, principal="tenant-b")
    )
    end = time.monotonic() + 120
    while launcher.status("b" * 32, "tenant-b").status == "running" and time.monotonic() < end:
        time.sleep(0.02)
    small, big = launcher.status("b" * 32, "tenant-b"), launcher.status("a" * 32, "tenant-a")
    assert small.status == "succeeded" and small.done == 1
    # One batch at a time, B waited for all 300 of A's criteria; in turns, for about one.
    assert big.status == "running" and big.done is not None and big.done < 300
    # A caller may queue MAX_QUEUED batches; the next is refused until one finishes.
    for n in range(ThreadLauncher.MAX_QUEUED - 1):
        launcher.start(
            f"{n:032x}",
            AssessmentInput(index="big-index", profile="default", criteria=many, principal="tenant-a"),
        )
    with pytest.raises(TooManyRequestsError) as refused:
        launcher.start(
            "c" * 32,
            AssessmentInput(index="big-index", profile="default", criteria=many, principal="tenant-a"),
        )
    assert refused.value.status == 429 and refused.value.retry_after_s >= 1
    launcher.start(
        "d" * 32, AssessmentInput(index="small-index", profile="default", criteria=one, principal="tenant-b")
    )
    # The server's shutdown: what is left is reported interrupted at once, and stops running.
    assert ThreadLauncher.stop_all() >= ThreadLauncher.MAX_QUEUED
    stopped = launcher.status("a" * 32, "tenant-a")
    assert stopped.status == "failed" and (stopped.reason or "").startswith("interrupted")


class GatedAuthorizer(Authorizer):
    """Open, but the first check waits for `gate`: a request held between routing and parsing."""

    def __init__(self) -> None:
        super().__init__(None)
        self.armed = True
        self.entered = threading.Event()
        self.gate = threading.Event()

    def check(self, principal: str | None, index: str, access: Access) -> None:
        if self.armed:
            self.armed = False
            self.entered.set()
            assert self.gate.wait(60)
        super().check(principal, index, access)


def test_concurrent_requests_each_get_their_own_answer(service: EvidenceService) -> None:
    """Powertools keeps the current request on a class attribute: resolved concurrently, a
    retrieve was answered for another thread's request (under load, a 422 naming an upload's
    fields). Here a retrieve is held after routing while a plan request is resolved."""
    service.index_document("idx", IndexDocumentRequest(document_id="p", filename="p.txt", text=POLICY_TEXT))
    authorizer = GatedAuthorizer()
    with serving(service) as srv:
        runtime.configure(service=service, settings=service.settings, authorizer=authorizer)
        held: list[Any] = []
        thread = threading.Thread(
            target=lambda: held.append(
                call(f"{srv.url}/v1/indexes/idx/retrieve", "POST", {"query": "AES-256 keys"})
            )
        )
        thread.start()
        try:
            assert authorizer.entered.wait(30)
            status, _, plan = call(f"{srv.url}/v1/plan", "POST", {"query": "Do you use MFA?"})
            assert status == 200 and plan["query"] == "Do you use MFA?"
        finally:
            authorizer.gate.set()
            thread.join(60)
        status, _, answer = held[0]
        assert status == 200 and answer["plan"]["query"] == "AES-256 keys", answer.get("plan")
    runtime.close()


def test_only_the_uploader_reads_an_upload(tmp_path: Path) -> None:
    settings = Settings(store_dir=tmp_path / "store", aws_region=REGION)
    service = EvidenceService(settings, embedder=HashingEmbedder())
    jobs = UploadJobs(tmp_path / "uploads", lambda: service, deadline_s=60)
    try:
        request = IndexDocumentRequest(filename="a.txt", text=POLICY_TEXT)
        accepted = jobs.submit("acme-docs", request, "acme", "a.txt@1")
        end = time.monotonic() + 60
        while (
            jobs.status(accepted.upload_id, "acme").status in {"queued", "running"} and time.monotonic() < end
        ):
            time.sleep(0.02)
        assert jobs.status(accepted.upload_id, "acme").status == "succeeded"
        for other in ("globex", None):
            with pytest.raises(UploadNotFoundError):  # the same answer as an unknown id
                jobs.status(accepted.upload_id, other)
    finally:
        jobs.close()
        service.close()


def test_closing_the_service_closes_the_cache_files_it_opened(tmp_path: Path) -> None:
    # The service's own embedder (built from settings) holds two SQLite files; an embedder passed
    # in is the caller's and stays open.
    settings = Settings(store_dir=tmp_path / "store", aws_region=REGION)
    own = EvidenceService(settings)
    own.index_document("idx", IndexDocumentRequest(document_id="p", filename="p.txt", text=POLICY_TEXT))
    built = own.embedder
    assert isinstance(built, CachedEmbedder)
    own.close()
    with pytest.raises(sqlite3.ProgrammingError):
        built.cache.get_many("m", ["h"])
    lent = CachedEmbedder(GatedEmbedder(), EmbeddingCache(tmp_path / "lent.sqlite3"))
    borrower = EvidenceService(settings, embedder=lent)
    borrower.close()
    assert lent.cache.get_many("m", ["h"]) == {}
