"""The span scorer's token-level match (`verbatim/span_rank.py`, `token_paraphrase`): the question
words a span lacks, read in the span's own word pieces (MaxSim), and the `tokens` model that
uses it only when word-piece vectors can be had."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evidence.embed.minilm import MiniLMEmbedder
from evidence.embed.pieces import EmbedTokens
from evidence.errors import ServiceUnavailableError
from evidence.verbatim.span_rank import (
    DENSE_FEATURES,
    LEXICAL_FEATURES,
    TOKEN_FEATURES,
    IndexEmbed,
    LinearModel,
    QuestionPieces,
    SpanModel,
    TokenCache,
    load_model,
    rank_spans,
    token_match,
    token_source,
    tokens_of,
)
from tests.unit.verbatim.verbatimkit import span


def test_only_the_words_a_span_lacks_are_read_in_its_pieces() -> None:
    q = QuestionPieces(
        vectors=np.zeros((3, 2), dtype=np.float32),
        weights=np.asarray([1.0, 0.5, 0.5]),
        terms=(frozenset({"kidney"}), frozenset({"failur"}), frozenset({"medicin"})),
    )
    sims = np.asarray([0.8, 0.6, 0.95])
    # "medicin" is in the span: the mean is over the other two, weighted by rarity
    assert token_match(q, sims, {"medicin", "dose"}) == {"token_paraphrase": pytest.approx((0.8 + 0.3) / 1.5)}
    # every word held: 1 (the lexical features already say it)
    assert token_match(q, sims, {"kidney", "failur", "medicin"}) == {"token_paraphrase": 1.0}
    assert token_match(q, np.zeros(0), set()) == {"token_paraphrase": 0.0}


#: Each question, a span that answers it in other words, and one that shares its words.
PARAPHRASES = [
    (
        "What happens if the licensee breaches the terms?",
        "Any violation of these conditions ends your rights under this license automatically.",
        "The licensee must keep the terms of this license with every copy.",
    ),
    (
        "Is the medicine safe for people with kidney failure?",
        "Reduce the dose in patients with renal impairment.",
        "Store the medicine in a safe place away from people who may misuse it.",
    ),
]


@pytest.mark.parametrize(("question", "paraphrase", "distractor"), PARAPHRASES)
def test_a_paraphrasing_span_ranks_above_a_word_sharing_one_with_the_real_model(
    question: str, paraphrase: str, distractor: str
) -> None:
    spans = [span(0, distractor, section="Terms"), span(1, paraphrase, section="Terms")]
    lexical = {f: np.zeros(2) for f in LEXICAL_FEATURES}
    lexical["bm25"] = np.asarray([1.0, 0.2])  # the distractor shares the question's words
    model = SpanModel(
        lexical=LinearModel({"bm25": 1.0}),
        dense=LinearModel({"bm25": 1.0}),
        top_n=2,
        tokens=LinearModel({"bm25": 1.0, "token_paraphrase": 10.0}),
    )
    tokens = TokenCache(MiniLMEmbedder().embed_tokens)

    def embed(texts: Sequence[str]) -> Any:
        return np.tile([1.0, 0.0], (len(texts), 1))

    def order(embed_tokens: EmbedTokens | None) -> list[int]:
        out = rank_spans(
            spans,
            lexical,
            candidates=[0, 1],
            model=model,
            query_vector=np.asarray([1.0, 0.0]),
            embed=embed,
            question=question,
            embed_tokens=embed_tokens,
        )
        return [i for _, i in out]

    assert order(tokens) == [1, 0]
    # without word-piece vectors the model without the feature ranks: the shared words win
    assert order(None) == [0, 1]

    # a token embedder that fails leaves the model without the feature, not an error
    def failing(texts: Sequence[str]) -> list[Any]:
        raise ServiceUnavailableError("down")

    assert order(failing) == [0, 1]


def test_the_token_cache_embeds_a_text_once_and_stays_within_its_bound() -> None:
    asked: list[str] = []

    def embed_tokens(texts: Sequence[str]) -> list[Any]:
        asked.extend(texts)
        return [np.ones((4, 8), dtype=np.float32) for _ in texts]

    cache = TokenCache(embed_tokens, max_bytes=3 * 4 * 8 * 2)  # three matrices of float16
    out = cache(["a", "b", "a"])
    assert asked == ["a", "b"] and [m.shape for m in out] == [(4, 8)] * 3
    cache(["a", "b"])
    assert asked == ["a", "b"]  # held
    cache(["c", "d"])  # four matrices: the least recently used ("a") is dropped
    cache(["b", "a"])
    assert asked == ["a", "b", "c", "d", "a"]


def test_the_word_piece_embedder_is_found_behind_the_index_s_wrappers() -> None:
    class Model:
        def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
            return [np.ones((1, 2)) for _ in texts]

    class Wrapper:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

    model = Model()
    found = token_source(Wrapper(Wrapper(model)))
    assert isinstance(found, TokenCache) and found is token_source(model)
    assert token_source(Wrapper(object())) is None  # a remote model: no pieces
    assert tokens_of(IndexEmbed(lambda: Wrapper(model))) is found
    assert tokens_of(IndexEmbed(object)) is None
    assert tokens_of(lambda texts: texts) is None  # a bare embed callable offers none


def test_the_fitted_file_has_a_tokens_model_and_a_fallback_without_it() -> None:
    model = load_model()
    assert model.tokens is not None
    assert set(model.tokens.weights) <= {*DENSE_FEATURES, *TOKEN_FEATURES}
    assert model.tokens.weights["token_paraphrase"] > 0
    assert not set(model.dense.weights) & set(TOKEN_FEATURES)
    assert SpanModel.from_dict(model.to_dict()) == model
