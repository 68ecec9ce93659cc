"""Helpers for tests, `evidence invoke` and README examples: the fixture library of events/.

`load_event("apigw/retrieve")` reads `events/apigw/retrieve.json` from the repository;
keyword overrides replace top-level keys. `lambda_context()` is a stand-in for the
Lambda runtime's context object. `HashingEmbedder` is a deterministic, dependency-free
embedder for tests where the real MiniLM model is not the point.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


def events_dir(start: Path | None = None) -> Path:
    """The repository's events/ folder: found from `start` (default: the working directory)
    or from this package's location, walking up."""
    candidates = [start or Path.cwd(), Path(__file__).resolve()]
    for origin in candidates:
        for folder in (origin, *origin.parents):
            if (folder / "events").is_dir() and (folder / "functions").is_dir():
                return folder / "events"
    raise FileNotFoundError("no events/ folder found next to a functions/ folder")


def load_event(name: str, /, **overrides: Any) -> dict[str, Any]:
    """`name` is a path under events/, with or without `.json` ("sqs/s3_put")."""
    path = Path(name)
    if not path.is_absolute() and not path.exists():
        path = events_dir() / name
    if path.suffix != ".json":
        path = path.with_suffix(".json")
    event: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    event.update(overrides)
    return event


@dataclass
class LambdaContext:
    """Duck-typed `aws_lambda_powertools.utilities.typing.LambdaContext`."""

    function_name: str = "evidence-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:evidence-local"
    log_group_name: str = "/aws/lambda/evidence-local"
    log_stream_name: str = "local"
    timeout_ms: int = 30_000

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_ms


def lambda_context(function_name: str = "evidence-local") -> LambdaContext:
    return LambdaContext(
        function_name=function_name,
        invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}",
    )


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature-hashed bag of words (plus character trigrams), L2-normalised.

    Deterministic and instant; similar texts share tokens and so get high cosine.
    For tests only: it knows nothing about meaning.
    """

    model_id = "test/hashing-v1"

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        vec = np.zeros(self.dimension, dtype=np.float32)
        tokens = [t.casefold() for t in _TOKEN.findall(text)]
        grams = [t[i : i + 3] for t in tokens for i in range(max(1, len(t) - 2))]
        for feature, weight in [(t, 1.0) for t in tokens] + [(g, 0.3) for g in grams]:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.dimension
            sign = 1.0 if digest[4] & 1 else -1.0
            vec[slot] += sign * weight
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / norm

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._vector(text)


class RecordingEmbedder(HashingEmbedder):
    """A `HashingEmbedder` that records every text it embeds as a document (`embedded`): what a
    test of "embedded once / never at query time" reads."""

    def __init__(self, dimension: int = 384) -> None:
        super().__init__(dimension)
        self.embedded: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.embedded.extend(texts)
        return super().embed_documents(texts)


class PrecomputedEmbedder:
    """Document vectors looked up by the SHA-256 of their text; queries go to `query_model`.

    For a quality gate that must run on every test run without embedding a corpus: the vectors
    were computed once by the real model (bench/quality_slice.py) and stand in for it, under its
    model id. A text with no stored vector means the slice is stale: the error says how to rebuild.
    """

    def __init__(
        self, keys: Sequence[str], vectors: npt.NDArray[np.floating[Any]], query_model: Any, rebuild: str
    ) -> None:
        self._rows = {k: i for i, k in enumerate(keys)}
        self._vectors = np.asarray(vectors, dtype=np.float32)
        self._query_model = query_model
        self._rebuild = rebuild
        self.model_id: str = query_model.model_id
        self.dimension: int = int(self._vectors.shape[1])

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = []
        for t in texts:
            row = self._rows.get(self.key(t))
            if row is None:
                raise LookupError(f"no stored vector for a text of {len(t)} characters; {self._rebuild}")
            rows.append(row)
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = self._vectors[rows]
        return np.asarray(out / np.linalg.norm(out, axis=1, keepdims=True), dtype=np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return np.asarray(self._query_model.embed_query(text), dtype=np.float32)
