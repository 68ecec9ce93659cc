"""Where a batch's results go: S3 in the cloud (`s3://` URIs), the process's memory locally."""

from __future__ import annotations

import json
from typing import Any, Protocol
from urllib.parse import quote

from evidence.errors import BadRequestError


class ResultStore(Protocol):
    def put_json(self, uri: str, payload: dict[str, Any]) -> None: ...

    def get_json(self, uri: str) -> dict[str, Any]: ...


class MemoryStore:
    """Local runs: results stay in the process and go to --out at the end."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_json(self, uri: str, payload: dict[str, Any]) -> None:
        self.objects[uri] = json.dumps(payload, ensure_ascii=False).encode("utf-8")

    def get_json(self, uri: str) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.objects[uri])
        except KeyError as exc:
            raise BadRequestError(f"no stored result at {uri}", field="retrieve_uri") from exc
        return data


class S3Store:
    def __init__(self, client: Any | None = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from evidence.api import runtime

            self._client = runtime.get_s3_client()
        return self._client

    @staticmethod
    def split(uri: str) -> tuple[str, str]:
        if not uri.startswith("s3://"):
            raise BadRequestError(f"not an s3:// URI: {uri!r}", field="output_s3_uri")
        bucket, _, key = uri[5:].partition("/")
        return bucket, key

    def put_json(self, uri: str, payload: dict[str, Any]) -> None:
        bucket, key = self.split(uri)
        self.client.put_object(
            Bucket=bucket,
            Key=key,
            Body=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            ContentType="application/json",
        )

    def get_json(self, uri: str) -> dict[str, Any]:
        bucket, key = self.split(uri)
        body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        data: dict[str, Any] = json.loads(body)
        return data


def store_for(uri: str) -> ResultStore:
    return S3Store() if uri.startswith("s3://") else MemoryStore()


def child_uri(base: str, criterion_id: str, suffix: str) -> str:
    """Where one criterion's result goes under a batch's output URI."""
    return f"{base.rstrip('/')}/{quote(criterion_id, safe='')}{suffix}"
