"""The embedded backend's BM25 equals OpenSearch's: Lucene's formula over one-byte norms.

The reference below is Lucene 9's BM25Similarity written out (idf, k1 1.2, b 0.75,
document length decoded from `SmallFloat.intToByte4`, avgdl = sumTotalTermFreq /
docCount) over the same analysed tokens; the backend runs tantivy. Most fixture
documents are longer than 24 tokens, where the norm quantisation is lossy and
a naive BM25 would disagree.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from evidence.search.analysis import get_analyzer, with_joined_compounds
from evidence.search.embedded import EmbeddedBackend
from tests.unit.search.storekit import one_passage

K1, B = 1.2, 0.75
_NUM_FREE = 24  # 255 - longToInt4(Integer.MAX_VALUE)


def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits = i & 0x07
    shift = (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


def int_to_byte4(i: int) -> int:
    return i if i < _NUM_FREE else _NUM_FREE + _long_to_int4(i - _NUM_FREE)


def byte4_to_int(b: int) -> int:
    return b if b < _NUM_FREE else _NUM_FREE + _int4_to_long(b - _NUM_FREE)


def test_smallfloat_is_exact_below_24_and_lossy_above() -> None:
    assert [byte4_to_int(int_to_byte4(n)) for n in range(24)] == list(range(24))
    assert byte4_to_int(int_to_byte4(25)) == 25
    assert byte4_to_int(int_to_byte4(100)) == 96  # quantised
    assert byte4_to_int(int_to_byte4(1000)) == 984


def lucene_bm25(docs: dict[str, list[str]], query: list[str]) -> dict[str, float]:
    n = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n
    scores: dict[str, float] = {}
    for term in query:
        df = sum(1 for t in docs.values() if term in t)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for did, toks in docs.items():
            tf = toks.count(term)
            if tf:
                dl = byte4_to_int(int_to_byte4(len(toks)))
                scores[did] = scores.get(did, 0.0) + idf * tf / (tf + K1 * (1 - B + B * dl / avgdl))
    return scores


VOCAB = (
    "encryption key rotation backup retention policy vendor access control audit incident breach "
    "notification cloud storage database tenant region availability recovery objective customer data "
    "processing subprocessor privacy security review quarterly annual logging monitoring"
).split()


def _fixture_docs(seed: int = 7) -> dict[str, str]:
    rng = random.Random(seed)
    docs = {}
    for i in range(40):
        length = rng.choice([12, 20, 30, 45, 60, 90, 150, 260])  # mostly > 24 tokens
        words = [rng.choice(VOCAB[: rng.randint(8, len(VOCAB))]) for _ in range(length)]
        docs[f"doc{i:02d}"] = " ".join(words)
    return docs


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[EmbeddedBackend, dict[str, list[str]]]:
    backend = EmbeddedBackend(Path(tmp_path_factory.mktemp("bm25")))
    backend.create_index("parity", embedder_id="none", dimension=0)
    analyzer = get_analyzer()
    texts = _fixture_docs()
    docs = []
    for did, text in texts.items():
        docs.append(one_passage(did, text))
    backend.upsert("parity", docs, [None] * len(docs))
    return backend, {did: analyzer.analyze(t) for did, t in texts.items()}


def test_fixture_is_mostly_longer_than_24_tokens(
    indexed: tuple[EmbeddedBackend, dict[str, list[str]]],
) -> None:
    _, tokens = indexed
    assert sum(len(t) > 24 for t in tokens.values()) / len(tokens) > 0.6


@pytest.mark.parametrize(
    "query",
    [
        "encryption key rotation",
        "customer data breach notification",
        "audit",
        "backup retention policy vendor",
        "quarterly security review of subprocessor privacy",
        "monitoring logging logging",
    ],
)
def test_ranking_and_scores_match_lucene(
    indexed: tuple[EmbeddedBackend, dict[str, list[str]]], query: str
) -> None:
    backend, tokens = indexed
    expected = lucene_bm25(tokens, get_analyzer().analyze(query))
    hits = backend.lexical("parity", query, k=100)
    got = {h.chunk.chunk_id: h.score for h in hits}
    assert set(got) == set(expected)
    ranked_expected = sorted(expected, key=lambda d: (-round(expected[d], 5), d))
    ranked_got = [h.chunk.chunk_id for h in hits]
    assert ranked_got == ranked_expected
    for did, score in expected.items():
        assert got[did] == pytest.approx(score, rel=1e-4)


def test_a_hyphenated_query_compound_also_finds_it_written_joined(tmp_path: Path) -> None:
    """ "non-opioid" is "non" and "opioid" to the analyser, in the query and in the documents, so
    a passage that writes "Nonopioid" is found only because the query also asks the joined word
    (`with_joined_compounds`): scored as Lucene scores the text OpenSearch is sent
    (`opensearch_bodies.lexical_query`), and counted by `term_counts` as `lexical` matches."""
    texts = {
        "joined": "Nonopioid therapies are at least as effective for acute pain.",
        "split": "Non-opioid drugs such as NSAIDs relieve acute pain.",
        "other": "Taper opioids slowly after long-term use.",
    }
    backend = EmbeddedBackend(tmp_path / "store")
    try:
        backend.create_index("parity", embedder_id="none", dimension=0)
        docs = [one_passage(did, t) for did, t in texts.items()]
        backend.upsert("parity", docs, [None] * len(docs))
        analyzer = get_analyzer()
        tokens = {did: analyzer.analyze(t) for did, t in texts.items()}
        query = "non-opioid"
        sent = with_joined_compounds(query)
        assert sent == "non-opioid nonopioid"
        expected = lucene_bm25(tokens, analyzer.analyze(sent))
        got = {h.chunk.chunk_id: h.score for h in backend.lexical("parity", query, k=10)}
        assert set(got) == {"joined", "split", "other"}  # "other": "opioid"
        for did, score in expected.items():
            assert got[did] == pytest.approx(score, rel=1e-4)
        assert backend.term_counts("parity", ["non-opioid", "nonopioid"], cap=10) == {
            "non-opioid": 3,
            "nonopioid": 1,
        }
    finally:
        backend.close()
