"""An S3 client that serves one object's bytes: the read the indexer makes for a created object,
for tests that drive the indexer Lambda without moto (its write path is what they check)."""

from __future__ import annotations

from typing import Any


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, n: int = -1) -> bytes:
        return self.data if n < 0 else self.data[:n]

    def close(self) -> None:
        pass


class OneObjectS3:
    """`get_object` answers every key with `data` (no metadata, a fixed ETag)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def get_object(self, **_kw: Any) -> dict[str, Any]:
        return {"Body": _Body(self.data), "ContentLength": len(self.data), "ETag": '"e"', "Metadata": {}}
