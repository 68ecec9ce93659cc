"""`EVIDENCE_EMBED_SPANS_AT_INDEX`: indexing puts the vectors of every text the span scorer embeds
(the verbatim profile's `HYBRID_FACTSPAN`, the default profile's focus span anchor) into the store's
embedding cache, so a question embeds no span text, and embeds nothing those two never look up
(docs/ingest.md#span-vectors-at-indexing)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from evidence.config import Settings, SpanVectors
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.model import RetrieveRequest
from evidence.records import Chunk, ChunkKind
from evidence.service import EvidenceService
from evidence.testing import RecordingEmbedder
from evidence.verbatim.cascade import span_ranking, spans_in_hits
from evidence.verbatim.span_rank import IndexEmbed
from evidence.verbatim.spans import document_order, header_rows, scoring_texts

INDEX = "manual"

# Headings, prose, a label and the sentence it labels (scored together), bullets, and a captioned
# table long enough that small passages cut it (a row then heads the rows of its passage).
DOC = """# Storage service manual

## Retention

Customer data is deleted within 30 days after the contract ends. Backups are kept for 90 days
in a second region. Deleted data cannot be restored after the backup window.

Key term.

The retention clock starts when the customer closes the account, not at the last login.

## Encryption

- Keys rotate every 365 days in a hardware security module.
- Data at rest is encrypted with AES-256.
- Data in transit uses TLS 1.3 only.

## Limits

Table 1: Request limits per plan

| Plan | Requests per minute | Burst |
| --- | --- | --- |
| Free | 60 | 10 |
| Team | 600 | 100 |
| Business | 6000 | 1000 |
| Enterprise | 60000 | 10000 |
| Internal | 120000 | 20000 |

Requests above the limit receive HTTP 429 and may be retried after one second.
"""

QUESTIONS = (
    "How long are backups kept?",
    "When does the retention clock start?",
    "How often do keys rotate?",
    "How many requests per minute does the Team plan allow?",
    "What happens to requests above the limit?",
)


def _service(tmp_path: Path, *, on: bool, cached: bool = True) -> tuple[EvidenceService, RecordingEmbedder]:
    counting = RecordingEmbedder()
    settings = Settings(
        store_dir=tmp_path / "store",
        embed_spans_at_index=on,
        passage_tokens=48,
        passage_overlap=8,
        focus_span_anchor=True,
    )
    embedder = (
        CachedEmbedder(counting, EmbeddingCache(tmp_path / "store" / "embeddings.sqlite3"))
        if cached
        else counting
    )
    return EvidenceService(settings, embedder=embedder), counting


def _index(service: EvidenceService, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "manual.md").write_text(DOC, encoding="utf-8")
    report = service.index_paths(INDEX, [docs])
    assert not report.failed and report.count("created") == 1


def _passages(service: EvidenceService) -> list[Chunk]:
    hits = service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.PASSAGE)
    return sorted((h.chunk for h in hits), key=lambda c: c.char_start)


def _ask_everything(service: EvidenceService) -> None:
    """Every way a shipped reader embeds span texts: the verbatim profile, the default profile
    (its focus span anchor on), and the span scorer over the whole document."""
    for q in QUESTIONS:
        service.retrieve(INDEX, RetrieveRequest(query=q, profile="verbatim"))
        resp = service.retrieve(INDEX, RetrieveRequest(query=q, profile="default"))
        vector = service.query_vector(INDEX, q)
        assert vector is not None
        embed = IndexEmbed(lambda: service.document_embedder(INDEX))
        ranked = span_ranking(
            service.backend, INDEX, q, [resp.hits[0].document_id], query_vector=vector, embed=embed
        )
        assert ranked


def _anchor_reads(service: EvidenceService) -> list[str]:
    """What the cache-only focus anchor reads (`SpanAnchors._cached`) for hits of one passage,
    two adjacent ones and all of them: the kept spans' scoring texts and their headings."""
    passages = _passages(service)
    out: list[str] = []
    for hits in (
        [[p] for p in passages] + [passages[i : i + 2] for i in range(len(passages) - 1)] + [passages]
    ):
        found = spans_in_hits(service.backend, INDEX, hits)
        out += [*found.texts, *(c.section for c in found.spans if c.section)]
    return out


def test_with_the_setting_a_question_embeds_no_span_text(tmp_path: Path) -> None:
    service, counting = _service(tmp_path, on=True)
    _index(service, tmp_path)
    spans = document_order(
        [h.chunk for h in service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.SPAN)]
    )
    assert len({c.section for c in spans}) >= 3 and len(spans) >= 15
    # the spans' scoring texts (a table row with its caption and header, a label with what it
    # labels) and headings were embedded at indexing, once each
    headers = header_rows(spans)
    texts = scoring_texts(spans)
    read = {texts[i] for i in range(len(spans)) if i not in headers} | {c.section for c in spans if c.section}
    assert read <= set(counting.embedded)
    assert len(counting.embedded) == len(set(counting.embedded))
    counting.embedded.clear()
    _ask_everything(service)
    assert counting.embedded == []
    # and the cache-only anchor (which never embeds) finds every vector it reads
    asked = _anchor_reads(service)
    cache = service.document_embedder(INDEX)
    assert isinstance(cache, CachedEmbedder)
    assert asked and all(v is not None for v in cache.cached_documents(asked))


