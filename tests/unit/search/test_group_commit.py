"""Group commit in the embedded store (`group_commit.py`, `IndexStore._commit_group`): writes
that arrive while one commits are committed together, each caller gets its own outcome, a
failing write is rolled back alone, and the carried caches equal a reload from disk.

The first write is held inside its commit on an Event; the others are started and the test
waits until the store has queued them all, so the grouping does not depend on timing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.errors import RequestValidationError
from evidence.records import ChunkKind, DocumentChunks
from evidence.search.embedded import EmbeddedBackend, IndexStore
from evidence.search.group_commit import GroupCommit
from tests.unit.search.groupkit import grouped, wait_for
from tests.unit.search.storekit import DIM, doc, vectors

INDEX = "store"


def _doc(document_id: str, text: str) -> DocumentChunks:
    return doc(document_id, text, {"k": document_id})


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend(tmp_path)
    b.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    docs = [
        _doc("a", "# Keys\n\nKeys rotate yearly. Access is logged.\n"),
        _doc("b", "# Backups\n\nRestores are tested.\n"),
    ]
    b.upsert(INDEX, docs, [vectors(d) for d in docs])
    b.dense(INDEX, np.ones(DIM, dtype=np.float32), k=5)  # the dense matrix is loaded: writes carry it
    yield b
    b.close()


def _upsert(backend: EmbeddedBackend, doc: DocumentChunks) -> Callable[[], Any]:
    return lambda: backend.upsert(INDEX, [doc], [vectors(doc)])


def _carried_equals_reload(store: IndexStore) -> None:
    carried = store._dense
    assert carried is not None and carried.generation == store.generation()
    fresh = store._load_dense()
    assert sorted(carried.rowids.tolist()) == sorted(fresh.rowids.tolist())
    by_row = dict(zip(fresh.rowids.tolist(), fresh.matrix, strict=True))
    for rowid, row in zip(carried.rowids.tolist(), carried.matrix, strict=True):
        assert np.array_equal(row, by_row[rowid])


def test_writes_queued_behind_a_commit_are_committed_as_one_group(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.index_store(INDEX)
    generation, batches = store.generation(), store._group.batches
    a_chunks = len(store._chunks_of("a"))
    c, d, e = (_doc(x, f"# {x}\n\nPolicy {x} is reviewed every quarter by the board.\n") for x in "cde")
    rest = [_upsert(backend, d), _upsert(backend, e), lambda: backend.delete_document(INDEX, "a")]
    with grouped(store, monkeypatch, _upsert(backend, c), rest) as outcomes:
        pass
    (rc,), (rd,), (re_,), deleted = outcomes
    assert (rc.document_id, rc.status) == ("c", "created")
    assert (rd.document_id, rd.status) == ("d", "created")
    assert (re_.document_id, re_.status) == ("e", "created")
    assert deleted == a_chunks > 0
    # Two commits for four writes: the first alone, the three queued behind it together.
    assert store._group.batches - batches == 2
    assert store.generation() == generation + 2
    assert {i.document_id for i in store.document_infos()} == {"b", "c", "d", "e"}
    assert store.consistency().ok
    _carried_equals_reload(store)
    hits = {h.chunk.document_id for h in backend.lexical(INDEX, "policy reviewed quarter", k=10)}
    assert hits == {"c", "d", "e"}


def test_a_failing_write_in_a_group_fails_alone(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.index_store(INDEX)
    insert = store._insert_chunks

    def refusing(doc: DocumentChunks, *args: Any) -> None:
        if doc.document_id == "bad":  # after its document and metadata rows are written
            raise RequestValidationError("this document is refused", field="text")
        insert(doc, *args)

    monkeypatch.setattr(store, "_insert_chunks", refusing)
    c, d, bad = (
        _doc(x, f"# {x}\n\nPolicy {x} is reviewed every quarter by the board.\n") for x in ("c", "d", "bad")
    )
    rest = [_upsert(backend, d), _upsert(backend, bad), lambda: backend.delete_document(INDEX, "missing")]
    with grouped(store, monkeypatch, _upsert(backend, c), rest) as outcomes:
        pass
    assert outcomes[1][0].status == "created"
    assert isinstance(outcomes[2], RequestValidationError) and outcomes[2].field == "text"
    assert outcomes[3] == 0  # a delete of nothing: its own answer, the others still land
    assert {i.document_id for i in store.document_infos()} == {"a", "b", "c", "d"}
    db = store._db
    for table in ("documents", "chunks", "doc_meta", "lexical_pending"):
        assert db.execute(f"SELECT COUNT(*) FROM {table} WHERE document_id = 'bad'").fetchone()[0] == 0
    assert store.consistency().ok
    _carried_equals_reload(store)


def test_a_document_written_twice_in_one_group_leaves_its_last_version(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written, replaced and deleted within one transaction: SQLite may hand a deleted rowid out
    again, and the carried matrix must hold exactly the rows that stayed."""
    store = backend.index_store(INDEX)
    v1 = _doc("x", "# X\n\nFirst version of the travel policy.\n")
    v2 = _doc("x", "# X\n\nSecond version of the travel policy, with a longer second sentence.\n")
    y = _doc("y", "# Y\n\nA document indexed and deleted in one group.\n")
    c = _doc("c", "# C\n\nHeld in its commit.\n")
    rest = [
        _upsert(backend, v1),
        _upsert(backend, y),
        _upsert(backend, v2),
        lambda: backend.delete_document(INDEX, "y"),
    ]
    with grouped(store, monkeypatch, _upsert(backend, c), rest) as outcomes:
        pass
    assert [o[0].status for o in outcomes[1:4]] == ["created", "created", "updated"]
    assert outcomes[4] > 0
    assert {i.document_id for i in store.document_infos()} == {"a", "b", "c", "x"}
    assert {ch.text for ch in store._chunks_of("x") if ch.kind is ChunkKind.PASSAGE} == {
        ch.text for ch in v2.chunks if ch.kind is ChunkKind.PASSAGE
    }
    assert store.consistency().ok
    _carried_equals_reload(store)


def test_a_batch_that_fails_whole_fails_every_caller() -> None:
    """A failure of the batch itself (a full disk rolls the whole transaction back) reaches
    every caller in it, and the next caller leads a batch of its own."""
    entered, release = threading.Event(), threading.Event()
    calls: list[list[int]] = []

    def batch(items: list[int]) -> list[int | BaseException]:
        calls.append(items)
        if items == [0]:
            entered.set()
            assert release.wait(30)
            return [0]
        if 99 in items:
            raise OSError(28, "No space left on device")
        return [i * 10 for i in items]

    group: GroupCommit[int, int] = GroupCommit(batch)
    outcomes: dict[int, Any] = {}

    def run(i: int) -> None:
        try:
            outcomes[i] = group.submit(i)
        except OSError as exc:
            outcomes[i] = exc

    first = threading.Thread(target=run, args=(0,))
    first.start()
    assert entered.wait(30)
    others = [threading.Thread(target=run, args=(i,)) for i in (1, 99)]
    for t in others:
        t.start()
    wait_for(lambda: group.waiting() == 2, "two items to queue")
    release.set()
    for t in [first, *others]:
        t.join(30)
    assert outcomes[0] == 0
    assert isinstance(outcomes[1], OSError) and outcomes[1] is outcomes[99]
    assert group.submit(2) == 20
    assert sorted(map(sorted, calls)) == [[0], [1, 99], [2]]
