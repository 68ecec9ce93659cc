"""Time and token budgets of a coach request.

Time: `Deadline` holds the request's `timeout_ms`; before an optional stage runs, the engine asks
whether the time left covers that stage's expected cost (`StageCosts`: a moving average of what
the stage took in this process, seeded with defaults). A stage that would overrun is skipped and
named in `telemetry.degraded` (`"rerank:skipped_timeout"`), and the response is built from what
the earlier stages found.

Tokens: counted with the embedder's WordPiece tokenizer (MiniLM's, the default embedder; an
index built with Titan is counted with the same tokenizer, an approximation).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from functools import lru_cache

#: Expected milliseconds per optional stage before any has been measured (2-core machine).
DEFAULT_COSTS: Mapping[str, float] = {
    "intent": 200.0,
    "embed": 15.0,
    "hyde": 200.0,
    "hybrid": 25.0,
    "rerank": 250.0,
    "mmr": 3.0,
    "graph": 15.0,
    "compress": 15.0,
}


class Deadline:
    def __init__(self, timeout_ms: float, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.start = clock()
        self.timeout_ms = float(timeout_ms)

    @property
    def elapsed_ms(self) -> float:
        return (self.clock() - self.start) * 1000.0

    @property
    def remaining_ms(self) -> float:
        return self.timeout_ms - self.elapsed_ms

    def allows(self, cost_ms: float) -> bool:
        return self.remaining_ms >= cost_ms


class StageCosts:
    """Per-stage cost estimates: an exponential moving average of observed durations."""

    def __init__(self, seed: Mapping[str, float] | None = None, *, alpha: float = 0.2) -> None:
        self._est = dict(DEFAULT_COSTS if seed is None else seed)
        self._alpha = alpha
        self._lock = threading.Lock()

    def estimate(self, stage: str) -> float:
        return self._est.get(stage, 0.0)

    def observe(self, stage: str, ms: float) -> None:
        with self._lock:
            old = self._est.get(stage)
            self._est[stage] = ms if old is None else (1 - self._alpha) * old + self._alpha * ms


class TokenCounter:
    """Word pieces of a text, without special tokens."""

    def __init__(self, count: Callable[[str], int] | None = None) -> None:
        self._count = count or _wordpiece_count

    def count(self, text: str) -> int:
        return self._count(text) if text else 0


def _wordpiece_count(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=1)
def _tokenizer():  # type: ignore[no-untyped-def]
    from evidence.embed.tokenizer import get_tokenizer

    return get_tokenizer()
