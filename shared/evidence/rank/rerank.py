"""Rerankers behind one port: Cohere (v2 API), Bedrock `Rerank`, or none.

Relevance scores are in [0, 1]. An adapter raises `RerankError` (with a short `reason`:
"timeout", "throttled", "unavailable", "error", "bad_response", and a message that says why:
"401 from Cohere: …", "no AWS credentials", "timeout after 5.0 s waiting for Bedrock") and never
anything else; the rerank stage turns that into first-stage order plus `degraded:
["rerank:<reason>"]`, the why in the stage's `detail.fallback` and the log, so a reranker outage
never fails a request. SDKs are imported inside methods and clients are built on first use, so
importing this module costs nothing (Lambda cold start).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from evidence.aws import Lazy, lazy_boto3_client
from evidence.config import RerankerKind, Settings
from evidence.errors import ConfigurationError, UpstreamError
from evidence.retry import (
    Backoff,
    RetriesExhausted,
    Retry,
    call_with_retries,
    current_deadline,
    parse_retry_after,
)

log = logging.getLogger(__name__)

RerankResult = list[tuple[int, float]]

#: Both Cohere's v2 API and Bedrock's Rerank accept at most 1,000 documents per call.
MAX_DOCUMENTS = 1000


class RerankError(UpstreamError):
    code = "rerank_error"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@runtime_checkable
class Reranker(Protocol):
    """`rerank` returns (index into `texts`, relevance in [0, 1]), best first, at most top_n."""

    name: str

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> RerankResult: ...


def _results_asked(texts: Sequence[str], top_n: int | None) -> int:
    """How many results one rerank call asks the service for: `top_n` within [1, len(texts)], all
    by default; more than `MAX_DOCUMENTS` texts is refused before any call."""
    if len(texts) > MAX_DOCUMENTS:
        raise RerankError(f"at most {MAX_DOCUMENTS} documents per rerank call", reason="error")
    return len(texts) if top_n is None else max(1, min(top_n, len(texts)))


def _excerpt(body: Any, limit: int = 160) -> str:
    """The provider's own words from an error body (`{"message": ...}` or text), shortened."""
    text = body.get("message", body) if isinstance(body, dict) else body
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: What a refused Cohere call most often means, by status.
_COHERE_STATUS = {
    401: "the API key was refused (EVIDENCE_COHERE_API_KEY)",
    403: "the API key may not use this model",
    404: "no such model or endpoint (EVIDENCE_COHERE_MODEL, EVIDENCE_COHERE_BASE_URL)",
}


def cohere_status_message(status: int, body: Any) -> str:
    why = _COHERE_STATUS.get(status) or _excerpt(body) or "no detail"
    return f"{status} from Cohere: {why}"


def _validated(results: RerankResult, n_texts: int, top_n: int) -> RerankResult:
    seen: set[int] = set()
    for index, score in results:
        if not 0 <= index < n_texts or index in seen:
            raise RerankError(f"reranker returned an invalid index {index}", reason="bad_response")
        if math.isnan(score):
            raise RerankError("reranker returned a NaN score", reason="bad_response")
        seen.add(index)
    return sorted(results, key=lambda r: (-r[1], r[0]))[:top_n]


