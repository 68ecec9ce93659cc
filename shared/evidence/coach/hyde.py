"""HyDE (Gao et al., 2022): embed a hypothetical answer to widen recall on vague questions.

The model writes a short passage that would answer the question; its embedding is averaged with
the query's. The passage only steers the dense leg: it is never shown to the coach, never
quoted, and never searched lexically, so it cannot bring facts that are not in the graph.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from evidence.coach.llm import ConverseClient

_SYSTEM = (
    "You write the opening of a short textbook passage that answers a student's maths question. "
    "Two or three plain sentences, no preamble, no questions back."
)


class HydeGenerator:
    name = "hyde"

    def __init__(self, client: ConverseClient, *, max_tokens: int = 120) -> None:
        self.client = client
        self.max_tokens = max_tokens

    def passage(self, query: str, *, subject: str | None, timeout_s: float) -> str:
        user = f"Subject: {subject}\nQuestion: {query}" if subject else f"Question: {query}"
        return self.client.complete(_SYSTEM, user, max_tokens=self.max_tokens, timeout_s=timeout_s)


def blend(
    query_vector: npt.NDArray[np.float32], hyde_vector: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """The normalised mean of the two unit vectors (the query keeps half the weight)."""
    v = np.asarray(query_vector, dtype=np.float32) + np.asarray(hyde_vector, dtype=np.float32)
    n = float(np.linalg.norm(v))
    return (v / n).astype(np.float32) if n > 0 else np.asarray(query_vector, dtype=np.float32)
