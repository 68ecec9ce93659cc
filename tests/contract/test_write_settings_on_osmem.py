"""The OpenSearch write path refuses an index created under other indexing settings
(`_meta.written_with`, `search.written`): documents written under another header rule, window or
span-vector rule would not match the index's others (docs/opensearch.md#indexing-settings-of-an-index).
Over real HTTP against osmem-server."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from evidence.config import Settings
from evidence.errors import IndexSettingsMismatchError
from evidence.search import opensearch_bodies as bodies
from evidence.search.opensearch import OpenSearchBackend
from tests.contract.corpus import DIM, EMBEDDER, corpus, vectors_for
from tests.s3kit import OneObjectS3
from tests.seams import run_together

INDEX = "written-with"


@pytest.fixture
def url(osmem_clone: Any) -> str:
    return str(osmem_clone.url)


@pytest.fixture
def plain(url: str) -> Iterator[OpenSearchBackend]:
    """A writer under the default settings (no section header rule)."""
    backend = OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint=url), max_retries=0)
    yield backend
    backend.close()


def _headed(url: str) -> OpenSearchBackend:
    settings = Settings(backend="opensearch", opensearch_endpoint=url, section_header="heading")
    return OpenSearchBackend(settings, max_retries=0)


def _windowed(url: str) -> OpenSearchBackend:
    """A writer under another passage window: a setting every document's vectors depend on (the
    header rule, by contrast, shapes only sectioned chunks)."""
    settings = Settings(backend="opensearch", opensearch_endpoint=url, embed_max_tokens=128)
    return OpenSearchBackend(settings, max_retries=0)


def test_an_index_of_other_settings_is_refused_with_nothing_written(
    url: str, plain: OpenSearchBackend
) -> None:
    headed = _headed(url)
    headed.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    # The writer's first contact is the write itself (an indexer Lambda's warm backend): refused,
    # the batch holding sectioned chunks (which another header rule would have written otherwise).
    with pytest.raises(IndexSettingsMismatchError) as err:
        plain.upsert(INDEX, docs, vectors_for(docs))
    assert err.value.status == 409 and err.value.code == "index_settings_mismatch"
    assert err.value.field == "section_header"
    assert "section_header='heading'" in err.value.message
    assert "EVIDENCE_SECTION_HEADER=heading" in err.value.message
    info = plain.get_index(INDEX)
    assert (info.documents, info.chunks) == (0, 0)  # nothing written
    assert all(plain.document_hash(INDEX, d.document_id) is None for d in docs)
    # `evidence index` / a document post ensure the index first: refused there, before embedding,
    # once the index holds a sectioned chunk (its documents are not known yet).
    headed.upsert(INDEX, docs[:1], vectors_for(docs[:1]))
    headed.close()
    chunks = plain.get_index(INDEX).chunks
    with pytest.raises(IndexSettingsMismatchError):
        plain.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    # Refused again on the next write (a refusal is not remembered as checked).
    with pytest.raises(IndexSettingsMismatchError):
        plain.upsert(INDEX, docs[1:2], vectors_for(docs[1:2]))
    assert plain.get_index(INDEX).chunks == chunks


def test_a_header_rule_alone_refuses_only_sectioned_chunks_and_the_record_stays(
    url: str, plain: OpenSearchBackend
) -> None:
    """A writer under another header rule only: its chunks without a section (JSONL records) are
    the same under every rule and are written, the index's record unchanged; a batch holding a
    sectioned chunk is refused, whatever the index holds (the record is never rewritten, so no
    writer's read of it goes stale); `create_index` refuses it once the index holds a sectioned
    chunk, and lets it through while it holds none (the batch decides)."""
    docs = {d.document_id: d for d in corpus()}
    plain_docs = [docs["followup-r1"], docs["followup-r2"]]
    assert not any(c.section for d in plain_docs for c in d.chunks)
    headed = _headed(url)
    headed.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    headed.upsert(INDEX, plain_docs[:1], vectors_for(plain_docs[:1]))
    try:
        plain.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)  # no sectioned chunk: passes
        results = plain.upsert(INDEX, plain_docs[1:], vectors_for(plain_docs[1:]))
        assert [r.status for r in results] == ["created"]
        info = plain.get_index(INDEX)
        assert info.extra["written_with"]["section_header"] == "heading"
        assert info.documents == 2
        assert plain.document_hash(INDEX, "followup-r2") == plain_docs[1].content_hash
        with pytest.raises(IndexSettingsMismatchError) as err:
            plain.upsert(INDEX, [docs["policy"]], vectors_for([docs["policy"]]))
        assert err.value.field == "section_header"
        assert plain.document_hash(INDEX, "policy") is None
        headed.upsert(INDEX, [docs["incident"]], vectors_for([docs["incident"]]))
        late = OpenSearchBackend(plain.settings, max_retries=0)  # another process, reads afresh
        with pytest.raises(IndexSettingsMismatchError):
            late.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
        late.close()
        assert [r.status for r in plain.upsert(INDEX, plain_docs[1:], vectors_for(plain_docs[1:]))] == [
            "unchanged"
        ]
    finally:
        headed.close()


def test_an_index_of_the_same_settings_is_written(url: str) -> None:
    creator = _headed(url)
    creator.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    creator.close()
    writer = _headed(url)  # another process, same settings
    docs = corpus()
    try:
        results = writer.upsert(INDEX, docs, vectors_for(docs))
        assert [r.status for r in results] == ["created"] * len(docs)
        assert writer.get_index(INDEX).documents == len(docs)
        assert writer.get_index(INDEX).extra["written_with"]["section_header"] == "heading"
    finally:
        writer.close()


def test_an_index_without_a_record_is_written_as_before(url: str, plain: OpenSearchBackend) -> None:
    """An index created before the record existed (no `_meta.written_with`) is not compared."""
    old = bodies.create_index_body(EMBEDDER, DIM, plain.capabilities())
    assert "written_with" not in old["mappings"]["_meta"]
    plain.client.indices.create(index=INDEX, body=old)
    headed = _headed(url)
    docs = corpus()
    try:
        headed.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
        results = headed.upsert(INDEX, docs, vectors_for(docs))
        assert [r.status for r in results] == ["created"] * len(docs)
        info = headed.get_index(INDEX)
        assert info.documents == len(docs) and "written_with" not in info.extra
    finally:
        headed.close()


def test_a_lexical_only_index_is_compared_without_the_vector_settings(
    url: str, plain: OpenSearchBackend
) -> None:
    """An index without vectors (dimension 0: a BM25-only writer, `embed=False`) is compared on
    the header rule only (`written.VECTOR_KEYS`): a writer with another embedder, window,
    long-text rule or span-vector rule writes the same documents into it; another header rule is
    still refused."""
    plain.create_index(INDEX, embedder_id="none", dimension=0)
    other = OpenSearchBackend(
        Settings(
            backend="opensearch",
            opensearch_endpoint=url,
            embedder="titan",
            embed_max_tokens=128,
            embed_long_text="mean",
            embed_spans_at_index="off",
        ),
        max_retries=0,
    )
    headed = _headed(url)
    docs = corpus()
    try:
        other.create_index(INDEX, embedder_id="none", dimension=0)
        results = other.upsert(INDEX, docs, [None] * len(docs))
        assert [r.status for r in results] == ["created"] * len(docs)
        with pytest.raises(IndexSettingsMismatchError) as err:
            headed.upsert(INDEX, docs[:1], [None])
        assert err.value.field == "section_header"
    finally:
        other.close()
        headed.close()


def test_two_first_writers_of_other_models_the_index_creation_decides(url: str) -> None:
    """Two writers (two clients, as two processes) of two models of one dimension both find the
    index absent (held at a barrier after that answer) and both create it: the embedder is in the
    create request's `_meta`, so one create wins and the other, answered
    `resource_already_exists`, reads the winner's `_meta` and is refused before it embeds; it
    writes nothing. No record is written apart from the index's creation (the embedded store
    needs a write transaction for this: `RecordStore._record_embedder`)."""
    import threading

    from evidence.errors import EmbedderMismatchError

    docs = corpus()[:2]
    models = {EMBEDDER: docs[:1], "other-8": docs[1:]}
    writers = {
        model: OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint=url), max_retries=0)
        for model in models
    }
    both_absent = threading.Barrier(2, timeout=30)
    for writer in writers.values():
        real = writer.client.indices.exists

        def held(*args: Any, real: Any = real, **kwargs: Any) -> Any:
            found = real(*args, **kwargs)
            both_absent.wait()  # each writer was told "no such index"
            return found

        writer.client.indices.exists = held

    def write(model: str) -> object:
        writers[model].create_index(INDEX, embedder_id=model, dimension=DIM)
        return writers[model].upsert(INDEX, models[model], vectors_for(models[model]))

    outcomes = run_together({model: partial(write, model) for model in models})
    try:
        refused = [m for m, o in outcomes.items() if isinstance(o, EmbedderMismatchError)]
        assert len(outcomes) == 2 and len(refused) == 1, outcomes
        (won,) = set(models) - set(refused)
        reader = OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint=url), max_retries=0)
        info = reader.get_index(INDEX)
        assert info.embedder_id == won and info.documents == len(models[won])
        assert all(reader.document_hash(INDEX, d.document_id) is None for d in models[refused[0]])
        reader.close()
    finally:
        for writer in writers.values():
            writer.close()


def test_the_record_is_read_once_per_index(url: str, plain: OpenSearchBackend) -> None:
    """The comparison uses the backend's cached index read: later writes make no extra request."""
    plain.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    writer = OpenSearchBackend(Settings(backend="opensearch", opensearch_endpoint=url), max_retries=0)
    calls: list[str] = []
    real = writer.client.indices.get

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(str(kwargs.get("index")))
        return real(*args, **kwargs)

    writer.client.indices.get = counted
    docs = corpus()
    try:
        for doc in docs:
            writer.upsert(INDEX, [doc], vectors_for([doc]))
        assert calls == [INDEX]
    finally:
        writer.close()


