"""`SearchBackend.term_counts` on the embedded store: for every text, exactly the number of hits
`lexical(text, k=cap)` returns (the refusal model was fitted on those), within the same filters."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evidence.errors import IndexNotFoundError
from evidence.records import ChunkKind
from evidence.search.base import Filters
from evidence.search.embedded import EmbeddedBackend
from tests.unit.rank.rankkit import INDEX, chunk, new_backend, store

WORDS = ["kernel", "ports", "RISC-V", "x86", "installer", "disk", "memory", "embedded", "cache", "sync"]
TEXTS = [*WORDS, "the", "", "   ", "embed", "risc", "nothing-like-this", "cache sync", "RISC-V"]


@pytest.fixture
def backend(tmp_path: Path) -> EmbeddedBackend:
    rng = random.Random(7)
    chunks = []
    for i in range(160):
        words = rng.sample(WORDS, rng.randint(1, 4))
        tenant = "a" if i % 3 else "b"
        chunks.append(chunk(f"c{i}", f"Passage {i} about {' and '.join(words)}.", meta={"tenant": tenant}))
    return new_backend(tmp_path / "store", chunks)


@pytest.mark.parametrize("cap", [1, 7, 50, 500])
@pytest.mark.parametrize("filters", [None, {"tenant": "a"}, {"tenant": ["a", "b"]}, {"tenant": "c"}])
def test_counts_equal_the_lexical_hit_counts(
    backend: EmbeddedBackend, cap: int, filters: Filters | None
) -> None:
    counts = backend.term_counts(INDEX, TEXTS, cap=cap, filters=filters)
    assert list(counts) == list(dict.fromkeys(TEXTS))
    for text, n in counts.items():
        assert n == len(backend.lexical(INDEX, text, k=cap, filters=filters)), text
    # Counted up to the cap, no further: "cache sync" reaches 50, no text 500.
    reached = max(counts.values()) == cap
    assert reached is (cap <= 50 and filters != {"tenant": "c"})


def test_counts_by_kind_and_errors(backend: EmbeddedBackend) -> None:
    for kind in (ChunkKind.SPAN, None):
        counts = backend.term_counts(INDEX, WORDS, cap=50, kind=kind)
        assert counts == {w: len(backend.lexical(INDEX, w, k=50, kind=kind)) for w in WORDS}
    assert backend.term_counts(INDEX, ["kernel"], cap=0) == {"kernel": 0}
    assert backend.term_counts(INDEX, [], cap=50) == {}
    with pytest.raises(IndexNotFoundError):
        backend.term_counts("no-such-index", ["kernel"], cap=50)


def test_counts_follow_writes(backend: EmbeddedBackend) -> None:
    before = backend.term_counts(INDEX, ["zephyr"], cap=50, filters={"tenant": "a"})
    store(backend, [chunk("z", "Zephyr boards.", meta={"tenant": "b"})])
    assert before == {"zephyr": 0}
    assert backend.term_counts(INDEX, ["zephyr"], cap=50, filters={"tenant": "a"}) == {"zephyr": 0}
    assert backend.term_counts(INDEX, ["zephyr"], cap=50) == {"zephyr": 1}
