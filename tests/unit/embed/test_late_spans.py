"""Late-chunked span vectors (`EVIDENCE_EMBED_SPANS_AT_INDEX=late`, `embed.late`): a span's vector
pooled out of its passage's forward pass at indexing, kept in a key space of its own that only the
`default` profile's focus span anchor reads (docs/ingest.md#span-vectors-at-indexing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evidence.config import Settings, SpanVectors
from evidence.embed.cache import CachedEmbedder, EmbeddingCache
from evidence.embed.late import LATE_SUFFIX, late_key, late_ranges
from evidence.embed.minilm import MiniLMEmbedder
from evidence.embed.tokenizer import get_tokenizer
from evidence.embed.windows import LongTextRule
from evidence.model import RetrieveRequest
from evidence.records import Chunk, ChunkKind
from evidence.service import EvidenceService
from evidence.verbatim.cascade import spans_in_hits
from evidence.verbatim.spans import anchor_spans, span_embedding_texts

SENTENCE = "Reduce the dose in patients with renal impairment and check their blood counts weekly."
LONG = " ".join(f"Item {k}: {SENTENCE}" for k in range(20))  # ~400 pieces: past one window


def _manual(emb: MiniLMEmbedder, text: str, x: int, y: int) -> np.ndarray:
    """The range's late vector computed apart: the text's pieces overlapping [x, y), each read
    from the window (254 pieces, no overlap) it sits in, run alone at its exact width."""
    enc = get_tokenizer().encode(text, add_special_tokens=False)
    tok = get_tokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    assert cls_id is not None and sep_id is not None
    room = emb.max_tokens - 2
    rows = []
    for s in range(0, len(enc.ids), room):
        ids = [cls_id, *enc.ids[s : s + room], sep_id]
        ((_, _, hidden),) = emb._hidden([ids], 1)
        for k in range(s, min(s + room, len(enc.ids))):
            a, b = enc.offsets[k]
            if a < y and b > x:
                rows.append(hidden[0, 1 + k - s].astype(np.float64))
    v = np.asarray(np.mean(rows, axis=0), dtype=np.float64)
    out: np.ndarray = v / np.linalg.norm(v)
    return out


@pytest.mark.parametrize("rule", [LongTextRule.FIRST, LongTextRule.MEAN])
def test_passage_vectors_are_bit_identical_and_ranges_pool_their_pieces(rule: LongTextRule) -> None:
    emb = MiniLMEmbedder(long_text=rule)
    texts = ["Title " + SENTENCE, "Store below 25 °C.", LONG, "x"]
    i = LONG.index("Item 19")
    ranges = [[(6, 12), (6, len(texts[0]))], [], [(0, 4), (i, i + 40)], [(0, 1)]]
    vectors, late = emb.embed_documents_and_late(texts, ranges)
    assert vectors.tobytes() == emb.embed_documents(texts).tobytes()
    assert [len(v) for v in late] == [2, 0, 2, 1]
    for t, rs in zip(texts, ranges, strict=True):
        for (x, y), v in zip(rs, late[texts.index(t)], strict=True):
            assert v is not None and v.dtype == np.float32
            assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
            assert float(np.dot(v, _manual(emb, t, x, y))) > 0.9999
    # the range past the first window (Item 19) is read from the second window: not the first's
    assert get_tokenizer().encode(LONG[:i], add_special_tokens=False).ids.__len__() > 254


def test_a_white_space_range_has_no_vector() -> None:
    emb = MiniLMEmbedder()
    _, late = emb.embed_documents_and_late(["a  b"], [[(1, 3)]])
    assert late == [[None]]


def _chunk(kind: ChunkKind, text: str, start: int, seq: int = 0) -> Chunk:
    return Chunk(
        chunk_id=f"d:{kind.value}:{seq}",
        document_id="d",
        kind=kind,
        text=text,
        char_start=start,
        char_end=start + len(text),
        sequence=seq,
        title="T",
    )


def test_the_context_passage_rule() -> None:
    doc = "0123456789" * 10  # 100 characters
    p0 = _chunk(ChunkKind.PASSAGE, doc[0:60], 0, 0)
    p1 = _chunk(ChunkKind.PASSAGE, doc[50:100], 50, 1)
    inputs = ["T " + p0.text, "T " + p1.text]
    s_first = _chunk(ChunkKind.SPAN, doc[10:20], 10)  # in p0 only
    s_overlap = _chunk(ChunkKind.SPAN, doc[52:58], 52)  # whole in both: the first, p0
    s_cross = _chunk(
        ChunkKind.SPAN, doc[40:70], 40
    )  # whole in neither: most in p0 (40-60: 20 vs 50-70: 20 -> tie: p0)
    s_cross2 = _chunk(ChunkKind.SPAN, doc[45:80], 45)  # 15 in p0, 30 in p1
    out = late_ranges(
        [p0, p1], inputs, [len(inputs[0]), len(inputs[1])], [s_first, s_overlap, s_cross, s_cross2]
    )
    assert [(r.passage, r.start, r.end) for r in out if r] == [
        (0, 12, 22),
        (0, 54, 60),
        (0, 42, 62),
        (1, 2, 32),
    ]
    # a span whole in both but past p0's first window: p1, whose first window holds it
    out = late_ranges([p0, p1], inputs, [40, len(inputs[1])], [s_overlap])
    assert out[0] is not None and (out[0].passage, out[0].start, out[0].end) == (1, 4, 10)
    # whole in p0 only and past its first window: p0 still (its further window is run)
    out = late_ranges([p0, p1], inputs, [15, len(inputs[1])], [s_first])
    assert out[0] is not None and out[0].passage == 0
    assert late_ranges([p0], inputs[:1], [62], [_chunk(ChunkKind.SPAN, "x", 99)]) == [None]
    # without further windows: only a passage holding it whole within its first window
    spans = [s_first, s_overlap, s_cross, s_cross2]
    out = late_ranges([p0, p1], inputs, [15, len(inputs[1])], spans, past_window=False)
    assert [(r.passage, r.start, r.end) if r else None for r in out] == [None, (1, 4, 10), None, None]


DOC = """# Storage service manual

