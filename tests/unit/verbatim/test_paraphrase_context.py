"""An absent question word read in context: said in other words when its contextual MiniLM vector
comes near a word of the evidence read in its own context (`verbatim.grounding.
paraphrased_in_context`, docs/verbatim.md#refusal-context)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evidence.config import Settings
from evidence.embed.pieces import EmbedTokens
from evidence.embed.tokenizer import get_tokenizer
from evidence.verbatim import grounding
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.grounding import (
    DF_CAP,
    TermCounts,
    context_similarity,
    context_words,
    paraphrased_in_context,
    read_evidence,
)

#: "physician" is in no passage of the index; the evidence says "doctor".
Q = "Should a physician stop the drug in kidney failure?"
SAYS_DOCTOR = "Your doctor may stop the medicine if the kidneys fail."
XPATH_Q = "Can the parser run XPath queries on a document?"
PARSER = "The parser reads a document and calls your handler for each element."


def fake_tokens(same: Sequence[tuple[str, str]] = (("physician", "doctor"),)) -> EmbedTokens:
    """A stand-in for `embed_tokens`: each word piece a fixed random unit vector (unrelated pieces
    near cosine 0), the pieces of each pair in `same` the same vector; records its calls."""
    tok = get_tokenizer()
    rng = np.random.default_rng(11)
    table = rng.standard_normal((tok.get_vocab_size(), 64)).astype(np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    for a, b in same:
        (ia,) = tok.encode(a, add_special_tokens=False).ids
        (ib,) = tok.encode(b, add_special_tokens=False).ids
        table[ib] = table[ia]
    calls: list[list[str]] = []

    def embed(texts: Sequence[str]) -> list[np.ndarray]:
        calls.append(list(texts))
        return [table[tok.encode(t, add_special_tokens=False).ids] for t in texts]

    embed.calls = calls  # type: ignore[attr-defined]
    return embed


@pytest.fixture(autouse=True)
def _read_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paraphrases are read only when the model reads `absent_rare` (`READ_RARE`, `READ_PARAPHRASES`; the
    variants with it, `READ_VARIANTS`)."""
    monkeypatch.setattr(grounding, "READ_VARIANTS", True)
    monkeypatch.setattr(grounding, "READ_PARAPHRASES", True)
    monkeypatch.setattr(grounding, "READ_RARE", True)


def test_a_word_is_the_mean_of_its_pieces_found_by_offsets() -> None:
    text = "Call ffi_call with levorphanol."
    ids = get_tokenizer().encode(text, add_special_tokens=False)
    m = np.eye(len(ids.ids), dtype=np.float32)  # piece i: the unit vector e_i
    words, rows = context_words(text, m, lambda w: True)
    # "ffi_call" is two words ("ffi", "call"); the underscore piece belongs to neither.
    assert words == ["call", "ffi", "call", "with", "levorphanol"]
    start = text.index("levorphanol")
    lev = [i for i, (a, _) in enumerate(ids.offsets) if start <= a < start + len("levorphanol")]
    assert len(lev) > 1  # a split word: its pieces averaged
    assert np.flatnonzero(rows[4]).tolist() == lev
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    # `keep` filters; a matrix shorter than the text (its first window) reads only the words it holds.
    assert context_words(text, m, lambda w: w == "ffi")[0] == ["ffi"]
    assert context_words(text, m[:1], lambda w: True)[0] == ["call"]


def test_an_absent_word_the_evidence_says_otherwise_is_paraphrased_in_context() -> None:
    tokens = fake_tokens()
    assert paraphrased_in_context(Q, [("physician",)], [SAYS_DOCTOR], tokens) == {"physician"}
    # One call: the question and every distinct text.
    assert tokens.calls == [[Q, SAYS_DOCTOR]]  # type: ignore[attr-defined]
    assert context_similarity(Q, [("physician",)], [SAYS_DOCTOR], tokens)["physician"] == pytest.approx(1.0)
    # No word of the evidence comes close: not a paraphrase; nor a thing the documents never name.
    assert paraphrased_in_context(Q, [("physician",)], [PARSER], tokens) == frozenset()
    assert paraphrased_in_context(XPATH_Q, [("xpath",)], [PARSER], tokens) == frozenset()
    # Above 1 nothing is; nothing asked or no evidence, nothing read (no model call).
    n = len(tokens.calls)  # type: ignore[attr-defined]
    assert paraphrased_in_context(Q, [("physician",)], [SAYS_DOCTOR], tokens, cosine=1.01) == frozenset()
    assert paraphrased_in_context(Q, [], [SAYS_DOCTOR], tokens) == frozenset()
    assert paraphrased_in_context(Q, [("physician",)], [], tokens) == frozenset()
    assert len(tokens.calls) == n  # type: ignore[attr-defined]


def test_the_question_comes_from_the_embedders_kept_pass() -> None:
    """A store-backed token cache keeps spans, not questions: its `asking(question)` is used."""
    tokens = fake_tokens()
    asked: list[str] = []

    def cached(texts: Sequence[str]) -> Sequence[np.ndarray]:
        return tokens(texts)

    def asking(question: str) -> EmbedTokens:
        asked.append(question)
        return tokens

    cached.asking = asking  # type: ignore[attr-defined]
    assert paraphrased_in_context(Q, [("physician",)], [SAYS_DOCTOR], cached) == {"physician"}
    assert asked == [Q]