class CohereReranker:
    """Cohere's `POST /v2/rerank` through `cohere.ClientV2`.

    The SDK's own retries are switched off so that ours decide (`evidence.retry`, shared with the
    OpenSearch adapter): 429 and 5xx are retried with exponential backoff and jitter (honouring a
    short Retry-After) while the request's deadline allows, other 4xx fail at once, and a timeout
    is not retried because the request's latency budget is already spent.
    """

    name = "cohere"

    def __init__(
        self,
        *,
        api_key: str,
        model: str = "rerank-v3.5",
        base_url: str | None = None,
        timeout_s: float = 5.0,
        retries: int = 2,
        max_tokens_per_doc: int = 4096,
        backoff_s: float = 0.25,
        max_backoff_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not api_key:
            raise ConfigurationError(
                "the Cohere reranker needs an API key: set EVIDENCE_COHERE_API_KEY or "
                "EVIDENCE_COHERE_API_KEY_SECRET_ARN"
            )
        if timeout_s <= 0 or retries < 0 or max_tokens_per_doc < 1 or backoff_s < 0:
            raise ConfigurationError("Cohere reranker: timeout > 0, retries >= 0, max_tokens_per_doc >= 1")
        self.model = model
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._retries = retries
        self._max_tokens_per_doc = max_tokens_per_doc
        self._backoff = Backoff(retries=retries, base_s=backoff_s, max_s=max_backoff_s)
        self._sleep = sleep
        self._client: Lazy[Any] = Lazy(self._build_client)

    def _build_client(self) -> Any:
        import cohere

        kwargs: dict[str, Any] = {"timeout": self._timeout_s, "max_retries": 0}
        if self._base_url:
            kwargs["base_url"] = self._base_url
        return cohere.ClientV2(self._api_key, **kwargs)

    def _get_client(self) -> Any:
        return self._client.get()

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> RerankResult:
        if not texts:
            return []
        n = _results_asked(texts, top_n)
        import httpx
        from cohere.core.api_error import ApiError

        client = self._get_client()
        deadline = current_deadline()

        def attempt(_n: int) -> RerankResult:
            # The request's deadline, when there is one, also bounds each attempt's timeout.
            timeout = self._timeout_s if deadline is None else deadline.clamp(self._timeout_s)
            response = client.rerank(
                model=self.model,
                query=query,
                documents=list(texts),
                top_n=n,
                max_tokens_per_doc=self._max_tokens_per_doc,
                request_options={"timeout": timeout},
            )
            results = [(int(r.index), float(r.relevance_score)) for r in response.results]
            return _validated(results, len(texts), n)

        def classify(exc: Exception) -> Retry | None:
            if not isinstance(exc, ApiError):
                return None
            status = exc.status_code or 0
            if status != 429 and status < 500:
                return None
            headers = exc.headers or {}
            return Retry(parse_retry_after(headers.get("retry-after") or headers.get("Retry-After")))

        def log_retry(exc: Exception, number: int, delay: float) -> None:
            log.warning(
                "Cohere rerank HTTP %s, retry %d in %.2fs", getattr(exc, "status_code", "?"), number, delay
            )

        try:
            return call_with_retries(
                attempt,
                backoff=self._backoff,
                classify=classify,
                deadline=deadline,
                sleep=self._sleep,
                on_retry=log_retry,
            )
        except RetriesExhausted as exc:
            raise self._exhausted(exc) from exc.cause
        except ApiError as exc:
            raise RerankError(cohere_status_message(exc.status_code or 0, exc.body), reason="error") from exc
        except httpx.TimeoutException as exc:
            raise RerankError(
                f"timeout after {self._timeout_s} s waiting for Cohere", reason="timeout"
            ) from exc
        except httpx.HTTPError as exc:
            where = self._base_url or "api.cohere.com"
            raise RerankError(f"cannot reach Cohere at {where}: {exc}", reason="unavailable") from exc
        except (ValueError, TypeError, AttributeError) as exc:
            raise RerankError(f"malformed response from Cohere: {exc}", reason="bad_response") from exc

    def _exhausted(self, exc: RetriesExhausted) -> RerankError:
        from cohere.core.api_error import ApiError

        if not isinstance(exc.cause, ApiError):  # the deadline passed before an attempt
            return RerankError("the request's deadline passed before Cohere answered", reason="timeout")
        status = exc.cause.status_code or 0
        tries = f"{exc.attempts} attempt" + ("" if exc.attempts == 1 else "s")
        if exc.deadline_reached:
            tries += ", then the request's deadline"
        message = f"{cohere_status_message(status, exc.cause.body)} ({tries})"
        return RerankError(message, reason="throttled" if status == 429 else "unavailable")


def bedrock_model_arn(model: str, region: str) -> str:
    """Bedrock Rerank wants a foundation-model ARN; a bare model id is expanded."""
    if model.startswith("arn:"):
        return model
    return f"arn:aws:bedrock:{region}::foundation-model/{model}"


class BedrockReranker:
    """Amazon Bedrock `Rerank` (bedrock-agent-runtime), e.g. `cohere.rerank-v3-5:0`.

    botocore's "standard" retry mode retries throttling and 5xx with backoff; we only map its
    final errors to `RerankError`.
    """

    name = "bedrock"

    def __init__(
        self,
        *,
        region: str,
        model: str = "cohere.rerank-v3-5:0",
        timeout_s: float = 5.0,
        retries: int = 2,
        client: Any = None,
    ) -> None:
        if not region:
            raise ConfigurationError("the Bedrock reranker needs a region (EVIDENCE_AWS_REGION)")
        self.model_arn = bedrock_model_arn(model, region)
        self._region = region
        self._timeout_s = timeout_s
        self._retries = retries
        self._client = lazy_boto3_client(
            "bedrock-agent-runtime",
            region=region,
            timeout_s=timeout_s,
            max_attempts=retries + 1,
            client=client,
        )

    def _get_client(self) -> Any:
        return self._client.get()

    def request(self, query: str, texts: Sequence[str], top_n: int) -> dict[str, Any]:
        return {
            "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": [
                {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                for t in texts
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": top_n,
                    "modelConfiguration": {"modelArn": self.model_arn},
                },
            },
        }

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> RerankResult:
        if not texts:
            return []
        n = _results_asked(texts, top_n)
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        try:
            response = self._get_client().rerank(**self.request(query, texts, n))
            results = [(int(r["index"]), float(r["relevanceScore"])) for r in response["results"]]
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise RerankError(
                f"timeout after {self._timeout_s} s waiting for Bedrock", reason="timeout"
            ) from exc
        except ClientError as exc:
            raise bedrock_client_error(exc.response.get("Error", {})) from exc
        except NoCredentialsError as exc:
            raise RerankError("no AWS credentials for Bedrock", reason="unavailable") from exc
        except EndpointConnectionError as exc:
            raise RerankError(f"cannot reach Bedrock: {exc}", reason="unavailable") from exc
        except BotoCoreError as exc:
            raise RerankError(f"Bedrock call failed: {exc}", reason="unavailable") from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise RerankError(f"malformed response from Bedrock: {exc}", reason="bad_response") from exc
        return _validated(results, len(texts), n)


_BEDROCK_THROTTLED = frozenset({"ThrottlingException", "ServiceQuotaExceededException"})
_BEDROCK_UNAVAILABLE = frozenset(
    {"InternalServerException", "BadGatewayException", "DependencyFailedException"}
)


def bedrock_client_error(error: Mapping[str, Any]) -> RerankError:
    """`AccessDeniedException from Bedrock: <its message>`, with the reason its code implies."""
    code = str(error.get("Code", "")) or "error"
    reason = (
        "throttled"
        if code in _BEDROCK_THROTTLED
        else "unavailable"
        if code in _BEDROCK_UNAVAILABLE
        else "error"
    )
    detail = _excerpt(error.get("Message", ""))
    return RerankError(f"{code} from Bedrock" + (f": {detail}" if detail else ""), reason=reason)


@lru_cache(maxsize=4)
def secret_string(arn: str, region: str | None) -> str:
    """A Secrets Manager secret's string (a plain key, or JSON with an `api_key` field)."""
    import json

    import boto3

    try:
        value = boto3.client("secretsmanager", region_name=region).get_secret_value(SecretId=arn)[
            "SecretString"
        ]
    except Exception as exc:
        raise ConfigurationError(f"cannot read the Cohere API key secret {arn}: {exc}") from exc
    if value.lstrip().startswith("{"):
        try:
            return str(json.loads(value)["api_key"])
        except (ValueError, KeyError) as exc:
            raise ConfigurationError(f"secret {arn} is JSON without an 'api_key' field") from exc
    return str(value).strip()


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker the settings ask for (None for `none`); ConfigurationError if incomplete."""
    kind = settings.reranker
    if kind == RerankerKind.NONE:
        return None
    if kind == RerankerKind.COHERE:
        key = settings.cohere_api_key.get_secret_value() if settings.cohere_api_key else ""
        if not key and settings.cohere_api_key_secret_arn:
            key = secret_string(settings.cohere_api_key_secret_arn, settings.aws_region)
        return CohereReranker(
            api_key=key,
            model=settings.cohere_model,
            base_url=settings.cohere_base_url,
            timeout_s=settings.rerank_timeout_s,
            retries=settings.rerank_retries,
        )
    if kind == RerankerKind.BEDROCK:
        return BedrockReranker(
            region=settings.aws_region or "",
            model=settings.bedrock_rerank_model,
            timeout_s=settings.rerank_timeout_s,
            retries=settings.rerank_retries,
        )
    raise ConfigurationError(f"unknown reranker {kind!r}")  # pragma: no cover - enum is closed
