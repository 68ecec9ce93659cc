"""Token-level vectors from the real MiniLM model (embed/minilm.py `embed_tokens`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from evidence.embed.minilm import ASKED_KEPT, DIMENSION, FINE_STEP, FINE_WIDTH, MiniLMEmbedder, _pieces
from evidence.embed.tokenizer import get_tokenizer


def test_one_unit_vector_per_word_piece_and_pooling_them_gives_the_text_vector() -> None:
    emb = MiniLMEmbedder()
    texts = ["Discontinue if creatinine clearance falls below 30 mL/min.", "key rotation", ""]
    tokens = emb.embed_tokens(texts)
    pieces = [len(e.ids) for e in get_tokenizer().encode_batch(texts, add_special_tokens=False)]
    assert [t.shape for t in tokens] == [(n, DIMENSION) for n in pieces]
    assert np.allclose(np.linalg.norm(tokens[0], axis=1), 1.0, atol=1e-5)
    # Same forward pass as the pooled vector: the unnormalised pieces and [CLS]/[SEP] pool to it,
    # so the normalised pieces alone point the same way (not equal: norms and the specials differ).
    pooled = emb.embed_documents(texts[:1])[0]
    assert float(tokens[0].mean(axis=0) @ pooled) / float(np.linalg.norm(tokens[0].mean(axis=0))) > 0.9


def test_a_word_matches_its_own_piece_in_context_better_than_an_unrelated_one() -> None:
    emb = MiniLMEmbedder()
    span_text = "Reduce the dose in renal impairment; avoid in pregnancy."
    query, span = emb.embed_tokens(["kidney failure", span_text])
    pieces = get_tokenizer().encode(span_text, add_special_tokens=False).tokens
    # "kidney" finds "renal": a match by meaning that no lexical signal sees.
    assert pieces[int((query[0] @ span.T).argmax())] == "renal"
    assert (query @ span.T).max(axis=1).min() > 0.3


def test_a_question_just_embedded_gives_its_word_pieces_without_a_second_pass() -> None:
    """`embed_query` keeps its pass's word pieces for `embed_tokens` (the span scorer asks the
    question's pieces right after its vector): the same matrices, one forward pass fewer."""
    emb = MiniLMEmbedder()
    plain = MiniLMEmbedder()
    question = "How long should opioid therapy continue after surgery?"
    span = "Opioids for acute pain should rarely be needed for more than 7 days."
    vector = emb.embed_query(question)
    assert np.array_equal(vector, plain.embed_ids(plain.windows([question], first_only=True)[0], pad_to=1)[0])
    runs: list[int] = []
    hidden = emb._hidden

    def counted(ids: Any, pad_to: int, fine_to: int = 0) -> Any:
        runs.append(len(ids))
        return hidden(ids, pad_to, fine_to)

    emb._hidden = counted  # type: ignore[method-assign]
    got = emb.embed_tokens([question, span])
    want = plain.embed_tokens([question, span])
    assert runs == [1]  # only the span went through the model
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    # Taken once: asked again, the question is embedded again.
    emb.embed_tokens([question])
    assert runs == [1, 1]
    # Only the last few questions are kept.
    for n in range(ASKED_KEPT + 1):
        emb.embed_query(f"question number {n}")
    assert len(emb._asked) == ASKED_KEPT and "question number 0" not in emb._asked


def test_word_pieces_are_padded_in_fine_steps_and_are_the_same_bits() -> None:
    """`embed_tokens` pads its inputs as document inputs are (steps of `FINE_STEP` up to
    `FINE_WIDTH` pieces, not 32): a 20-piece span runs at width 24, not 32, and its pieces are
    bit-identical to a pass padded in steps of 32 (the attention mask keeps padding out)."""
    emb = MiniLMEmbedder()
    texts = [
        "Discontinue if creatinine clearance falls below 30 mL/min.",
        "The widget filter must be replaced every 6 months, or sooner in dusty rooms and near heat.",
        "key rotation",
        "A licensee may terminate this agreement at any time by giving thirty days' written notice "
        "to the licensor, and the licensor may terminate it if the licensee breaches any term.",
    ]
    widths: list[int] = []
    hidden = emb._hidden

    def seen(ids: Any, pad_to: int, fine_to: int = 0) -> Any:
        for batch, mask, h in hidden(ids, pad_to, fine_to):
            widths.append(mask.shape[1])
            yield batch, mask, h

    emb._hidden = seen  # type: ignore[method-assign]
    got = emb.embed_tokens(texts)
    lengths = sorted({len(x) for x in emb.windows(texts, first_only=True)[0]})
    assert widths == sorted(
        {-(-n // FINE_STEP) * FINE_STEP if n <= FINE_WIDTH else -(-n // 32) * 32 for n in lengths}
    )
    # The old padding (steps of 32), pass by pass: the same bits.
    inputs, _ = emb.windows(texts, first_only=True)
    old: list[Any] = [None] * len(texts)
    for batch, _, h in hidden(inputs, 32):
        for row, j in enumerate(batch):
            old[j] = _pieces(h[row], len(inputs[j]))
    assert all(np.array_equal(a, b) for a, b in zip(got, old, strict=True))
