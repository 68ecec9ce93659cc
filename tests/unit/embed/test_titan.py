"""Bedrock Titan v2 embedder through botocore's Stubber (no live Bedrock here)."""

from __future__ import annotations

import io
import json

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from evidence.embed.titan import TitanEmbedder
from evidence.errors import ConfigurationError, UpstreamError


def _body(payload: dict[str, object]) -> StreamingBody:
    raw = json.dumps(payload).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def test_titan_embeds_through_invoke_model() -> None:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    emb = TitanEmbedder(client=client, dimension=256)
    vec = list(np.linspace(-1, 1, 256))
    with Stubber(client) as stub:
        stub.add_response(
            "invoke_model",
            {"body": _body({"embedding": vec, "inputTextTokenCount": 3}), "contentType": "application/json"},
            {
                "modelId": "amazon.titan-embed-text-v2:0",
                "contentType": "application/json",
                "accept": "application/json",
                "body": json.dumps({"inputText": "key rotation", "dimensions": 256, "normalize": True}),
            },
        )
        out = emb.embed_query("key rotation")
    assert out.shape == (256,) and out.dtype == np.float32
    assert emb.model_id == "amazon.titan-embed-text-v2:0@256"


def test_titan_errors_are_typed() -> None:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    emb = TitanEmbedder(client=client, dimension=256)
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", "slow down")
        with pytest.raises(UpstreamError, match="InvokeModel failed"):
            emb.embed_query("x")
        stub.add_response("invoke_model", {"body": _body({"embedding": [0.1] * 8}), "contentType": "a/j"})
        with pytest.raises(UpstreamError, match="8 dimensions"):
            emb.embed_query("x")
    with pytest.raises(ConfigurationError):
        TitanEmbedder(dimension=300)
