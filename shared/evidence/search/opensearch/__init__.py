"""OpenSearch adapter behind the SearchBackend port (Amazon OpenSearch Service, Serverless, self-managed).

- Auth: basic auth when a username is configured, SigV4 (`AWSV4SignerAuth`, service `es` or
  `aoss`, credentials from boto3) for AWS endpoints, none for a local/loopback cluster. The
  service comes from EVIDENCE_OPENSEARCH_SERVICE, else from the endpoint (`*.aoss.amazonaws.com`).
- Every call has a deadline (`evidence.retry`: the request's, else `request_deadline_s`) and
  goes through `_call`: 429, 5xx and connection errors are retried with backoff while the
  deadline allows; a read timeout on a query is not (the budget is spent). Giving up on a
  transient failure is `ServiceUnavailableError` (503, Retry-After); everything else becomes a
  typed error (IndexNotFoundError, BackendError with the server's reason, EmbedderMismatchError).
- Writes (docs/opensearch.md, "Writes"): one bulk request per chunk of actions, each result
  attributed to its action by position within its own request (and checked by `_id`), only
  unacknowledged actions resent, a document's marker written only once all its chunks are
  acknowledged and its stale rows removed. An index whose recorded indexing settings
  (`_meta.written_with`) differ from the writer's is refused before anything is written
  (IndexSettingsMismatchError; docs/opensearch.md#indexing-settings-of-an-index).
- opensearch-py and boto3 are imported inside functions; the client is built on first use.
- Request bodies come from `opensearch_bodies` (validated against the official API spec in
  tests, per supported version); this module only sequences calls.

Scores: `lexical` returns OpenSearch's BM25 `_score` unchanged; `dense` converts the
`cosinesimil` score back to cos in [-1, 1] (`opensearch_responses.cosine_from_score`); `hybrid`
(server mode) returns the search pipeline's fused score, with per-leg scores attached when
`explain=True`.

The adapter is one class assembled from one module per responsibility:

- `transport.py`: the client, deadlines, retries and error translation;
- `serverless.py`: the signing service (`es` / `aoss`) and SigV4;
- `admin.py`: indexes, versions, capabilities and search pipelines;
- `bulk.py`: upserts and deletes;
- `queries.py`: lexical, dense and hybrid search, lookups and vectors.
"""

from __future__ import annotations

from evidence.search.opensearch.bulk import BulkWrites
from evidence.search.opensearch.queries import Search
from evidence.search.opensearch.serverless import service_for
from evidence.search.opensearch.transport import DEFAULT_BULK_BYTES, DEFAULT_BULK_DOCS, Fusion, build_client

__all__ = [
    "DEFAULT_BULK_BYTES",
    "DEFAULT_BULK_DOCS",
    "Fusion",
    "OpenSearchBackend",
    "build_client",
    "service_for",
]


class OpenSearchBackend(BulkWrites, Search):
    """SearchBackend on OpenSearch. Thread-safe for concurrent queries (the client is)."""
