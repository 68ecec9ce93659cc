"""An absent question word that the evidence says in other words is no absent fact
(`verbatim.grounding.paraphrased`, docs/verbatim.md#refusal-paraphrase)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evidence.embed import static
from evidence.verbatim import grounding
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.grounding import DF_CAP, TermCounts, concept_weights, paraphrased, read_evidence

#: "physician" is in no passage of the index; the evidence says "doctor".
Q = "Should a physician stop the drug in kidney failure?"
SAYS_DOCTOR = "Your doctor may stop the medicine if the kidneys fail."
#: A question naming something the documents never talk about ("XPath"), evidence about the parser.
XPATH_Q = "Can the parser run XPath queries on a document?"
PARSER = "The parser reads a document and calls your handler for each element."


@pytest.fixture(autouse=True)
def _read_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paraphrases are read only when the model reads `absent_rare` (`READ_RARE`, `READ_PARAPHRASES`; the
    variants with it, `READ_VARIANTS`)."""
    monkeypatch.setattr(grounding, "READ_VARIANTS", True)
    monkeypatch.setattr(grounding, "READ_PARAPHRASES", True)
    monkeypatch.setattr(grounding, "READ_RARE", True)


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A stand-in for the generated table (`embed/data/static_pieces.npz`, not in the repository):
    random unit piece vectors (64 dims, fixed seed: unrelated words near cosine 0), with "doctor"
    the same vector as "physician"."""
    from evidence.embed.tokenizer import get_tokenizer

    tok = get_tokenizer()
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((tok.get_vocab_size(), 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    (physician,) = tok.encode("physician", add_special_tokens=False).ids
    (doctor,) = tok.encode("doctor", add_special_tokens=False).ids
    rows[doctor] = rows[physician]
    monkeypatch.setattr(static, "piece_table", lambda: rows.astype(np.float16))
    static.clear_cache()
    yield
    static.clear_cache()


def _cos(a: str, b: str) -> float:
    va, vb = static.word_vector(a), static.word_vector(b)
    assert va is not None and vb is not None
    return float(va @ vb)


@pytest.mark.skipif(not static.TABLE_PATH.is_file(), reason="the generated table is not built")
def test_the_generated_table_reads_near_words_as_near() -> None:
    static.clear_cache()
    assert _cos("physician", "doctor") >= grounding.PARAPHRASE_COSINE
    assert _cos("price", "cost") >= grounding.PARAPHRASE_COSINE
    assert _cos("car", "banana") < grounding.PARAPHRASE_COSINE
    assert _cos("license", "licence") > 0.9


@pytest.mark.usefixtures("table")
def test_an_absent_word_the_evidence_says_otherwise_is_paraphrased() -> None:
    assert paraphrased(Q, [("physician",)], [SAYS_DOCTOR]) == {"physician"}
    # No word of the evidence comes close: not a paraphrase.
    assert paraphrased(Q, [("physician",)], [PARSER]) == frozenset()
    assert paraphrased(XPATH_Q, [("xpath",)], [PARSER]) == frozenset()
    # Above 1 nothing is (refuse14's reading); nothing asked, nothing read.
    assert paraphrased(Q, [("physician",)], [SAYS_DOCTOR], cosine=1.01) == frozenset()
    assert paraphrased(Q, [], [SAYS_DOCTOR]) == frozenset()


def test_without_the_table_nothing_is_paraphrased(monkeypatch: pytest.MonkeyPatch) -> None:
    static.clear_cache()
    monkeypatch.setattr(static, "piece_table", lambda: None)
    try:
        assert paraphrased(Q, [("physician",)], [SAYS_DOCTOR]) == frozenset()
    finally:
        static.clear_cache()


@pytest.mark.usefixtures("table")
def test_whole_words_only_never_reads_a_split_word(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grounding, "PARAPHRASE_WHOLE_WORDS", True)
    assert paraphrased(Q, [("physician",)], [SAYS_DOCTOR]) == {"physician"}  # one piece
    # "levorphanol" is split into pieces: never a paraphrase, however near its vector comes.
    q = "What is the dose of levorphanol?"
    monkeypatch.setattr(grounding, "PARAPHRASE_COSINE", -1.0)
    assert paraphrased(q, [("levorphanol",)], ["The dose of morphine is 10 mg."]) == frozenset()
    monkeypatch.setattr(grounding, "PARAPHRASE_WHOLE_WORDS", False)
    assert paraphrased(q, [("levorphanol",)], ["The dose of morphine is 10 mg."]) == {"levorphanol"}


@pytest.mark.usefixtures("table")
def test_absent_rare_reads_a_paraphrase_as_present_and_an_unnamed_thing_as_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    groups = question_groups(Q)
    used = {t: DF_CAP for g in groups for t in g}
    df = TermCounts(used | {"physician": 0})
    weights = concept_weights(Q, groups)
    assert weights["physician"] > grounding._BASE_WEIGHT
    assert read_evidence(Q, [SAYS_DOCTOR], groups, df=df).absent_rare == 0.0
    # The same absence read without paraphrases (the model does not read absent_rare): counted.
    monkeypatch.setattr(grounding, "READ_PARAPHRASES", False)
    assert read_evidence(Q, [SAYS_DOCTOR], groups, df=df).absent_rare == pytest.approx(
        weights["physician"] - grounding._BASE_WEIGHT
    )
    monkeypatch.setattr(grounding, "READ_PARAPHRASES", True)
    # A thing the documents never name keeps its absence.
    xg = question_groups(XPATH_Q)
    xdf = TermCounts({t: DF_CAP for g in xg for t in g} | {"xpath": 0})
    assert read_evidence(XPATH_Q, [PARSER], xg, df=xdf).absent_rare > 0.9


def test_every_reader_of_the_table_reads_it_one_way_and_names_its_build_command(tmp_path: Path) -> None:
    """`embed.static.read_piece_table` is what the shipped reading (`piece_table`) and the bench
    scripts (`StaticPieces.load`, `refusal_fit.read_static_tokens`) read the table through: the
    values as stored (float32 for the bench), and a missing file names the command that builds it;
    the shipped reading then reads None."""
    from typing import Any

    from tests.benchkit import load_bench

    pieces: Any = load_bench("static_pieces.py", "static_pieces")
    fit: Any = load_bench("refusal_fit.py", "refusal_fit")
    stored = np.random.default_rng(3).standard_normal((50, 4)).astype(np.float16)
    np.savez_compressed(tmp_path / "t.npz", vectors=stored)
    got = static.read_piece_table(tmp_path / "t.npz")
    assert got.dtype == np.float16 and np.array_equal(got, stored)
    loaded = pieces.StaticPieces.load(tmp_path / "t.npz").table
    assert loaded.dtype == np.float32 and np.array_equal(loaded, stored.astype(np.float32))
    missing = tmp_path / "none.npz"
    build = f"python bench/static_pieces.py --out {missing}"
    for read in (
        static.read_piece_table,
        pieces.StaticPieces.load,
        lambda p: fit.read_static_tokens([], p),
    ):
        with pytest.raises(FileNotFoundError, match=re.escape(build)):
            read(missing)
    assert static.piece_table.__wrapped__(missing) is None