def test_indexing_embeds_only_what_the_readers_look_up(tmp_path: Path) -> None:
    """Not a table's header row (no reader's candidate: context for the rows under it) and not a
    span's scoring text over one passage alone (a row heading its passage's rows: only the
    embedding anchor kept as a bench lever asks it, and embeds it then)."""
    service, counting = _service(tmp_path, on=True)
    _index(service, tmp_path)
    spans = document_order(
        [h.chunk for h in service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.SPAN)]
    )
    headers = header_rows(spans)
    texts = scoring_texts(spans)
    read = {texts[i] for i in range(len(spans)) if i not in headers} | {c.section for c in spans if c.section}
    passages = {c.search_text for c in _passages(service)}
    assert set(counting.embedded) - passages == read
    header = "Table 1: Request limits per plan | Plan | Requests per minute | Burst |"
    assert header in texts and header not in counting.embedded
    # the bench lever (spans inside the hits, scored over those passages alone) embeds a row its
    # passage heads with its caption but not its header: a text no whole-document scope makes
    counting.embedded.clear()
    vector = service.query_vector(INDEX, QUESTIONS[3])
    embed = IndexEmbed(lambda: service.document_embedder(INDEX))
    for p in _passages(service):
        span_ranking(
            service.backend,
            INDEX,
            QUESTIONS[3],
            [p.document_id],
            query_vector=vector,
            embed=embed,
            within=[p],
        )
    assert counting.embedded and not set(counting.embedded) & set(texts)


def test_without_it_the_same_questions_embed_span_texts(tmp_path: Path) -> None:
    """The check above is not vacuous: the questions do embed span texts when indexing did not."""
    service, counting = _service(tmp_path, on=False)
    _index(service, tmp_path)
    passages = {
        h.chunk.search_text for h in service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.PASSAGE)
    }
    assert set(counting.embedded) == passages  # indexing embedded the passages alone
    counting.embedded.clear()
    _ask_everything(service)
    assert counting.embedded


def test_unchanged_content_embeds_nothing_and_a_changed_document_only_its_new_texts(
    tmp_path: Path,
) -> None:
    service, counting = _service(tmp_path, on=True)
    _index(service, tmp_path)
    counting.embedded.clear()
    report = service.index_paths(INDEX, [tmp_path / "docs"])
    assert report.count("unchanged") == 1 and counting.embedded == []
    (tmp_path / "docs" / "manual.md").write_text(
        DOC + "\n## Support\n\nSupport answers within one business day.\n", encoding="utf-8"
    )
    service.index_paths(INDEX, [tmp_path / "docs"])
    # the cache answers every text the first version had; only the new ones are embedded
    assert "Support answers within one business day." in counting.embedded
    assert "Keys rotate every 365 days in a hardware security module." not in " ".join(counting.embedded)


def test_without_a_persistent_cache_it_does_nothing(tmp_path: Path) -> None:
    """OpenSearch has no embedding cache to fill (`with_store_cache` returns the bare model): the
    spans' vectors would be computed and thrown away, so indexing embeds the passages alone."""
    service, counting = _service(tmp_path, on=True, cached=False)
    _index(service, tmp_path)
    passages = {
        h.chunk.search_text for h in service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.PASSAGE)
    }
    assert sorted(counting.embedded) == sorted(passages)


def test_the_setting_is_late_by_default() -> None:
    # Session 46 (decision R2'): late vectors cost indexing ~1.04x and feed the anchor, on by default.
    assert Settings().embed_spans_at_index is SpanVectors.LATE


@pytest.mark.parametrize("on", [False, True])
def test_span_rows_keep_no_vector_either_way(tmp_path: Path, on: bool) -> None:
    service, _ = _service(tmp_path, on=on)
    _index(service, tmp_path)
    hits = service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.SPAN)
    assert hits and service.backend.vectors(INDEX, [h.chunk.chunk_id for h in hits]) == {}


def test_a_deadline_among_the_spans_writes_nothing_and_the_retry_resumes(tmp_path: Path) -> None:
    """The spans are embedded after the passages, in the same call: a deadline past mid-way fails
    the upload as before (nothing written), the slices embedded so far are cached (the passages
    first), and the retry embeds only the rest."""
    import time

    from evidence.errors import DeadlineExceededError
    from evidence.model import IndexDocumentRequest
    from evidence.retry import current_deadline, deadline_scope

    service, counting = _service(tmp_path, on=True)
    slow = counting.embed_documents

    def embed_slowly(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        # Each slice outlives the deadline, however long parsing took before it (a loaded CI
        # runner parsed for more than a fixed 2 s and no slice started at all).
        deadline = current_deadline()
        assert deadline is not None
        time.sleep(deadline.remaining() + 0.05)
        return slow(texts)

    counting.embed_documents = embed_slowly  # type: ignore[method-assign]
    notes = " ".join(f"Note {n} says that region {n} keeps {n} copies of each object." for n in range(20))
    request = IndexDocumentRequest(
        filename="manual.md", text=f"{DOC}\n## Notes\n\n{notes}\n", document_id="m"
    )
    with pytest.raises(DeadlineExceededError), deadline_scope(6.0):
        service.index_document(INDEX, request)
    counting.embed_documents = slow  # type: ignore[method-assign]
    first = list(counting.embedded)
    assert len(first) == 32  # one slice (`EMBED_SLICE`), then the deadline
    assert service.backend.lookup(INDEX, {}, limit=10) == []
    counting.embedded.clear()
    assert service.index_document(INDEX, request).status == "created"
    passages = {
        h.chunk.search_text for h in service.backend.lookup(INDEX, {}, limit=10_000, kind=ChunkKind.PASSAGE)
    }
    assert passages <= set(first) and counting.embedded and not set(counting.embedded) & set(first)