def test_the_api_and_the_indexer_lambda_refuse_it(url: str, plain: OpenSearchBackend) -> None:
    """The service's writers surface the refusal through their one error mapping: the HTTP API's
    document post answers 409 `index_settings_mismatch`; the indexer Lambda fails that SQS record
    alone (`batchItemFailures`). Nothing is written either way."""
    import json

    from evidence.api import runtime
    from evidence.service import EvidenceService
    from evidence.testing import HashingEmbedder, lambda_context, load_event
    from functions.indexer.handler import handler as indexer
    from functions.retriever.handler import handler as api

    index = "vendor-acme"  # the index of the bundled events
    windowed = _windowed(url)
    windowed.create_index(
        index, embedder_id=HashingEmbedder().model_id, dimension=HashingEmbedder().dimension
    )
    windowed.close()
    service = EvidenceService(plain.settings, backend=plain, embedder=HashingEmbedder())
    runtime.configure(
        service=service, settings=plain.settings, s3_client=OneObjectS3(b"Encryption at rest: AES-256.")
    )
    try:
        response = api(load_event("apigw/index_document"), lambda_context())
        assert response["statusCode"] == 409, response["body"]
        error = json.loads(response["body"])["error"]
        assert (error["code"], error["field"]) == ("index_settings_mismatch", "embed_max_tokens")
        event = load_event("sqs/s3_put")
        assert indexer(event, lambda_context()) == {
            "batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]
        }
    finally:
        runtime.reset()
    info = plain.get_index(index)
    assert (info.documents, info.chunks) == (0, 0)


