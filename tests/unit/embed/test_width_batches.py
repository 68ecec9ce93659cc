"""How the embedder groups its inputs into forward passes (embed/minilm.py `width_batches`)."""

from __future__ import annotations

import random

import pytest

from evidence.embed.minilm import width_batches


def test_a_passage_and_its_short_tail_are_two_passes_of_their_own_widths() -> None:
    # A SciFact upload: one full 256-piece passage and a tail; the tail is not padded to 256.
    assert width_batches([256, 103], 8, 32, 256) == [(128, [1]), (256, [0])]


@pytest.mark.parametrize("seed", range(5))
def test_every_input_once_in_a_batch_of_one_width_that_holds_it(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(3, 256) for _ in range(rng.randint(1, 60))]
    batches = width_batches(lengths, 8, 32, 256)
    seen = sorted(i for _, batch in batches for i in batch)
    assert seen == list(range(len(lengths)))
    for width, batch in batches:
        assert 1 <= len(batch) <= 8
        assert width <= 256 and (width % 32 == 0 or width == 256)
        # Each input's own rounded width: no row padded past it.
        assert all(max(lengths[i], -(-lengths[i] // 32) * 32) >= width >= lengths[i] for i in batch)
    widths = [w for w, _ in batches]
    assert widths == sorted(widths)


def test_exact_widths_when_pad_to_is_one_and_over_long_inputs_keep_their_length() -> None:
    assert width_batches([5, 5, 7], 2, 1, 256) == [(5, [0, 1]), (7, [2])]
    assert width_batches([300], 8, 32, 256) == [(300, [0])]


def test_short_inputs_are_padded_in_steps_of_eight_up_to_fine_to() -> None:
    # A fact span's sentence of 38 pieces runs at width 40, not 64 (docs/ingest.md#span-vectors-at-indexing).
    assert width_batches([38, 38, 60, 65, 103, 5], 8, 32, 256, fine_to=64) == [
        (8, [5]),
        (40, [0, 1]),
        (64, [2]),
        (96, [3]),
        (128, [4]),
    ]
    assert width_batches([38], 8, 32, 256) == [(64, [0])]


def test_the_finer_padding_gives_the_same_vectors_bit_for_bit() -> None:
    """The attention mask keeps the padding out of every row: widths in steps of 8, of 32 and
    exact give the same document vectors (what makes the finer steps a pure speed-up)."""
    import numpy as np

    from evidence.embed.minilm import FINE_WIDTH, MiniLMEmbedder

    emb = MiniLMEmbedder()
    texts = [
        "Keys rotate every 365 days in a hardware security module.",
        "Data at rest is encrypted with AES-256.",
        "Table 1: Request limits per plan | Plan | Requests per minute | Burst | | Team | 600 | 100 |",
        "Storage",
        " ".join(f"Note {n} says that region {n} keeps {n} copies of each object." for n in range(6)),
        " ".join(f"Clause {n} applies to every party of the agreement." for n in range(40)),
    ]
    inputs, _ = emb.windows(texts)
    assert any(len(x) <= FINE_WIDTH and len(x) % 32 for x in inputs) and any(
        len(x) > FINE_WIDTH for x in inputs
    )
    fine = emb.embed_ids(inputs)
    assert np.array_equal(fine, emb.embed_ids(inputs, fine_to=0))
    assert np.array_equal(fine, emb.embed_ids(inputs, pad_to=1, fine_to=0))
    assert np.array_equal(emb.embed_documents(texts), fine)
