"""The service on the embedded store with the real MiniLM model: identity, idempotency, deletion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evidence.config import Settings
from evidence.errors import DocumentNotFoundError, IndexNotFoundError, RequestValidationError
from evidence.model import IndexDocumentRequest, RetrieveRequest
from evidence.records import ChunkKind
from evidence.service import EvidenceService

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embedder():
    from evidence.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


@pytest.fixture
def service(tmp_path: Path, embedder) -> EvidenceService:
    return EvidenceService(Settings(store_dir=tmp_path / "store"), embedder=embedder)


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keys.md").write_text("# Keys\n\nEncryption keys rotate every 365 days in a hardware KMS.\n")
    (docs / "retention.txt").write_text("Customer data is deleted within 30 days after termination.\n")
    return docs


def test_minilm_embeddings_are_normalised_and_semantic(embedder) -> None:
    m = embedder.embed_documents(
        ["A man is eating food.", "A man eats a piece of bread.", "Stocks fell sharply."]
    )
    assert m.shape == (3, 384) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    sims = m @ m.T
    assert sims[0, 1] > 0.6 > sims[0, 2]
    # batching and length bucketing do not change results
    assert np.allclose(embedder.embed_query("A man is eating food."), m[0], atol=1e-5)


def test_indexing_twice_adds_nothing_and_delete_removes_everything(
    service: EvidenceService, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    first = service.index_paths("acme", [folder])
    keys = (folder / "keys.md").resolve().as_posix()
    assert sorted(r.document_id for r in first.indexed) == [
        keys,
        (folder / "retention.txt").resolve().as_posix(),
    ]
    assert {r.status for r in first.indexed} == {"created"}
    info = service.backend.get_index("acme")
    second = service.index_paths("acme", [folder])
    assert {r.status for r in second.indexed} == {"unchanged"}
    assert service.backend.get_index("acme") == info

    vector = service.query_vector("acme", "key rotation")
    assert vector is not None
    assert any(h.chunk.document_id == keys for h in service.backend.dense("acme", vector, k=10))
    assert service.backend.lexical("acme", "rotate", k=10)
    deleted = service.delete_document("acme", keys)
    assert deleted.deleted_chunks > 1  # passages and spans
    assert all(h.chunk.document_id != keys for h in service.backend.dense("acme", vector, k=10))
    for kind in ChunkKind:
        assert not service.backend.lexical("acme", "rotate", k=10, kind=kind)
    with pytest.raises(DocumentNotFoundError):
        service.delete_document("acme", keys)


def test_reindex_changed_content_replaces_chunks(service: EvidenceService) -> None:
    req = IndexDocumentRequest(document_id="p1", filename="p.txt", text="Backups are kept for 35 days.")
    assert service.index_document("acme", req).status == "created"
    again = service.index_document("acme", req)
    assert again.status == "unchanged"
    changed = req.model_copy(update={"text": "Backups are kept for 90 days."})
    assert service.index_document("acme", changed).status == "updated"
    hits = service.backend.lexical("acme", "backups", k=10)
    assert [h.chunk.text for h in hits] == ["Backups are kept for 90 days."]


def test_retrieve_end_to_end_and_errors(service: EvidenceService, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    service.index_paths("acme", [folder])
    resp = service.retrieve("acme", RetrieveRequest(query="how often are keys rotated?", explain=True))
    assert resp.hits[0].document_id == (folder / "keys.md").resolve().as_posix()
    assert resp.hits[0].scores and {"lexical", "dense", "fused"} <= set(resp.hits[0].scores)
    assert resp.telemetry.stages[0].name == "first_stage"
    with pytest.raises(IndexNotFoundError):
        service.retrieve("nope", RetrieveRequest(query="x"))
    with pytest.raises(RequestValidationError) as err:
        service.retrieve("Bad Name!", RetrieveRequest(query="x"))
    assert err.value.field == "index"


def test_api_uploads_without_an_id_never_collide(service: EvidenceService) -> None:
    # two vendors' policy.txt in one index: before, both became document "policy.txt" (overwrite)
    a = IndexDocumentRequest(filename="policy.txt", text="Acme rotates keys every 90 days.")
    b = IndexDocumentRequest(filename="policy.txt", text="Globex rotates keys yearly.")
    ra, rb = service.index_document("acme", a), service.index_document("acme", b)
    assert ra.document_id != rb.document_id and {ra.status, rb.status} == {"created"}
    assert ra.document_id.startswith("policy.txt@")
    assert service.index_document("acme", a).status == "unchanged"  # same bytes: same document
    hits = service.retrieve("acme", RetrieveRequest(query="how often are keys rotated?")).hits
    assert {h.document_id for h in hits} == {ra.document_id, rb.document_id}
    assert len({h.source for h in hits}) == 2  # the evidence tells them apart too
    # a caller-named id still replaces
    named = IndexDocumentRequest(document_id="acme/policy", filename="policy.txt", text="v1")
    assert service.index_document("acme", named).status == "created"
    newer = named.model_copy(update={"text": "v2"})
    assert service.index_document("acme", newer).status == "updated"


def test_a_question_is_cleaned_of_format_characters_as_documents_are(
    service: EvidenceService, tmp_path: Path
) -> None:
    """A soft hyphen or zero-width space in a question is read as the documents are read (removed)
    in every profile's path: planned, searched lexically and densely, and in the verbatim cascade."""
    from evidence.model import PlanRequest
    from evidence.service import _clean_questions

    req = RetrieveRequest(
        query="encryp\u00adtion key rota\u200btion", criterion_question="Do you encryp\u00adt?"
    )
    cleaned = _clean_questions(req)
    assert (cleaned.query, cleaned.criterion_question) == ("encryption key rotation", "Do you encrypt?")
    plain = RetrieveRequest(query="key rotation")
    assert _clean_questions(plain) is plain
    only = RetrieveRequest(query="\u200b\u200b")
    assert _clean_questions(only).query == "\u200b\u200b"  # nothing left: left as sent
    assert _clean_questions(PlanRequest(query="encryp\u00adtion")).query == "encryption"

    folder = _folder(tmp_path)
    service.index_paths("acme", [folder])
    for profile in ("default", "verbatim"):
        resp = service.retrieve(
            "acme", RetrieveRequest(query="Encryp\u00adtion keys ro\u200btate?", profile=profile)
        )
        assert resp.plan.query == "Encryption keys rotate?"
        assert resp.hits and "rotate every 365 days" in resp.hits[0].text