def test_evidence_index_exits_2(
    url: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`evidence index` into an index of other settings: exit 2 naming the setting and the fix,
    nothing written (the index is ensured, and refused, before any file is embedded)."""
    from evidence.cli import main
    from evidence.names import MINILM_MODEL_ID

    windowed = _windowed(url)
    windowed.create_index(INDEX, embedder_id=MINILM_MODEL_ID, dimension=384)
    doc = tmp_path / "a.txt"
    doc.write_text("Customer data at rest is encrypted with AES-256.\n")
    monkeypatch.setenv("EVIDENCE_BACKEND", "opensearch")
    monkeypatch.setenv("EVIDENCE_OPENSEARCH_ENDPOINT", url)
    monkeypatch.setenv("EVIDENCE_STORE_DIR", str(tmp_path / "store"))
    try:
        assert main(["index", str(doc), "--index", INDEX]) == 2
        err = capsys.readouterr().err
        assert "index_settings" not in err  # the message, not the code, is shown
        assert "embed_max_tokens='128'" in err and "EVIDENCE_EMBED_MAX_TOKENS=128" in err
        assert windowed.get_index(INDEX).chunks == 0
    finally:
        windowed.close()


def test_a_sectioned_batch_under_another_header_rule_is_refused_before_it_is_embedded(
    url: str, plain: OpenSearchBackend
) -> None:
    """An index none of whose chunks has a section lets a writer of another header rule past
    `create_index` (its documents are not known there); the batch's own check
    (`search.base.SettingsCheck`) refuses its sectioned chunks before the embedder runs, so the
    refusal costs no embedding, and a sectionless batch is embedded and written as before."""
    from evidence.service import EvidenceService
    from evidence.testing import RecordingEmbedder

    docs = {d.document_id: d for d in corpus()}
    embedder = RecordingEmbedder()
    headed = _headed(url)
    headed.create_index(INDEX, embedder_id=embedder.model_id, dimension=embedder.dimension)
    headed.close()
    service = EvidenceService(plain.settings, backend=plain, embedder=embedder)
    with pytest.raises(IndexSettingsMismatchError) as err:
        service.write_documents(INDEX, [docs["followup-r1"], docs["policy"]])
    assert err.value.field == "section_header"
    assert embedder.embedded == []  # refused before anything was embedded
    assert plain.get_index(INDEX).chunks == 0
    written = service.write_documents(INDEX, [docs["followup-r1"]])
    assert [r.status for r in written] == ["created"]
    assert embedder.embedded  # the sectionless batch is embedded as before
