"""Amazon Titan Text Embeddings v2 on Bedrock (optional, per index).

One `InvokeModel` call per text (the model takes one input), normalised
server-side, 1024 dims by default (256 and 512 are the other sizes). boto3 is
imported and the client built on first use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from evidence.embed.base import Matrix
from evidence.errors import ConfigurationError, UpstreamError

TITAN_DIMENSIONS = (256, 512, 1024)


class TitanEmbedder:
    def __init__(
        self,
        *,
        model_id: str = "amazon.titan-embed-text-v2:0",
        region: str | None = None,
        dimension: int = 1024,
        client: Any | None = None,
    ) -> None:
        if dimension not in TITAN_DIMENSIONS:
            raise ConfigurationError(f"Titan v2 dimension must be one of {TITAN_DIMENSIONS}, got {dimension}")
        self.bedrock_model = model_id
        self.region = region
        self.dimension = dimension
        # The index records this id: another model or size is refused at query time.
        self.model_id = f"{model_id}@{dimension}"
        self._client = client
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import boto3

                    self._client = boto3.client("bedrock-runtime", region_name=self.region)
        return self._client

    def _embed_one(self, text: str) -> Matrix:
        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})
        try:
            resp = self._get_client().invoke_model(
                modelId=self.bedrock_model,
                body=body,
                contentType="application/json",
                accept="application/json",
            )
            payload = json.loads(resp["body"].read())
            vec = np.asarray(payload["embedding"], dtype=np.float32)
        except (KeyError, ValueError) as exc:
            raise UpstreamError(f"Titan returned an unexpected response: {exc}") from exc
        except Exception as exc:
            if type(exc).__module__.startswith("botocore"):
                raise UpstreamError(f"Bedrock InvokeModel failed: {exc}") from exc
            raise
        if vec.shape != (self.dimension,):
            raise UpstreamError(f"Titan returned {vec.shape[0]} dimensions, expected {self.dimension}")
        return vec

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.stack([self._embed_one(t) for t in texts])

    def embed_query(self, text: str) -> Matrix:
        return self._embed_one(text)
