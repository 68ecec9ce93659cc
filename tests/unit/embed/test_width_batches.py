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
