"""`evidence migrate`: embedded store -> OpenSearch (osmem-server), end to end through the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.cli import main
from evidence.config import Settings
from evidence.errors import EmbedderMismatchError
from evidence.migrate import migrate
from evidence.search.embedded import EmbeddedBackend, iter_chunks
from evidence.search.opensearch import OpenSearchBackend
from tests.contract.corpus import DIM, EMBEDDER, corpus, vectors_for

SRC = "vendor-a"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    backend = EmbeddedBackend(tmp_path / "store")
    backend.create_index(SRC, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    backend.upsert(SRC, docs, vectors_for(docs))
    backend.close()
    return tmp_path / "store"


@pytest.fixture
def target(osmem_clone: Any) -> Iterator[OpenSearchBackend]:
    backend = OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint=osmem_clone.url))
    yield backend
    backend.close()


def _cli(
    store: Path, url: str, *extra: str, option: str = "--from-store"
) -> tuple[int, dict[str, Any] | None]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["migrate", option, str(store), "--index", SRC, "--endpoint", url, "--json", *extra])
    lines = out.getvalue().strip().splitlines()
    return code, (json.loads(lines[-1]) if lines else None)


def test_migrate_copies_documents_and_vectors(
    store: Path, target: OpenSearchBackend, osmem_clone: Any
) -> None:
    code, report = _cli(store, osmem_clone.url)
    assert code == 0 and report is not None
    docs = corpus()
    assert (report["documents"], report["created"], report["unchanged"]) == (len(docs), len(docs), 0)
    info = target.get_index(SRC)
    assert (info.embedder_id, info.dimension) == (EMBEDDER, DIM)
    assert (info.documents, info.chunks) == (len(docs), sum(len(d.chunks) for d in docs))
    # vectors copied bit for bit (float32), not re-embedded
    source = EmbeddedBackend(store)
    for doc, vecs in iter_chunks(source, SRC):
        assert vecs is not None
        got = target.vectors(SRC, [c.chunk_id for c in doc.chunks])
        for chunk, row in zip(doc.chunks, vecs, strict=True):
            np.testing.assert_array_equal(got[chunk.chunk_id], row)
        assert target.document_hash(SRC, doc.document_id) == doc.content_hash
    source.close()
    assert target.lexical(SRC, "breaches notified", k=1)[0].chunk.document_id == "incident"


def test_migrate_reads_store_like_every_command(
    store: Path, target: OpenSearchBackend, osmem_clone: Any
) -> None:
    """`--store DIR` names the source store as it does for every other command; the same run
    as `--from-store`."""
    code, report = _cli(store, osmem_clone.url, option="--store")
    assert code == 0 and report is not None
    assert (report["documents"], report["created"]) == (len(corpus()), len(corpus()))
    assert target.get_index(SRC).documents == len(corpus())


def test_migrate_is_resumable(store: Path, target: OpenSearchBackend, osmem_clone: Any) -> None:
    source = EmbeddedBackend(store)

    def interrupted() -> Iterator[Any]:
        for i, item in enumerate(iter_chunks(source, SRC)):
            if i == 3:
                raise KeyboardInterrupt
            yield item

    with pytest.raises(KeyboardInterrupt):
        migrate(source, target, SRC, batch_size=2, documents=interrupted())
    source.close()
    assert target.get_index(SRC).documents == 2  # the first batch made it

    source = EmbeddedBackend(store)
    ticks: list[tuple[int, int | None, str]] = []
    resumed = migrate(source, target, SRC, batch_size=2, progress=lambda *a: ticks.append(a))
    source.close()
    assert (resumed.unchanged, resumed.created) == (2, len(corpus()) - 2)
    n = len(corpus())
    assert ticks == [(2, n, "documents"), (4, n, "documents"), (5, n, "documents")]
    code, report = _cli(store, osmem_clone.url)
    assert code == 0 and report is not None and report["unchanged"] == len(corpus())


def test_migrate_refuses_another_embedder(store: Path, target: OpenSearchBackend, osmem_clone: Any) -> None:
    target.create_index(SRC, embedder_id="titan-v2", dimension=DIM)
    source = EmbeddedBackend(store)
    with pytest.raises(EmbedderMismatchError, match="titan-v2"):
        migrate(source, target, SRC)
    source.close()
    code, _ = _cli(store, osmem_clone.url)
    assert code == 2
    assert target.get_index(SRC).documents == 0  # nothing written


def test_migrate_into_a_new_name_and_bad_usage(
    store: Path, target: OpenSearchBackend, osmem_clone: Any
) -> None:
    code, report = _cli(store, osmem_clone.url, "--target-index", "vendor-a-v2")
    assert code == 0 and report is not None and report["target_index"] == "vendor-a-v2"
    assert target.get_index("vendor-a-v2").documents == len(corpus())
    assert (
        main(["migrate", "--from-store", str(store), "--index", "nope", "--endpoint", osmem_clone.url]) == 2
    )


def test_migrate_carries_the_anchor_vectors(
    tmp_path: Path, target: OpenSearchBackend, osmem_clone: Any
) -> None:
    """An embedded store indexed under `late` (the anchor's late span vectors and heading vectors
    in its embedding cache) migrated to OpenSearch: each passage gets the `anchor_vectors` that
    indexing the same document against OpenSearch keeps (float16), read from the cache, nothing
    embedded (docs/opensearch.md#anchor-vectors)."""
    from evidence.demo import DATA
    from evidence.embed.cache import CachedEmbedder, EmbeddingCache
    from evidence.embed.minilm import MiniLMEmbedder
    from evidence.records import ChunkKind
    from evidence.service import EvidenceService

    minilm = MiniLMEmbedder()
    paths = [DATA / "label" / "lipravex.md"]
    store = tmp_path / "late"
    cache = CachedEmbedder(minilm, EmbeddingCache(store / "embeddings.sqlite3"))
    embedded = EvidenceService(Settings(embed_spans_at_index="late", store_dir=store), embedder=cache)
    assert not embedded.index_paths("label", paths).failed
    embedded.close()
    cache.cache.close()
    # The reference: the same document indexed through the service against OpenSearch.
    settings = Settings(
        embed_spans_at_index="late",
        store_dir=tmp_path / "os",
        backend="opensearch",
        opensearch_endpoint=osmem_clone.url,
    )
    indexed = EvidenceService(settings, embedder=minilm)
    assert not indexed.index_paths("indexed", paths).failed
    indexed.close()

    def kept(index: str) -> dict[str, Any]:
        passages = [h.chunk for h in target.lookup(index, {}, limit=1000, kind=ChunkKind.PASSAGE)]
        assert passages
        got = target.anchor_vectors(index, passages)
        return {
            chunk_id: (
                {q: v.tobytes() for q, v in a.spans.items()},
                {h: v.tobytes() for h, v in a.headings.items()},
            )
            for chunk_id, a in got.items()
        }

    import contextlib
    import io

    argv = ["migrate", "--store", str(store), "--index", "label", "--target-index", "migrated"]
    argv += ["--endpoint", osmem_clone.url, "--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    assert code == 0
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    want, got = kept("indexed"), kept("migrated")
    assert want and sum(len(s) for s, _ in want.values()) > 100
    assert got == want
    assert report["anchor_spans"] == sum(len(s) for s, _ in want.values())
    # Run again: every document unchanged, nothing rewritten.
    with contextlib.redirect_stdout(io.StringIO()) as again:
        assert main(argv) == 0
    assert json.loads(again.getvalue().strip().splitlines()[-1])["anchor_spans"] == 0
    assert kept("migrated") == want


def test_migrate_refuses_other_indexing_settings(
    tmp_path: Path,
    target: OpenSearchBackend,
    osmem_clone: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A store indexed under a section header rule records it (`search.written`); migrating it
    under settings without the rule (its lexical field and the anchor's placement would be
    another rule's) is refused before anything is written, naming the setting and the fix; under
    the store's rule it goes, and the target records it; a store of another rule is then refused
    into that target (docs/opensearch.md#migrating-an-embedded-index)."""
    from evidence.errors import IndexNotFoundError
    from evidence.search.factory import get_backend

    def indexed(name: str, **settings: Any) -> Path:
        backend = get_backend(Settings(store_dir=tmp_path / name, **settings))
        backend.create_index(SRC, embedder_id=EMBEDDER, dimension=DIM)
        docs = corpus()
        backend.upsert(SRC, docs, vectors_for(docs))
        backend.close()
        return tmp_path / name

    headed = indexed("headed", section_header="heading")
    assert EmbeddedBackend(headed).get_index(SRC).extra["written_with"]["section_header"] == "heading"
    capsys.readouterr()
    code, report = _cli(headed, osmem_clone.url)
    err = capsys.readouterr().err
    assert (code, report) == (2, None)
    assert "section_header='heading'" in err and "EVIDENCE_SECTION_HEADER=heading" in err
    with pytest.raises(IndexNotFoundError):
        target.get_index(SRC)  # nothing written, not even the index
    monkeypatch.setenv("EVIDENCE_SECTION_HEADER", "heading")
    code, report = _cli(headed, osmem_clone.url)
    assert code == 0 and report is not None and report["created"] == len(corpus())
    kept = target.get_index(SRC)
    assert kept.extra["written_with"]["section_header"] == "heading"
    assert "embedding_cache_scope" not in kept.extra["written_with"]  # OpenSearch has no cache

    monkeypatch.delenv("EVIDENCE_SECTION_HEADER")
    plain = indexed("plain")
    capsys.readouterr()
    code, report = _cli(plain, osmem_clone.url)
    err = capsys.readouterr().err
    assert (code, report) == (2, None)
    assert f"target index {SRC!r} was written with section_header='heading'" in err
    assert "--target-index" in err
    code, report = _cli(plain, osmem_clone.url, "--target-index", "vendor-a-plain")
    assert code == 0 and report is not None


def test_a_lexical_only_store_migrates_under_another_embedder(
    tmp_path: Path, target: OpenSearchBackend, osmem_clone: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store without vectors (dimension 0, `embed=False`) is compared on its header rule only
    (`search.written.VECTOR_KEYS`): migrating it under another embedder or window copies the same
    documents, and the target's own write check lets them in."""
    from evidence.search.factory import get_backend

    backend = get_backend(Settings(store_dir=tmp_path / "bm25"))
    backend.create_index(SRC, embedder_id="none", dimension=0)
    docs = corpus()
    backend.upsert(SRC, docs, [None] * len(docs))
    backend.close()
    monkeypatch.setenv("EVIDENCE_EMBEDDER", "titan")
    monkeypatch.setenv("EVIDENCE_EMBED_MAX_TOKENS", "128")
    code, report = _cli(tmp_path / "bm25", osmem_clone.url)
    assert code == 0 and report is not None and report["created"] == len(docs)
    assert target.get_index(SRC).dimension == 0


def test_a_store_without_sections_migrates_under_another_header_rule(
    tmp_path: Path,
    target: OpenSearchBackend,
    osmem_clone: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A header rule shapes only chunks with a section, so it is compared as writes compare it
    (docs/opensearch.md#migrating-an-embedded-index): a store none of whose chunks has one goes
    under another rule (the target records the run's), and into a target of another rule while
    neither holds a sectioned chunk; a target that holds one refuses it (the count its own
    `create_index` asks)."""
    from evidence.search.factory import get_backend

    docs = [d for d in corpus() if not any(c.section for c in d.chunks)]
    assert len(docs) >= 2
    backend = get_backend(Settings(store_dir=tmp_path / "plain"))
    backend.create_index(SRC, embedder_id=EMBEDDER, dimension=DIM)
    backend.upsert(SRC, docs, vectors_for(docs))
    backend.close()
    store = tmp_path / "plain"
    assert EmbeddedBackend(store).get_index(SRC).extra["written_with"]["section_header"] == "off"

    monkeypatch.setenv("EVIDENCE_SECTION_HEADER", "heading")
    code, report = _cli(store, osmem_clone.url)
    assert code == 0 and report is not None and report["created"] == len(docs)
    assert target.get_index(SRC).extra["written_with"]["section_header"] == "heading"

    monkeypatch.delenv("EVIDENCE_SECTION_HEADER")  # the store's own rule, the target's other
    code, report = _cli(store, osmem_clone.url)
    assert code == 0 and report is not None and report["unchanged"] == len(docs)

    sectioned = [d for d in corpus() if any(c.section for c in d.chunks)][:1]
    headed = OpenSearchBackend(
        Settings(backend="opensearch", opensearch_endpoint=osmem_clone.url, section_header="heading")
    )
    headed.upsert(SRC, sectioned, vectors_for(sectioned))
    headed.close()
    target.client.indices.refresh(index=SRC)
    capsys.readouterr()
    code, report = _cli(store, osmem_clone.url)
    err = capsys.readouterr().err
    assert (code, report) == (2, None)
    assert f"target index {SRC!r} was written with section_header='heading'" in err


def test_a_section_arriving_while_the_header_rule_was_let_through_is_refused(
    tmp_path: Path, osmem_clone: Any
) -> None:
    """A header rule other than the store's is let through only while the store holds no
    sectioned chunk; a writer of the store's rule may add one while the copy runs. That document
    is refused at its batch (nothing of the batch written), and the next run compares the store as
    it then is: refused before anything is written."""
    from evidence.errors import IndexSettingsMismatchError
    from evidence.search.factory import get_backend
    from evidence.search.written import written_with

    plain_docs = [d for d in corpus() if not any(c.section for c in d.chunks)]
    sectioned = [d for d in corpus() if any(c.section for c in d.chunks)][:1]
    store = tmp_path / "plain"
    writer = get_backend(Settings(store_dir=store))
    writer.create_index(SRC, embedder_id=EMBEDDER, dimension=DIM)
    writer.upsert(SRC, plain_docs, vectors_for(plain_docs))
    source = EmbeddedBackend(store)
    settings = Settings(backend="opensearch", opensearch_endpoint=osmem_clone.url, section_header="heading")
    target = OpenSearchBackend(settings)

    def copied() -> Iterator[tuple[Any, Any]]:
        yield from iter_chunks(source, SRC)
        writer.upsert(SRC, sectioned, vectors_for(sectioned))  # the store's own rule: written
        yield from ((d, v) for d, v in iter_chunks(source, SRC) if d.document_id == sectioned[0].document_id)

    try:
        with pytest.raises(IndexSettingsMismatchError) as err:
            migrate(source, target, SRC, batch_size=1, documents=copied(), written=written_with(settings))
        assert err.value.field == "section_header"
        assert sectioned[0].document_id in err.value.message
        assert target.document_hash(SRC, sectioned[0].document_id) is None
        assert target.document_hash(SRC, plain_docs[0].document_id) == plain_docs[0].content_hash
        with pytest.raises(IndexSettingsMismatchError) as err:
            migrate(source, target, SRC, written=written_with(settings))
        assert f"index {SRC!r} of the store was written with section_header='off'" in err.value.message
    finally:
        writer.close()
        source.close()
        target.close()
