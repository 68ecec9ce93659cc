"""The embedded storage engine through its public surface: `EmbeddedBackend.index_store`."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.errors import EmbedderMismatchError, IndexNotFoundError
from evidence.ingest import chunk_document, parse_text
from evidence.records import ChunkKind, DocumentChunks
from evidence.search.base import Filters
from evidence.search.embedded import EmbeddedBackend, iter_chunks
from evidence.search.embedded_store import IndexStore
from tests.seams import run_together

INDEX = "store"
DIM = 4


def _doc(document_id: str, text: str) -> DocumentChunks:
    parsed = parse_text(text, filename=f"{document_id}.md", fmt="md")
    return chunk_document(parsed, document_id=document_id, source=f"{document_id}.md", metadata={"k": "v"})


def _vectors(doc: DocumentChunks) -> np.ndarray:
    rng = np.random.default_rng(len(doc.chunks))
    vecs = rng.standard_normal((len(doc.chunks), DIM)).astype(np.float32)
    for i, c in enumerate(doc.chunks):
        if c.kind is ChunkKind.SPAN:
            vecs[i] = np.nan  # spans are not embedded
    return vecs


@pytest.fixture
def backend(tmp_path: Path) -> EmbeddedBackend:
    b = EmbeddedBackend(tmp_path)
    b.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    docs = [
        _doc("a", "# Keys\n\nKeys rotate yearly. Access is logged.\n\n- MFA for admins\n"),
        _doc("b", "# Backups\n\nBackups are encrypted. Restores are tested quarterly.\n"),
    ]
    b.upsert(INDEX, docs, [_vectors(d) for d in docs])
    return b


def test_consistency_of_a_written_index(backend: EmbeddedBackend) -> None:
    state = backend.index_store(INDEX).consistency()
    assert state.ok
    assert state.documents == 2 and state.orphan_chunks == 0 and state.pending == 0
    assert state.records[ChunkKind.PASSAGE] == 2 and state.records[ChunkKind.SPAN] >= 5
    assert state.lexical == state.records


def test_consistency_sees_a_lost_inverted_index_until_it_is_resynced(
    backend: EmbeddedBackend, tmp_path: Path
) -> None:
    backend.close()
    shutil.rmtree(tmp_path / "indexes" / INDEX / "lexical" / ChunkKind.SPAN.value)
    reopened = EmbeddedBackend(tmp_path)
    state = reopened.index_store(INDEX).consistency()
    assert not state.ok
    assert state.lexical[ChunkKind.SPAN] == 0 < state.records[ChunkKind.SPAN]
    assert state.pending == 2  # the rebuilt directory journals every document for re-sync
    assert reopened.sync(INDEX) == 2
    assert reopened.index_store(INDEX).consistency().ok


def test_documents_round_trip_with_vectors_only_when_every_chunk_has_one(backend: EmbeddedBackend) -> None:
    docs = list(iter_chunks(backend, INDEX))
    assert [d.document_id for d, _ in docs] == ["a", "b"]
    for doc, vecs in docs:
        assert doc.metadata == {"k": "v"} and doc.chunks
        assert vecs is None  # spans carry no vector
    passage = replace(docs[0][0].chunks[0], chunk_id="c-0", document_id="c")
    passage_only = DocumentChunks("c", "h", "c.md", (passage,), {})
    vec = np.ones((1, DIM), dtype=np.float32)
    backend.upsert(INDEX, [passage_only], [vec])
    (_, got) = next((d, v) for d, v in iter_chunks(backend, INDEX) if d.document_id == "c")
    assert got is not None and np.array_equal(got, vec)


def test_embedder_is_recorded_once_and_refused_when_it_differs(backend: EmbeddedBackend) -> None:
    info = backend.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    assert (info.name, info.embedder_id, info.dimension, info.documents) == (INDEX, "test/e", DIM, 2)
    with pytest.raises(EmbedderMismatchError, match="was built with embedder test/e"):
        backend.create_index(INDEX, embedder_id="other", dimension=DIM)


def _under(tmp_path: Path, **settings: object) -> EmbeddedBackend:
    """A backend writing with the record of `Settings(**settings)` (`search.written`), as
    `search.factory.get_backend` builds it."""
    from evidence.config import Settings
    from evidence.search.written import written_with

    return EmbeddedBackend(tmp_path, written_with=written_with(Settings(**settings)))  # type: ignore[arg-type]


def _before_commit(
    monkeypatch: pytest.MonkeyPatch,
    store: IndexStore,
    wrap: Callable[[Callable[[list[Any]], Sequence[Any]], list[Any]], Sequence[Any]],
) -> None:
    """`wrap(commit, writes)` runs each commit of `store`'s writes instead of `commit(writes)`:
    a seam before the commit's write transaction (the store's group commit holds the bound
    `_commit_group` it was built with, so patching the class method would not reach it)."""
    monkeypatch.setattr(store._group, "_batch", partial(wrap, store._group._batch))


def _record(**settings: object) -> dict[str, str]:
    from evidence.config import Settings
    from evidence.search.written import written_with

    return written_with(Settings(**settings))  # type: ignore[arg-type]


_DOCS = (("a", "# Keys\n\nKeys rotate yearly.\n"), ("b", "# Backups\n\nBackups are tested.\n"))


def test_the_settings_a_write_that_changed_a_document_ran_under_are_recorded(tmp_path: Path) -> None:
    """`IndexInfo.extra["written_with"]` (`search.written`, what `evidence migrate` and the
    stores' write checks compare) is recorded by the first upsert that creates or updates a
    document; an unchanged upsert and a delete record nothing; an index written by a backend
    without one records nothing and is not compared."""
    plain = EmbeddedBackend(tmp_path)
    plain.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    docs = [_doc(i, t) for i, t in _DOCS]
    plain.upsert(INDEX, docs[:1], [_vectors(docs[0])])
    assert "written_with" not in plain.get_index(INDEX).extra
    plain.close()

    def recorded(backend: EmbeddedBackend) -> dict[str, str]:
        return dict(backend.get_index(INDEX).extra["written_with"])

    headed = _under(tmp_path, section_header="path")
    headed.upsert(INDEX, docs[:1], [_vectors(docs[0])])  # unchanged: nothing recorded
    assert "written_with" not in headed.get_index(INDEX).extra
    headed.delete_document(INDEX, "a")  # a delete writes no document
    assert "written_with" not in headed.get_index(INDEX).extra
    headed.upsert(INDEX, docs[1:], [_vectors(docs[1])])
    assert recorded(headed) == _record(section_header="path")
    assert recorded(headed)["section_header_legs"] == "both"
    headed.close()
    again = _under(tmp_path, section_header="path")
    again.upsert(INDEX, docs[:1], [_vectors(docs[0])])
    assert recorded(again) == _record(section_header="path")
    again.close()


@pytest.mark.parametrize(
    ("setting", "stored", "ours"),
    [
        ("section_header", "heading", "off"),
        ("embed_max_tokens", "128", "256"),
        ("embed_long_text", "mean", "first"),
        ("embed_spans_at_index", "off", "late"),
        ("embedding_cache_scope", "shared", "index"),
        ("embedder", "titan", "minilm"),
    ],
)
def test_a_write_under_other_settings_is_refused_with_nothing_written(
    tmp_path: Path, setting: str, stored: str, ours: str
) -> None:
    """A second `evidence index` (a document post, another process) under another window,
    long-text rule, header rule, span-vector rule, cache scope or embedder would mix documents
    written under two settings in one index: refused (409 `index_settings_mismatch`, `field` the
    setting) before anything is written, on `upsert` and on `create_index` (which `evidence index`
    calls before embedding). An embedder whose model id differs is `embedder_mismatch` first."""
    from evidence.errors import IndexSettingsMismatchError

    first = _under(tmp_path, **{setting: stored})
    first.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    docs = [_doc(i, t) for i, t in _DOCS]
    first.upsert(INDEX, docs[:1], [_vectors(docs[0])])
    first.close()
    second = _under(tmp_path, **{setting: ours})
    with pytest.raises(IndexSettingsMismatchError) as err:
        second.upsert(INDEX, docs[1:], [_vectors(docs[1])])
    assert (err.value.status, err.value.code, err.value.field) == (409, "index_settings_mismatch", setting)
    message = err.value.message
    assert f"{setting}={stored!r}" in message and f"{setting}={ours!r}" in message
    assert f"EVIDENCE_{setting.upper()}={stored}" in message
    assert f"evidence delete --index {INDEX} --all" in message and "Nothing was written" in message
    assert (second.get_index(INDEX).documents, second.document_hash(INDEX, "b")) == (1, None)
    with pytest.raises(IndexSettingsMismatchError):
        second.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    with pytest.raises(IndexSettingsMismatchError):  # a refusal is not remembered as checked
        second.upsert(INDEX, docs[1:], [_vectors(docs[1])])
    assert second.get_index(INDEX).extra["written_with"][setting] == stored
    second.close()


def test_an_index_without_a_record_is_written_and_gets_one(tmp_path: Path) -> None:
    """An index written before records were kept (the prepared stores) is not compared: written
    as before, and recorded at its first write that changes a document; from then on compared."""
    from evidence.errors import IndexSettingsMismatchError

    old = EmbeddedBackend(tmp_path)
    old.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    docs = [_doc(i, t) for i, t in _DOCS]
    old.upsert(INDEX, docs[:1], [_vectors(docs[0])])
    old.close()
    headed = _under(tmp_path, section_header="heading")
    headed.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    assert [r.status for r in headed.upsert(INDEX, docs[:1], [_vectors(docs[0])])] == ["unchanged"]
    assert "written_with" not in headed.get_index(INDEX).extra
    plain = _under(tmp_path)  # read again at its next write: not taken as checked while unrecorded
    plain.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    assert [r.status for r in headed.upsert(INDEX, docs[1:], [_vectors(docs[1])])] == ["created"]
    assert headed.get_index(INDEX).extra["written_with"]["section_header"] == "heading"
    with pytest.raises(IndexSettingsMismatchError):
        plain.upsert(INDEX, docs[1:], [_vectors(docs[1])])
    headed.close()
    plain.close()


def test_a_lexical_only_index_is_compared_without_the_vector_settings(tmp_path: Path) -> None:
    """An index without vectors (dimension 0, `embed=False`) is compared on the header rule only
    (`written.VECTOR_KEYS`): a BM25 writer with another embedder, window or cache scope writes the
    same documents; another header rule is still refused."""
    from evidence.errors import IndexSettingsMismatchError

    docs = [_doc(i, t) for i, t in _DOCS]
    first = _under(tmp_path)
    first.create_index(INDEX, embedder_id="none", dimension=0)
    first.upsert(INDEX, docs[:1], [None])
    first.close()
    other = _under(
        tmp_path,
        embedder="titan",
        embed_max_tokens=128,
        embed_long_text="mean",
        embedding_cache_scope="shared",
    )
    other.create_index(INDEX, embedder_id="none", dimension=0)
    assert [r.status for r in other.upsert(INDEX, docs[1:], [None])] == ["created"]
    other.close()
    headed = _under(tmp_path, section_header="heading")
    with pytest.raises(IndexSettingsMismatchError) as err:
        headed.create_index(INDEX, embedder_id="none", dimension=0)
    assert err.value.field == "section_header"
    headed.close()


def test_the_record_is_read_once_per_index_until_the_index_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison reads the index's record once per backend: later writes read no record
    (one `info` read for three upserts); `delete_index` forgets the check."""
    from evidence.search.embedded_store import IndexStore

    writer = _under(tmp_path)
    writer.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    docs = [_doc(i, t) for i, t in _DOCS]
    writer.upsert(INDEX, docs[:1], [_vectors(docs[0])])  # recorded; not yet checked (none before)
    reads: list[str] = []
    real = IndexStore.info

    def counted(self: IndexStore, key: str, db: object = None) -> str | None:
        if key == "written_with" and db is None:
            reads.append(key)
        return real(self, key, db)  # type: ignore[arg-type]

    monkeypatch.setattr(IndexStore, "info", counted)
    for doc in [*docs, docs[0]]:
        writer.upsert(INDEX, [doc], [_vectors(doc)])
    assert reads == ["written_with"]
    writer.delete_index(INDEX)
    writer.create_index(INDEX, embedder_id="test/e", dimension=DIM)  # new: no record, read
    writer.upsert(INDEX, docs[:1], [_vectors(docs[0])])  # still none: read again
    assert len(reads) == 3
    writer.close()


def test_two_first_writers_of_other_settings_racing_into_an_unrecorded_index_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers (two backends: two SQLite connections, as two processes) under different
    header rules both read "no record" before either commits (held at a barrier at the commit);
    the record is compared again and written under the commit's write lock, so the second to
    commit is refused with nothing written, and the index holds only the first's documents and
    record."""
    import threading

    from evidence.errors import IndexSettingsMismatchError

    docs = {"off": _doc("a", "# Keys\n\nKeys rotate yearly.\n"), "heading": _doc("b", "# B\n\nBackups.\n")}
    writers = {rule: _under(tmp_path, section_header=rule) for rule in docs}
    for writer in writers.values():
        writer.create_index(INDEX, embedder_id="test/e", dimension=DIM)  # no record yet: passes
    both_checked = threading.Barrier(2, timeout=30)

    def held(commit: Callable[[list[object]], Sequence[object]], writes: list[object]) -> Sequence[object]:
        both_checked.wait()  # each writer has passed the backend's early check
        return commit(writes)

    for writer in writers.values():
        _before_commit(monkeypatch, writer.index_store(INDEX), held)
    outcomes = run_together(
        {rule: partial(writers[rule].upsert, INDEX, [docs[rule]], [_vectors(docs[rule])]) for rule in docs}
    )
    refused = [rule for rule, o in outcomes.items() if isinstance(o, IndexSettingsMismatchError)]
    assert len(outcomes) == 2 and len(refused) == 1, outcomes
    (won,) = set(docs) - set(refused)
    monkeypatch.undo()
    reader = EmbeddedBackend(tmp_path)
    assert [d.document_id for d in reader.list_documents(INDEX)] == [docs[won].document_id]
    assert reader.get_index(INDEX).extra["written_with"]["section_header"] == won
    for writer in [*writers.values(), reader]:
        writer.close()


def test_a_header_rule_change_is_written_into_an_index_none_of_whose_chunks_has_a_section(
    tmp_path: Path,
) -> None:
    """While no chunk of an index has a section (BEIR/JSONL records), the header is empty under
    every rule, so a writer under another rule is not refused: its write records its rule, and
    the index reads back whole. Once a sectioned chunk is in, the other rule is refused again."""
    from evidence.errors import IndexSettingsMismatchError

    plain = {i: _doc(i, f"Record {i} says keys rotate yearly.\n") for i in ("a", "b")}
    off = _under(tmp_path)
    off.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    off.upsert(INDEX, [plain["a"]], [_vectors(plain["a"])])
    heading = _under(tmp_path, section_header="heading")
    heading.create_index(INDEX, embedder_id="test/e", dimension=DIM)  # not refused
    assert [r.status for r in heading.upsert(INDEX, [plain["b"]], [_vectors(plain["b"])])] == ["created"]
    sectioned = _doc("c", "# Keys\n\nKeys rotate yearly.\n")
    heading.upsert(INDEX, [sectioned], [_vectors(sectioned)])
    reader = EmbeddedBackend(tmp_path)
    assert reader.get_index(INDEX).extra["written_with"]["section_header"] == "heading"
    assert [d.document_id for d in reader.list_documents(INDEX)] == ["a", "b", "c"]
    assert {h.chunk.document_id for h in reader.lexical(INDEX, "rotate yearly", k=5)} == {"a", "b", "c"}
    again = _under(tmp_path)
    with pytest.raises(IndexSettingsMismatchError) as refused:
        again.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    assert refused.value.field == "section_header"
    for writer in (off, heading, reader, again):
        writer.close()


@pytest.mark.parametrize("first", ["sectioned", "rule change"])
def test_a_sectioned_write_and_a_header_rule_change_racing_are_decided_under_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """Two writers (two backends, as two processes) past their early checks on an index recorded
    under `off` with no sectioned chunk: one writes a sectioned document under `off`, the other a
    plain one under `heading` (a rule change). The commits run one after the other in the order
    `first`; whether the index holds a sectioned chunk is read inside each commit's transaction,
    so a rule change after the sectioned write is refused, and in either order every sectioned
    chunk was written under the rule the index records."""
    import threading

    from evidence.errors import IndexSettingsMismatchError

    seed = _doc("a", "Record a says keys rotate yearly.\n")
    setup = _under(tmp_path)
    setup.create_index(INDEX, embedder_id="test/e", dimension=DIM)
    setup.upsert(INDEX, [seed], [_vectors(seed)])
    docs = {"sectioned": _doc("s", "# Keys\n\nKeys rotate yearly.\n"), "rule change": _doc("p", "Plain.\n")}
    writers = {"sectioned": _under(tmp_path), "rule change": _under(tmp_path, section_header="heading")}
    for writer in writers.values():
        writer.create_index(INDEX, embedder_id="test/e", dimension=DIM)  # both pass the early check
    both_checked = threading.Barrier(2, timeout=30)
    first_done = threading.Event()

    def held(
        key: str, commit: Callable[[list[object]], Sequence[object]], writes: list[object]
    ) -> Sequence[object]:
        both_checked.wait()
        if key != first:
            assert first_done.wait(30)
        try:
            return commit(writes)
        finally:
            if key == first:
                first_done.set()

    for key, writer in writers.items():
        _before_commit(monkeypatch, writer.index_store(INDEX), partial(held, key))
    outcomes = run_together(
        {key: partial(writers[key].upsert, INDEX, [docs[key]], [_vectors(docs[key])]) for key in docs}
    )
    monkeypatch.undo()
    reader = EmbeddedBackend(tmp_path)
    recorded = reader.get_index(INDEX).extra["written_with"]["section_header"]
    held_ids = [d.document_id for d in reader.list_documents(INDEX)]
    if first == "sectioned":
        assert isinstance(outcomes["rule change"], IndexSettingsMismatchError), outcomes
        assert outcomes["rule change"].field == "section_header"
        assert (recorded, held_ids) == ("off", ["a", "s"])
    else:  # the rule changed while no chunk had a section; the sectioned write changes it back
        assert all(isinstance(o, list) for o in outcomes.values()), outcomes
        assert (recorded, held_ids) == ("off", ["a", "p", "s"])
    for writer in [setup, *writers.values(), reader]:
        writer.close()


def test_two_first_writers_of_other_models_racing_into_a_new_index_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers (two backends: two SQLite connections, as two processes) of two models of one
    dimension under the same settings record both read "no embedder recorded" (held at a barrier
    after that read); the embedder is compared and recorded in one write transaction, so the
    second is refused before it embeds and writes nothing: the index records the first's model
    and holds only its document."""
    import threading

    from evidence.search.store_records import RecordStore

    docs = {"test/e": _doc("a", "Keys rotate yearly.\n"), "test/other": _doc("b", "Backups run nightly.\n")}
    writers = {model: _under(tmp_path) for model in docs}
    for writer in writers.values():
        writer.index_store(INDEX, create=True)  # the files exist; no embedder recorded yet
    both_read = threading.Barrier(2, timeout=30)
    real = RecordStore._record_embedder

    def held(self: RecordStore, embedder_id: str, dimension: int) -> None:
        both_read.wait()  # each writer read "no record" outside the write lock
        real(self, embedder_id, dimension)

    monkeypatch.setattr(RecordStore, "_record_embedder", held)

    def write(model: str) -> object:
        writers[model].create_index(INDEX, embedder_id=model, dimension=DIM)
        return writers[model].upsert(INDEX, [docs[model]], [_vectors(docs[model])])

    outcomes = run_together({model: partial(write, model) for model in docs})
    refused = [model for model, o in outcomes.items() if isinstance(o, EmbedderMismatchError)]
    assert len(outcomes) == 2 and len(refused) == 1, outcomes
    (won,) = set(docs) - set(refused)
    monkeypatch.undo()
    reader = EmbeddedBackend(tmp_path)
    assert reader.get_index(INDEX).embedder_id == won
    assert [d.document_id for d in reader.list_documents(INDEX)] == [docs[won].document_id]
    for writer in [*writers.values(), reader]:
        writer.close()


def test_two_first_openers_of_other_analyzers_analyse_a_new_index_one_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two backends (two SQLite connections, as two processes) whose analyzer settings differ
    open one new index, both having read "no analysis recorded" (held at a barrier after that
    read): the analysis is compared and recorded in one write transaction, so the second takes
    the first's, and both analyse the index's documents and queries the same way."""
    import threading

    from evidence.search.analysis import AnalyzerConfig
    from evidence.search.embedded_store import IndexStore

    configs = {"stop": AnalyzerConfig(), "nostop": AnalyzerConfig(stopwords=frozenset())}
    openers = {key: EmbeddedBackend(tmp_path, analyzer=config) for key, config in configs.items()}
    both_read = threading.Barrier(2, timeout=30)
    real = IndexStore._record_analyzer

    def held(self: IndexStore, name: str) -> str:
        both_read.wait()  # each opener read "no analysis recorded" outside the write lock
        return real(self, name)

    monkeypatch.setattr(IndexStore, "_record_analyzer", held)
    opened = run_together({key: partial(openers[key].index_store, INDEX, create=True) for key in configs})
    stores = [o for o in opened.values() if isinstance(o, IndexStore)]
    assert len(stores) == 2, opened
    recorded = stores[0].info("analyzer")
    assert recorded in {c.name for c in configs.values()}
    assert [s.analyzer.config.name for s in stores] == [recorded, recorded]
    for opener in openers.values():
        opener.close()


def test_index_store_of_a_missing_index(backend: EmbeddedBackend) -> None:
    with pytest.raises(IndexNotFoundError):
        backend.index_store("absent")
    with pytest.raises(IndexNotFoundError):
        iter_chunks(backend, "absent")


def _blob_lengths(backend: EmbeddedBackend) -> set[int]:
    db = backend.index_store(INDEX)._db
    return {int(n) for (n,) in db.execute("SELECT LENGTH(vector) FROM chunks WHERE vector IS NOT NULL")}


def _passage_vectors(backend: EmbeddedBackend) -> dict[str, np.ndarray]:
    store = backend.index_store(INDEX)
    ids = [r[0] for r in store._db.execute("SELECT chunk_id FROM chunks WHERE vector IS NOT NULL")]
    return {cid: np.asarray(v) for cid, v in store.vectors(ids).items()}


def test_vectors_are_stored_as_float16_and_read_back_as_float32(backend: EmbeddedBackend) -> None:
    assert _blob_lengths(backend) == {2 * DIM}
    assert backend.index_store(INDEX)._db.execute("PRAGMA page_size").fetchone()[0] == 16_384
    got = _passage_vectors(backend)
    assert got and all(v.dtype == np.float32 for v in got.values())
    huge = np.full((1, DIM), 1e6, dtype=np.float32)  # past float16's range: kept float32, exactly
    passage = replace(next(iter_chunks(backend, INDEX))[0].chunks[0], chunk_id="h-0", document_id="h")
    backend.upsert(INDEX, [DocumentChunks("h", "hh", "h.md", (passage,), {})], [huge])
    assert _blob_lengths(backend) == {2 * DIM, 4 * DIM}
    assert np.array_equal(backend.index_store(INDEX).vectors(["h-0"])["h-0"], huge[0])
    (hit,) = backend.dense(INDEX, np.ones(DIM, dtype=np.float32), k=1)
    assert hit.chunk.chunk_id == "h-0"  # both formats scanned together


def test_a_store_of_float32_vectors_opens_and_converts_in_place(
    backend: EmbeddedBackend, tmp_path: Path
) -> None:
    """A store written before float16 (float32 blobs, no `vector_format`), here caught half-way
    through its conversion as a crash would leave it: it opens, reads both, converts the rest."""
    before = _passage_vectors(backend)
    query = np.asarray(next(iter(before.values())))
    expected = [(h.chunk.chunk_id, h.score) for h in backend.dense(INDEX, query, k=5)]
    store = backend.index_store(INDEX)
    rows = store._db.execute(
        "SELECT rowid, vector FROM chunks WHERE vector IS NOT NULL ORDER BY rowid"
    ).fetchall()
    legacy = [(np.frombuffer(b, dtype=np.float16).astype(np.float32).tobytes(), r) for r, b in rows[1:]]
    store._db.executemany("UPDATE chunks SET vector = ? WHERE rowid = ?", legacy)  # the first stays converted
    store._db.execute("DELETE FROM info WHERE key = 'vector_format'")
    generation = store.generation()
    backend.close()
    assert len(legacy) >= 1

    reopened = EmbeddedBackend(tmp_path)
    store = reopened.index_store(INDEX)
    assert _blob_lengths(reopened) == {2 * DIM}
    assert store.info("vector_format") == "f16" and store.generation() == generation + 1
    after = _passage_vectors(reopened)
    assert after.keys() == before.keys()
    assert all(np.array_equal(after[k], before[k]) for k in before)  # float16 values were kept exactly
    got = [(h.chunk.chunk_id, h.score) for h in reopened.dense(INDEX, query, k=5)]
    assert [c for c, _ in got] == [c for c, _ in expected]
    assert reopened.index_store(INDEX).convert_vectors() == 0  # once


def test_mixed_blobs_decode_to_one_matrix() -> None:
    from evidence.search.store_dense import decode_vectors

    a = np.arange(DIM, dtype=np.float32) / 8
    blobs = [a.astype(np.float16).tobytes(), a.tobytes()]
    np.testing.assert_array_equal(decode_vectors(blobs, DIM), np.stack([a, a]))
    assert decode_vectors(blobs, DIM, np.float16).dtype == np.float16
    assert decode_vectors([], DIM).shape == (0, DIM)


def test_a_delete_during_a_bulk_load_leaves_the_inverted_index_at_once(backend: EmbeddedBackend) -> None:
    # A bulk load defers the lexical commits of its upserts; a delete never waited for it: the
    # deleted document is gone from BM25 when the call returns (group commit kept this).
    assert any(h.chunk.document_id == "b" for h in backend.lexical(INDEX, "backups encrypted", k=5))
    with backend.bulk(INDEX):
        assert backend.delete_document(INDEX, "b") > 0
        assert backend.index_store(INDEX).consistency().pending == 0
        assert not any(h.chunk.document_id == "b" for h in backend.lexical(INDEX, "backups encrypted", k=5))


def test_described_counts_follow_every_write(backend: EmbeddedBackend, tmp_path: Path) -> None:
    """`describe` keeps its counts per write generation: a write here, an unchanged upsert, and a
    write through another backend on the same store (another process's) each show at once."""
    first = backend.get_index(INDEX)
    assert first.documents == 2 and backend.get_index(INDEX) == first
    c = _doc("c", "# Audit\n\nAudits run yearly.\n")
    backend.upsert(INDEX, [c], [_vectors(c)])
    after = backend.get_index(INDEX)
    assert (after.documents, after.chunks) == (3, first.chunks + len(c.chunks))
    backend.upsert(INDEX, [c], [_vectors(c)])  # unchanged: no new generation, the same counts
    assert backend.get_index(INDEX) == after
    other = EmbeddedBackend(tmp_path)
    other.delete_document(INDEX, "a")
    gone = other.get_index(INDEX)
    assert backend.get_index(INDEX) == gone and gone.documents == 2
    other.close()


@pytest.mark.parametrize("term_query_max", [0, 256])
def test_lexical_filters_as_term_queries_or_a_term_set_find_the_same_hits(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch, term_query_max: int
) -> None:
    from evidence.search import store_lexical

    every = backend.lexical(INDEX, "keys backups encrypted logged", k=100, kind=None)
    spans = [h.chunk.chunk_id for h in every if h.chunk.kind is ChunkKind.SPAN]
    assert len(spans) >= 3
    cases: list[tuple[Filters, ChunkKind | None]] = [
        ({"chunk_id": [*spans[:2], "absent:s0"]}, None),
        ({"document_id": ["b", "absent"]}, ChunkKind.PASSAGE),
        ({"k": ["v", "w"], "document_id": "a"}, None),
        ({"chunk_id": []}, None),
    ]
    # The term-set path (TERM_QUERY_MAX = 0) is the reference: the same hits, in the same order,
    # with the same scores, whichever form a filter takes.
    monkeypatch.setattr(store_lexical, "TERM_QUERY_MAX", 0)
    want = [
        backend.lexical(INDEX, "keys backups encrypted logged", k=50, filters=f, kind=kd) for f, kd in cases
    ]
    assert want[0] and want[1] and want[2] and not want[3]
    assert {h.chunk.chunk_id for h in want[0]} <= set(spans)
    monkeypatch.setattr(store_lexical, "TERM_QUERY_MAX", term_query_max)
    got = [
        backend.lexical(INDEX, "keys backups encrypted logged", k=50, filters=f, kind=kd) for f, kd in cases
    ]
    assert [[(h.chunk.chunk_id, h.score) for h in hits] for hits in got] == [
        [(h.chunk.chunk_id, h.score) for h in hits] for hits in want
    ]
