from __future__ import annotations

from evidence.records import Chunk, ChunkKind
from evidence.verbatim.hybrid import passage_scores, same_text
from evidence.verbatim.scoring import SpanStats, terms


def chunk(cid: str, doc: str, start: int, end: int, kind: ChunkKind = ChunkKind.SPAN) -> Chunk:
    return Chunk(
        chunk_id=cid,
        document_id=doc,
        kind=kind,
        text="x" * (end - start),
        char_start=start,
        char_end=end,
        sequence=0,
        section="",
    )


def test_a_span_takes_the_best_passage_holding_it_min_max_normalised() -> None:
    spans = [
        chunk("s1", "d", 10, 20),
        chunk("s2", "d", 95, 105),
        chunk("s3", "d", 300, 310),
        chunk("s4", "e", 0, 5),
    ]
    passages = [
        (chunk("p1", "d", 0, 100, ChunkKind.PASSAGE), 0.2),
        (chunk("p2", "d", 90, 200, ChunkKind.PASSAGE), 0.6),
        (chunk("p3", "d", 0, 50, ChunkKind.PASSAGE), 0.4),
    ]
    scores = passage_scores(spans, passages)
    assert abs(scores[0] - 0.5) < 1e-9  # p1 (0.0) and p3 (0.5) hold it: the better one
    assert scores[1] == 1.0  # only p2 holds it whole
    assert scores[2] == 0.0 and scores[3] == 0.0  # no passage scored holds them
    assert passage_scores(spans, []) == [0.0] * 4


def test_a_span_is_read_with_its_heading() -> None:
    texts = ["The default value of this macro is 1 billion.", "The default value is 100.", "Unrelated words."]
    heads = ["Maximum length of a string or BLOB", "Maximum number of arguments", "Other"]
    headed = SpanStats(texts).with_headings(heads)
    q = list(terms("maximum length of a string"))
    scores = [headed.bm25(i, q) for i in range(3)]
    assert scores[0] > scores[1] > 0 == scores[2]
    # the same statistics as analysing "heading text" afresh: one BM25, not two near-duplicates
    fresh = SpanStats([f"{h} {t}" for h, t in zip(heads, texts, strict=True)])
    assert [fresh.bm25(i, q) for i in range(3)] == scores
    assert SpanStats([]).with_headings([]).n == 0


def test_repeats_compare_without_bullets_case_or_spacing() -> None:
    assert same_text("• Offer  naloxone\nwhen prescribing.") == same_text("offer naloxone when prescribing.")
    assert same_text("Offer naloxone.") != same_text("Offer naltrexone.")


def _passage_scores_scanning(spans: list[Chunk], passages: list[tuple[Chunk, float]]) -> list[float]:
    """The best normalised score of every passage holding the span, read by a scan of them all."""
    if not passages:
        return [0.0] * len(spans)
    lo = min(s for _, s in passages)
    hi = max(s for _, s in passages)
    out = []
    for c in spans:
        best = 0.0
        for p, s in passages:
            norm = (s - lo) / (hi - lo) if hi > lo else 1.0
            if (
                p.document_id == c.document_id
                and p.char_start <= c.char_start
                and p.char_end >= c.char_end
                and norm > best
            ):
                best = norm
        out.append(best)
    return out


def test_passage_scores_stop_at_the_longest_passage_with_the_same_scores() -> None:
    import random

    rng = random.Random(7)
    for _ in range(200):
        passages = []
        for k in range(rng.randint(1, 12)):
            doc = rng.choice("de")
            a = rng.randint(0, 3000)
            passages.append(
                (chunk(f"p{k}", doc, a, a + rng.randint(0, 900), ChunkKind.PASSAGE), rng.random())
            )
        spans = []
        for k in range(30):
            a = rng.randint(0, 4000)
            spans.append(chunk(f"s{k}", rng.choice("def"), a, a + rng.randint(0, 300)))
        assert passage_scores(spans, passages) == _passage_scores_scanning(spans, passages)