## Retention

Customer data is deleted within 30 days after the contract ends. Backups are kept for 90 days
in a second region. Deleted data cannot be restored after the backup window.

Key term.

The retention clock starts when the customer closes the account, not at the last login.

## Limits

Table 1: Request limits per plan

| Plan | Requests per minute | Burst |
| --- | --- | --- |
| Free | 60 | 10 |
| Team | 600 | 100 |
| Business | 6000 | 1000 |

Requests above the limit receive HTTP 429 and may be retried after one second.
"""
INDEX = "manual"


def test_a_passage_inside_a_longer_one_is_still_found() -> None:
    """`late_ranges` visits only the passages that can overlap a span (bisection over their
    starts and the running maximum of their ends); a passage held inside an earlier, longer one
    ends before it, so bisecting the ends themselves would skip the long one."""
    doc = "abcdefghij" * 20  # 200 characters
    long = _chunk(ChunkKind.PASSAGE, doc[0:150], 0, 0)
    inner = _chunk(ChunkKind.PASSAGE, doc[10:40], 10, 1)
    tail = _chunk(ChunkKind.PASSAGE, doc[140:200], 140, 2)
    inputs = [p.text for p in (long, inner, tail)]
    span = _chunk(ChunkKind.SPAN, doc[60:70], 60)  # after `inner` ends, inside `long` only
    late = _chunk(ChunkKind.SPAN, doc[145:150], 145)  # in `long` and `tail`: the first
    out = late_ranges([long, inner, tail], inputs, [len(t) for t in inputs], [span, late])
    assert [(r.passage, r.start, r.end) for r in out if r] == [(0, 60, 70), (0, 145, 150)]


def _service(tmp_path: Path, mode: str, name: str) -> EvidenceService:
    store = tmp_path / name
    settings = Settings(
        store_dir=store,
        embed_spans_at_index=mode,
        passage_tokens=48,
        passage_overlap=8,
        focus_span_anchor=True,
    )
    embedder = CachedEmbedder(MiniLMEmbedder(), EmbeddingCache(store / "embeddings.sqlite3"))
    service = EvidenceService(settings, embedder=embedder)
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "manual.md").write_text(DOC, encoding="utf-8")
    report = service.index_paths(INDEX, [docs])
    assert not report.failed
    return service


def _keys(service: EvidenceService, spans: list[Chunk]) -> list[str]:
    """The spans' late keys: their documents' content hashes as the index stores them."""
    return [late_key(c, service.backend.document_hash(INDEX, c.document_id) or "") for c in spans]


def _rows(service: EvidenceService, kind: ChunkKind) -> list[Chunk]:
    hits = service.backend.lookup(INDEX, {}, limit=10_000, kind=kind)
    return sorted((h.chunk for h in hits), key=lambda c: (c.char_start, c.sequence))


def test_late_indexing_keeps_passage_vectors_and_its_own_key_space(tmp_path: Path) -> None:
    off = _service(tmp_path, "off", "off")
    late = _service(tmp_path, "late", "late")
    ids = [c.chunk_id for c in _rows(off, ChunkKind.PASSAGE)]
    assert len(ids) >= 3
    a, b = off.backend.vectors(INDEX, ids), late.backend.vectors(INDEX, ids)
    assert all(a[i].tobytes() == b[i].tobytes() for i in ids)
    cache = late.document_embedder(INDEX)
    assert isinstance(cache, CachedEmbedder)
    chunks = _rows(late, ChunkKind.SPAN) + _rows(late, ChunkKind.PASSAGE)
    spans = anchor_spans(chunks)
    # every anchor span has a late vector; none of its scoring texts has an own vector (the
    # `verbatim` scorer's key space holds no late vector), the headings do
    assert all(v is not None for v in cache.cached_late(_keys(late, spans)))
    texts = span_embedding_texts(chunks)
    headings = {c.section for c in spans if c.section}
    own = dict(zip(texts, cache.cached_documents(texts), strict=True))
    assert all(own[h] is not None for h in headings)
    assert all(v is None for t, v in own.items() if t not in headings)
    rows = cache.cache._db.execute(
        "SELECT DISTINCT model FROM scoped_embeddings WHERE scope = ?", (cache.scope,)
    ).fetchall()
    assert sorted(m for (m,) in rows) == sorted([cache._key, cache._key + LATE_SUFFIX])
    # the store built with `own` reads no late vector
    own_store = _service(tmp_path, "own", "own")
    own_cache = own_store.document_embedder(INDEX)
    assert isinstance(own_cache, CachedEmbedder)
    assert all(v is None for v in own_cache.cached_late(_keys(late, spans)))


def test_verbatim_answers_do_not_depend_on_late_vectors(tmp_path: Path) -> None:
    off = _service(tmp_path, "off", "off")
    late = _service(tmp_path, "late", "late")
    for q in ("How long are backups kept?", "How many requests per minute does the Team plan allow?"):
        r0 = off.retrieve(INDEX, RetrieveRequest(query=q, profile="verbatim"))
        r1 = late.retrieve(INDEX, RetrieveRequest(query=q, profile="verbatim"))
        assert [(h.chunk_id, h.text, h.score) for h in r0.hits] == [
            (h.chunk_id, h.text, h.score) for h in r1.hits
        ]


def test_the_anchor_reads_late_vectors_and_embeds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    late = _service(tmp_path, "late", "late")
    cache = late.document_embedder(INDEX)
    assert isinstance(cache, CachedEmbedder)
    read: list[int] = []
    orig = CachedEmbedder.cached_late

    def counting(self: CachedEmbedder, keys: list[str]) -> list[object]:
        out = orig(self, keys)
        read.append(sum(v is not None for v in out))
        return out  # type: ignore[return-value]

    def no_embedding(*_: object, **__: object) -> object:
        raise AssertionError("the anchor embedded a text")

    monkeypatch.setattr(CachedEmbedder, "cached_late", counting)
    monkeypatch.setattr(MiniLMEmbedder, "embed_documents", no_embedding)
    resp = late.retrieve(INDEX, RetrieveRequest(query="How often are backups kept?", profile="default"))
    assert resp.hits and read and all(n > 0 for n in read)
    # every span the anchor can meet inside the hits has its late vector
    passages = _rows(late, ChunkKind.PASSAGE)
    found = spans_in_hits(late.backend, INDEX, passages)
    monkeypatch.setattr(CachedEmbedder, "cached_late", orig)
    assert all(v is not None for v in cache.cached_late(_keys(late, found.spans)))


def test_the_setting_keeps_true_and_false() -> None:
    assert Settings(embed_spans_at_index=True).embed_spans_at_index is SpanVectors.OWN
    assert Settings(embed_spans_at_index="false").embed_spans_at_index is SpanVectors.OFF
    assert Settings(embed_spans_at_index="late").embed_spans_at_index is SpanVectors.LATE
    assert Settings().embed_spans_at_index is SpanVectors.LATE  # the default since session 46
    assert Settings().late_spans_past_window is False


def test_serves_document_process_gives_the_same_late_vectors(tmp_path: Path) -> None:
    """`evidence serve` embeds documents in another process (`embed.background`): late vectors
    come back from it, the same bits as in process, through the worker and the shared process."""
    import os
    import signal

    from evidence.embed.background import BackgroundDocuments, SharedEmbedding
    from evidence.testing import HashingEmbedder

    texts = ["Title " + SENTENCE, LONG]
    i = LONG.index("Item 19")
    ranges = [[(6, 12)], [(0, 4), (i, i + 40)]]
    here = MiniLMEmbedder().embed_documents_and_late(texts, ranges)
    bg = BackgroundDocuments(MiniLMEmbedder(), build=MiniLMEmbedder, nice=7)
    shared = SharedEmbedding(MiniLMEmbedder, nice=7)
    shared.start()
    try:
        cached = CachedEmbedder(bg, EmbeddingCache(tmp_path / "embeddings.sqlite3"))
        assert cached.late_capable
        for there in (
            bg.embed_documents_and_late(texts, ranges),
            shared.client(MiniLMEmbedder()).embed_documents_and_late(texts, ranges),
        ):
            assert there[0].tobytes() == here[0].tobytes()
            assert [[v.tobytes() for v in r if v is not None] for r in there[1]] == [
                [v.tobytes() for v in r if v is not None] for r in here[1]
            ]
        other = BackgroundDocuments(HashingEmbedder(), build=HashingEmbedder, nice=7)
        assert not CachedEmbedder(other, EmbeddingCache(tmp_path / "e2.sqlite3")).late_capable
    finally:
        bg.close()
        process = shared.process
        assert process is not None and process.pid is not None
        os.kill(process.pid, signal.SIGTERM)
        process.join(60)
        shared.close()


def test_late_indexing_tokenizes_each_passage_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`first_window_chars` keeps its encodings for `embed_documents_and_late`: indexing under
    `late` tokenizes a passage once, and the vectors are the bits of tokenizing it again."""
    from evidence.embed import minilm
    from evidence.search.headers import SectionHeaders

    encoded: list[str] = []
    real = get_tokenizer()

    class Counting:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def encode_batch(self, texts: list[str], **kw: bool) -> object:
            encoded.extend(texts)
            return real.encode_batch(texts, **kw)

    monkeypatch.setattr(minilm, "get_tokenizer", Counting)
    late = _service(tmp_path, "late", "late")
    headers = SectionHeaders.from_settings(late.settings)
    inputs = [headers.dense_text(c) for c in _rows(late, ChunkKind.PASSAGE)]
    assert len(inputs) >= 3 and all(encoded.count(t) == 1 for t in inputs)
    # the kept encodings give the bits a fresh tokenization gives
    emb = MiniLMEmbedder()
    ranges = [[(0, 5), (len(t) - 10, len(t))] for t in inputs]
    fresh = emb.embed_documents_and_late(inputs, ranges)
    emb.first_window_chars(inputs)
    kept = emb.embed_documents_and_late(inputs, ranges)
    assert kept[0].tobytes() == fresh[0].tobytes()
    assert [[v.tobytes() for v in r if v is not None] for r in kept[1]] == [
        [v.tobytes() for v in r if v is not None] for r in fresh[1]
    ]
    assert not emb._encoded  # taken


