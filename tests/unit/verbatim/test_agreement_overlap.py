"""The refusal signal's agreement reads its two rankings at once (`passage_agreement`): the same
value as one after the other, its errors as before, nothing left running."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evidence.errors import BackendError
from evidence.records import Chunk
from evidence.search.embedded import EmbeddedBackend
from evidence.verbatim.grounding import passage_agreement
from tests.unit.rank.rankkit import INDEX, chunk, new_backend, vec

WAIT_S = 30.0  # generous: only ever reached when something is broken
QUESTION = "What is the elimination half-life of the drug?"


def _at(cid: str, text: str, start: int) -> Chunk:
    return replace(chunk(cid, text, doc="d"), char_start=start, char_end=start + len(text))


PASSAGES = [
    _at("p1", "The elimination half-life is about 9 hours.", 0),
    _at("p2", "Store below 25 degrees in the original package.", 100),
    _at("p3", "Peak plasma levels come after 2 hours.", 200),
]


class _DenseAfterLexical:
    """A dense ranking that can only end once BM25 has started: read one after the other, it
    would wait out `WAIT_S` and `lexical_first` would say False."""

    def __init__(self, inner: EmbeddedBackend, fail: str | None = None) -> None:
        self.inner = inner
        self.fail = fail
        self.lexical_started = threading.Event()
        self.lexical_first: list[bool] = []
        self.in_flight = 0
        self._lock = threading.Lock()

    def lexical(self, *args: Any, **kw: Any) -> Any:
        with self._lock:
            self.in_flight += 1
        self.lexical_started.set()
        try:
            if self.fail == "lexical":
                raise BackendError("the lexical ranking broke")
            return self.inner.lexical(*args, **kw)
        finally:
            with self._lock:
                self.in_flight -= 1

    def dense(self, *args: Any, **kw: Any) -> Any:
        self.lexical_first.append(self.lexical_started.wait(WAIT_S))
        if self.fail == "dense":
            raise BackendError("the dense ranking broke")
        return self.inner.dense(*args, **kw)


def test_both_rankings_are_read_at_once_with_the_same_agreement(tmp_path: Path) -> None:
    inner = new_backend(tmp_path / "s", PASSAGES)
    try:
        for source, expected in ((PASSAGES[0], 1.0), (PASSAGES[1], 0.0)):
            backend = _DenseAfterLexical(inner)
            got = passage_agreement(backend, INDEX, QUESTION, vec(source.text), ["d"])  # type: ignore[arg-type]
            assert backend.lexical_first == [True] and got == expected
            assert got == passage_agreement(inner, INDEX, QUESTION, vec(source.text), ["d"])
    finally:
        inner.close()


@pytest.mark.parametrize("fail", ["lexical", "dense"])
def test_a_ranking_the_backend_cannot_read_gives_no_agreement(tmp_path: Path, fail: str) -> None:
    inner = new_backend(tmp_path / "s", PASSAGES)
    try:
        backend = _DenseAfterLexical(inner, fail=fail)
        assert passage_agreement(backend, INDEX, QUESTION, vec(PASSAGES[0].text), ["d"]) is None  # type: ignore[arg-type]
        assert backend.in_flight == 0  # the other ranking ended with the call
    finally:
        inner.close()