def test_absent_rare_reads_paraphrases_in_context_only_with_the_embedder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evidence.embed import static

    static.clear_cache()
    monkeypatch.setattr(static, "piece_table", lambda: None)  # no static table: no static paraphrase
    try:
        groups = question_groups(Q)
        df = TermCounts({t: DF_CAP for g in groups for t in g} | {"physician": 0})
        weights = grounding.concept_weights(Q, groups)
        # Without the word-piece embedder (the setting off): the static reading, which reads nothing here.
        assert read_evidence(Q, [SAYS_DOCTOR], groups, df=df).absent_rare == pytest.approx(
            weights["physician"] - grounding._BASE_WEIGHT
        )
        # With it: "physician" is said ("doctor"), so nothing rare is absent.
        assert read_evidence(Q, [SAYS_DOCTOR], groups, df=df, tokens=fake_tokens()).absent_rare == 0.0
        # A thing the documents never name keeps its absence.
        xg = question_groups(XPATH_Q)
        xdf = TermCounts({t: DF_CAP for g in xg for t in g} | {"xpath": 0})
        assert read_evidence(XPATH_Q, [PARSER], xg, df=xdf, tokens=fake_tokens()).absent_rare > 0.9
        # The model does not read absent_rare: the embedder is never called.
        monkeypatch.setattr(grounding, "READ_PARAPHRASES", False)
        tokens = fake_tokens()
        read_evidence(Q, [SAYS_DOCTOR], groups, df=df, tokens=tokens)
        assert tokens.calls == []  # type: ignore[attr-defined]
    finally:
        static.clear_cache()


def test_the_setting_is_off_by_default_and_reaches_both_profiles() -> None:
    from evidence.profiles.base import ProfileEnv, ProfileServices, refusal_tokens
    from evidence.profiles.verbatim import VerbatimPlugin
    from evidence.verbatim.cascade_model import CascadeConfig
    from evidence.verbatim.profile import VerbatimCascadeStage

    class Embedder:
        def __init__(self, index: str) -> None:
            self.index = index

        def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
            return [np.ones((1, 2), np.float32) for _ in texts]

    def no_coach() -> None:
        raise AssertionError("no coach runtime is needed")

    services = ProfileServices(document_embedder=Embedder, coach_runtime=no_coach)  # type: ignore[arg-type]
    nothing: Any = None  # no backend is read
    assert Settings().refusal_context_paraphrase is False
    assert CascadeConfig().context_paraphrase is False
    for on in (False, True):
        settings = Settings(refusal_context_paraphrase=on)
        env = ProfileEnv(
            backend=nothing, settings=settings, index="i", query_vector=np.ones(3), services=services
        )
        # default/vrm: the index's word-piece embedder, only with the setting on
        assert (refusal_tokens(env) is not None) is on
        # verbatim: the cascade's configuration carries it to `RunState.refusal_tokens`
        stage = VerbatimPlugin().pipeline(env).stages[0]
        assert isinstance(stage, VerbatimCascadeStage)
        assert stage.cascade.config.context_paraphrase is on
    # no query vector (a lexical-only index): no contextual reading
    bare = ProfileEnv(
        backend=nothing, settings=Settings(refusal_context_paraphrase=True), index="i", services=services
    )
    assert refusal_tokens(bare) is None


def test_minilm_in_context_reads_a_verb_synonym_near_and_a_related_term_apart() -> None:
    """The generic check of `bench/refusal_context_pairs.py` (no development text): in context,
    "breach" / "violate" reach the shipped threshold, which the static table (0.26) did not;
    "indemnity" / "warranty" (related, not the same thing) does not."""
    from evidence.embed.minilm import MiniLMEmbedder

    tokens = MiniLMEmbedder().embed_tokens
    said = "If you violate the terms, your rights terminate."
    assert paraphrased_in_context("What happens if I breach the licence?", [("breach",)], [said], tokens) == {
        "breach"
    }
    warranty = "The contract includes a warranty for one year."
    q = "Does the contract include an indemnity?"
    assert paraphrased_in_context(q, [("indemn",)], [warranty], tokens) == frozenset()
    assert (
        0.0
        < context_similarity(q, [("indemn",)], [warranty], tokens)["indemn"]
        < grounding.PARAPHRASE_CONTEXT_COSINE
    )


def test_absent_min_rarity_one_reads_only_split_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Variant S (`ABSENT_MIN_RARITY` 1): an ordinary English word the documents do not use
    ("physician") is no absent fact; a word the WordPiece vocabulary splits ("levorphanol") is."""
    q = "Should a physician give levorphanol?"
    groups = question_groups(q)
    weights = grounding.concept_weights(q, groups)
    df = TermCounts({t: 0 for g in groups for t in g})
    concepts = grounding.unique_concepts(groups)
    missing = [t for g in groups for t in g]
    firsts = {c[0] for c in grounding.absent_concepts(concepts, missing, weights, df)}
    assert {"physician", "levorphanol"} <= firsts
    monkeypatch.setattr(grounding, "ABSENT_MIN_RARITY", 1.0)
    firsts = {c[0] for c in grounding.absent_concepts(concepts, missing, weights, df)}
    assert "levorphanol" in firsts and "physician" not in firsts