def test_migrate_places_the_anchor_vectors_keeping_no_encodings(tmp_path: Path) -> None:
    """`migrate.CachedAnchors` tokenizes a document's passages to place its spans
    (`first_window_chars`) and runs no pass that would take the encodings: it keeps none (they
    were held, one document's, for the life of the process)."""
    from evidence.migrate import CachedAnchors
    from evidence.search.embedded import EmbeddedBackend, iter_chunks
    from evidence.search.headers import SectionHeaders

    late = _service(tmp_path, "late", "late")
    embedder = late.document_embedder(INDEX)
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, MiniLMEmbedder)
    embedder.inner._encoded.clear()  # what indexing left (its pass took them all)
    assert isinstance(late.backend, EmbeddedBackend)
    ((doc, _),) = list(iter_chunks(late.backend, INDEX))
    anchors = CachedAnchors(embedder, SectionHeaders.from_settings(late.settings))(doc)
    assert sum(len(a.spans) for a in anchors.values()) >= 3
    assert not embedder.inner._encoded


def test_embed_late_runs_the_passages_the_model_is_needed_for_in_slices(tmp_path: Path) -> None:
    """`CachedEmbedder.embed_late` (`in_slices`): a passage with a range, or without a cached
    vector, runs through the model, `EMBED_SLICE` of them a call; one cached and without a range
    does not; the vectors and the ranges' vectors are the model's, each passage's in its place."""
    from collections.abc import Sequence

    from evidence.embed.base import Matrix
    from evidence.embed.cache import EMBED_SLICE

    def vec(text: str) -> Matrix:
        v = np.asarray([len(text), sum(map(ord, text)) % 97, 1.0, 2.0], dtype=np.float32)
        out: Matrix = v / np.float32(np.linalg.norm(v))
        return out

    class Late:
        model_id, dimension = "late-fake", 4

        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def embed_documents(self, texts: Sequence[str]) -> Matrix:
            return np.stack([vec(t) for t in texts])

        def embed_query(self, text: str) -> Matrix:
            return vec(text)

        def first_window_chars(self, texts: Sequence[str]) -> list[int]:
            return [len(t) for t in texts]

        def embed_documents_and_late(
            self, texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]]
        ) -> tuple[Matrix, list[list[Matrix | None]]]:
            self.calls.append(list(texts))
            pooled: list[list[Matrix | None]] = [
                [vec(t[a:b]) for a, b in r] for t, r in zip(texts, ranges, strict=True)
            ]
            return self.embed_documents(texts), pooled

    model = Late()
    cache = CachedEmbedder(model, EmbeddingCache(tmp_path / "e.sqlite3"))
    texts = [f"passage number {k} of the document" for k in range(70)]
    cache.embed_documents(texts[:10])  # cached: 0-9
    ranges = [[(0, 7)] if k < 5 or k % 3 == 0 else [] for k in range(70)]
    vectors, late = cache.embed_late(texts, ranges)
    run = [t for k, t in enumerate(texts) if ranges[k] or k >= 10]
    assert [len(c) for c in model.calls] == [EMBED_SLICE, EMBED_SLICE, len(run) - 2 * EMBED_SLICE]
    assert [t for c in model.calls for t in c] == run
    assert vectors.tobytes() == model.embed_documents(texts).tobytes()
    assert [[v.tobytes() for v in r if v is not None] for r in late] == [
        [vec(t[a:b]).tobytes() for a, b in r] for t, r in zip(texts, ranges, strict=True)
    ]
