"""A small Bedrock Converse client for the coach's optional LLM steps (intent, HyDE).

Each call has a hard time budget: the request runs on a worker thread and the caller waits at
most `timeout_s` (botocore's read timeout is set to the same value, so the abandoned call ends
soon after). Failures become `LLMError` with a short reason ("timeout", "throttled",
"unavailable", "error", "bad_response"); callers degrade instead of failing the request.
boto3 is imported and the client built on first use (Lambda cold start).
"""

from __future__ import annotations

from typing import Any

from evidence.aws import Converse
from evidence.errors import UpstreamError


class LLMError(UpstreamError):
    code = "llm_error"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


_THROTTLED = {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
_UNAVAILABLE = {"InternalServerException", "ServiceUnavailableException", "ModelNotReadyException"}


class ConverseClient:
    """`complete(system, user)` → the model's text, through `bedrock-runtime` Converse."""

    def __init__(
        self, *, region: str | None, model_id: str, client: Any = None, timeout_s: float = 1.0
    ) -> None:
        self.model_id = model_id
        self._timeout_s = timeout_s
        self._converse = Converse(region=region, timeout_s=timeout_s, client=client, pool="coach-llm")

    def use_client(self, client: Any) -> None:
        """Send calls through `client` from now on (a test's stubbed client)."""
        self._converse.use(client)

    def request(self, system: str, user: str, max_tokens: int) -> dict[str, Any]:
        return {
            "modelId": self.model_id,
            "system": [{"text": system}],
            "messages": [{"role": "user", "content": [{"text": user}]}],
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": 0.0},
        }

    def _call(self, system: str, user: str, max_tokens: int) -> str:
        from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, ReadTimeoutError

        try:
            response = self._converse.call(self.request(system, user, max_tokens))
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise LLMError(f"Bedrock converse timed out: {exc}", reason="timeout") from exc
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            reason = "throttled" if code in _THROTTLED else "unavailable" if code in _UNAVAILABLE else "error"
            raise LLMError(f"Bedrock converse failed: {code}", reason=reason) from exc
        except BotoCoreError as exc:
            raise LLMError(f"Bedrock converse failed: {exc}", reason="unavailable") from exc
        try:
            parts = response["output"]["message"]["content"]
            text = "".join(p["text"] for p in parts if "text" in p)
        except (KeyError, TypeError) as exc:
            raise LLMError("Bedrock converse: malformed response", reason="bad_response") from exc
        if not text.strip():
            raise LLMError("Bedrock converse: empty answer", reason="bad_response")
        return text

    def complete(
        self, system: str, user: str, *, max_tokens: int = 200, timeout_s: float | None = None
    ) -> str:
        budget = self._timeout_s if timeout_s is None else min(timeout_s, self._timeout_s)
        if budget <= 0:
            raise LLMError("no time left for the LLM call", reason="timeout")
        try:
            return self._converse.within(lambda: self._call(system, user, max_tokens), budget)
        except TimeoutError:
            raise LLMError(
                f"Bedrock converse exceeded its {budget * 1000:.0f} ms budget", reason="timeout"
            ) from None
