"""Late vectors' keys name their document's content (`embed.late.late_key`): a document written
again with other passages never has a late vector of its earlier passages read for its spans,
under any setting; a store written before the keys did (`legacy_late_key`) keeps its answers
(docs/ingest.md#late-span-vectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.late import LATE_SUFFIX, late_key, legacy_late_key
from evidence.embed.minilm import MiniLMEmbedder
from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.service import EvidenceService
from evidence.verbatim.cascade import spans_in_hits
from evidence.verbatim.span_rank import LateVectors

INDEX = "keys"
LEAD = "Alpha beta gamma."
SPAN = "The retention clock starts when the customer closes the account."
TEXT = f"{LEAD} {SPAN} Omega."
SHORT = "T"
#: Long enough that, at 32-piece windows, the span no longer lies in its passage's first window.
LONG = "A title of many words that fills most of a short model window before the text begins"


def _document(title: str, content_hash: str) -> DocumentChunks:
    def chunk(kind: ChunkKind, start: int, end: int, seq: int) -> Chunk:
        return Chunk(
            chunk_id=f"d:{kind.value}:{seq}",
            document_id="d",
            kind=kind,
            text=TEXT[start:end],
            char_start=start,
            char_end=end,
            sequence=seq,
            title=title,
        )

    s = TEXT.index(SPAN)
    chunks = (
        chunk(ChunkKind.PASSAGE, 0, len(TEXT), 0),
        chunk(ChunkKind.SPAN, 0, len(LEAD), 0),
        chunk(ChunkKind.SPAN, s, s + len(SPAN), 1),
    )
    return DocumentChunks(document_id="d", content_hash=content_hash, source="d.txt", chunks=chunks)


def _service(store: Path, mode: str, *, max_tokens: int = 256, **settings: Any) -> EvidenceService:
    embedder = CachedEmbedder(
        MiniLMEmbedder(max_tokens=max_tokens), EmbeddingCache(store / "embeddings.sqlite3")
    )
    return EvidenceService(
        Settings(store_dir=store, embed_spans_at_index=mode, **settings), embedder=embedder
    )


def _anchor_reads(service: EvidenceService, index: str = INDEX) -> np.ndarray | None:
    """The late vector the focus span anchor reads for SPAN (`LateVectors` over `spans_in_hits`)."""
    passages = [h.chunk for h in service.backend.lookup(index, {}, limit=100, kind=ChunkKind.PASSAGE)]
    found = spans_in_hits(service.backend, index, passages)
    (k,) = [k for k, c in enumerate(found.spans) if c.text == SPAN]
    out: np.ndarray | None = LateVectors(lambda: service.document_embedder(index))(
        found.spans, found.document_hashes
    )[k]
    return out


def _fresh(tmp_path: Path, title: str, content_hash: str, **kw: Any) -> np.ndarray | None:
    """What a store written once with that content reads."""
    service = _service(tmp_path / f"fresh-{content_hash}", "late", **kw)
    service.write_documents(INDEX, [_document(title, content_hash)])
    return _anchor_reads(service)


@pytest.mark.parametrize("mode", ["off", "own", "late"])
def test_a_document_written_again_with_other_passages_reads_no_earlier_late_vector(
    tmp_path: Path, mode: str
) -> None:
    """Its title (part of every passage's input) changes; the span's text and offsets do not.
    Under another span-vector setting the index refuses the write (it records `late`:
    docs/ingest.md#indexing-settings-of-an-index); an index written before records were kept
    takes it, and reads no earlier late vector either."""
    from evidence.errors import IndexSettingsMismatchError

    first = _service(tmp_path / "s", "late")
    first.write_documents(INDEX, [_document(SHORT, "h1")])
    before = _anchor_reads(first)
    assert before is not None
    again = _service(tmp_path / "s", mode)
    if mode != "late":
        with pytest.raises(IndexSettingsMismatchError, match="embed_spans_at_index='late'"):
            again.write_documents(INDEX, [_document(LONG, "h2")])
        _unrecorded(again)  # as a store written before session 48: not compared
    again.write_documents(INDEX, [_document(LONG, "h2")])
    after = _anchor_reads(again)
    if mode == "late":
        fresh = _fresh(tmp_path, LONG, "h2")
        assert after is not None and fresh is not None and after.tobytes() == fresh.tobytes()
        assert after.tobytes() != before.tobytes()
    else:
        assert after is None


def test_a_span_no_passage_window_holds_any_more_keeps_no_vector(tmp_path: Path) -> None:
    """Written again under `late` with a title that pushes the span past its passage's first
    window (32-piece windows): nothing is pooled for it, and its earlier vector is not read."""
    first = _service(tmp_path / "s", "late", max_tokens=32)
    first.write_documents(INDEX, [_document(SHORT, "h1")])
    assert _anchor_reads(first) is not None
    again = _service(tmp_path / "s", "late", max_tokens=32)
    again.write_documents(INDEX, [_document(LONG, "h2")])
    assert _fresh(tmp_path, LONG, "h2", max_tokens=32) is None
    assert _anchor_reads(again) is None


def test_indexes_sharing_a_cache_scope_read_their_own_documents_vectors(tmp_path: Path) -> None:
    service = _service(tmp_path / "s", "late", embedding_cache_scope="shared")
    service.write_documents("a", [_document(SHORT, "h1")])
    service.write_documents("b", [_document(LONG, "h2")])
    a, b = _anchor_reads(service, "a"), _anchor_reads(service, "b")
    fresh_a, fresh_b = _fresh(tmp_path, SHORT, "h1"), _fresh(tmp_path, LONG, "h2")
    assert a is not None and b is not None and fresh_a is not None and fresh_b is not None
    assert a.tobytes() == fresh_a.tobytes() and b.tobytes() == fresh_b.tobytes()


def _unrecorded(service: EvidenceService) -> None:
    """The index as written before session 48: no record of its indexing settings
    (`search.written`), so a write under other settings is not refused."""
    service.backend.index_store(INDEX)._db.execute("DELETE FROM info WHERE key = 'written_with'")  # type: ignore[attr-defined]


def _as_written_before(service: EvidenceService) -> None:
    """The store as session 46's code wrote it: each late vector under `legacy_late_key` (and,
    from before session 48, no record of its settings: `_unrecorded`)."""
    _unrecorded(service)
    cache = service.document_embedder(INDEX)
    assert isinstance(cache, CachedEmbedder)
    doc = _document(SHORT, "h1")
    spans = [c for c in doc.chunks if c.kind is ChunkKind.SPAN]
    vectors = cache.cached_late([late_key(c, "h1") for c in spans])
    assert all(v is not None for v in vectors)
    model = cache._key + LATE_SUFFIX
    cache.cache.delete_many(model, [late_key(c, "h1") for c in spans], scope=cache.scope)
    cache.put_late([(legacy_late_key(c), v) for c, v in zip(spans, vectors, strict=True) if v is not None])


def test_a_store_written_before_keeps_its_late_vectors_until_the_document_is_written_again(
    tmp_path: Path,
) -> None:
    service = _service(tmp_path / "s", "late")
    service.write_documents(INDEX, [_document(SHORT, "h1")])
    expected = _anchor_reads(service)
    _as_written_before(service)
    read = _anchor_reads(service)
    assert read is not None and expected is not None and read.tobytes() == expected.tobytes()
    # written again (other content) under `off`: the old-format vector is gone, not read
    _service(tmp_path / "s", "off").write_documents(INDEX, [_document(LONG, "h2")])
    assert _anchor_reads(_service(tmp_path / "s", "off")) is None


def test_the_current_version_keeps_the_keys_stores_hold() -> None:
    """`LATE_VERSION` 1 is the code the stores were written with: its keys are the formula they
    hold (no version in them), the pre-session-47 key too; another version's keys differ from both."""
    from evidence.embed import late
    from evidence.ids import content_hash

    (span,) = [c for c in _document(SHORT, "h1").chunks if c.kind is ChunkKind.SPAN and c.text == SPAN]
    place = f"{span.document_id}\x00{span.char_start}\x00{span.char_end}\x00{span.text}"
    assert late.LATE_VERSION == 1
    assert late_key(span, "h1") == late_key(span, "h1", 1) == content_hash(f"late\x00h1\x00{place}")
    assert legacy_late_key(span) == content_hash(f"late\x00{place}")
    bumped = late_key(span, "h1", 2)
    assert bumped not in {late_key(span, "h1"), legacy_late_key(span)}
    assert bumped == content_hash(f"late2\x00h1\x00{place}")


def test_a_bumped_version_reads_no_vector_the_earlier_code_pooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a pooling or passage-choice change bumps `LATE_VERSION`, neither a key of the earlier
    version nor a pre-session-47 key (pooled by version 1) is read: the anchor finds no vector
    until the document is written again, which writes the new version's; evaluation indexes
    re-index (their fingerprint names the version). At version 1 both are read as before."""
    from evidence.embed import late
    from evidence.evaluation.files import late_version_tag

    service = _service(tmp_path / "s", "late")
    service.write_documents(INDEX, [_document(SHORT, "h1")])
    current = _anchor_reads(service)
    assert current is not None and late_version_tag() == b""
    cache = service.document_embedder(INDEX)
    assert isinstance(cache, CachedEmbedder)
    (span,) = [c for c in _document(SHORT, "h1").chunks if c.kind is ChunkKind.SPAN and c.text == SPAN]
    cache.put_late([(legacy_late_key(span), current)])  # as a pre-session-47 store holds it too

    monkeypatch.setattr(late, "LATE_VERSION", 2)
    assert late_version_tag() == b"late-vectors:2"
    assert _anchor_reads(service) is None  # version 1's vector (and the legacy key's) not read
    service.write_documents(INDEX, [_document(LONG, "h2")])  # written again: version 2's keys
    again = _anchor_reads(service)
    assert again is not None
    assert cache.cached_late([late_key(span, "h2", 2)])[0] is not None
    assert cache.cached_late([late_key(span, "h2", 1)])[0] is None
    monkeypatch.setattr(late, "LATE_VERSION", 1)
    assert _anchor_reads(service) is None  # and version 1 reads no version 2 vector
