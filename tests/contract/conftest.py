"""The backend fixture: every contract test runs on each SearchBackend adapter.

- embedded: `EmbeddedBackend` on a temp store (always);
- opensearch: `OpenSearchBackend` against osmem-server (an in-memory OpenSearch-compatible
  server, started once per session on a loopback port, one clone per test). Every request the
  adapter sends there is recorded and its body validated against OpenSearch's official API spec
  after the test. osmem has no k-NN, hybrid or search pipelines: tests that need them are
  marked `needs_knn` and skipped on this variant (the unit tier proves those bodies on the spec
  and their response parsing on the spec's stories).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from evidence.config import Settings
from evidence.search.base import SearchBackend
from tests.prerequisites import missing
from tests.unit.search.opensearch.spec_cache import SPEC_HINT, load_spec, validate_sent
from tests.unit.search.opensearch.spec_validator import parse_version

BACKENDS = ["embedded", "opensearch"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_knn: needs k-NN search (osmem-server has none)")
    config.addinivalue_line(
        "markers", "serverless: the fault proxy plays an OpenSearch Serverless collection"
    )


@pytest.fixture(scope="session")
def osmem_server() -> Iterator[Any]:
    """Overrides the osmem plugin's fixture: no seed, no Japanese analysis (faster start)."""
    from osmem_server import OsmemError, OsmemServer, resolve_binary

    try:
        resolve_binary()
    except OsmemError as exc:  # pragma: no cover - depends on the platform wheel
        missing("osmem-server", f"install the osmem-server wheel for this platform ({exc})")

    server = OsmemServer.start(japanese=False)
    yield server
    server.close()


def _recording_client(url: str, log: list[tuple[str, str, Any]]) -> Any:
    from opensearchpy import OpenSearch, Transport

    class _Recording(Transport):
        def perform_request(  # type: ignore[override]
            self, method: str, url: str, params: Any = None, body: Any = None, **kwargs: Any
        ) -> Any:
            query = f"?{urlencode(params)}" if params else ""  # recorded, so tests can check params
            log.append((method, url + query, body))
            return super().perform_request(method, url, params=params, body=body, **kwargs)

    return OpenSearch(hosts=[url], transport_class=_Recording, timeout=10, max_retries=0)


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    if kind == "opensearch" and request.node.get_closest_marker("needs_knn"):
        # Deferred to the spec tests, so the spec must be there for the deferral to mean anything.
        if load_spec() is None:
            missing("opensearch-api-spec", SPEC_HINT)
        pytest.skip("osmem-server has no k-NN/hybrid; proven on the spec in tests/unit/search/opensearch")
    return kind


@pytest.fixture
def backend(backend_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SearchBackend]:
    if backend_kind == "embedded":
        from evidence.search.embedded import EmbeddedBackend

        emb = EmbeddedBackend(tmp_path / "store")
        yield emb
        emb.close()
        return

    from evidence.search.opensearch import OpenSearchBackend

    clone = request.getfixturevalue("osmem_clone")
    log: list[tuple[str, str, Any]] = []
    client = _recording_client(clone.url, log)
    settings = Settings(backend="opensearch", opensearch_endpoint=clone.url)
    osb = OpenSearchBackend(settings, client=client, max_retries=0)
    yield osb
    osb.close()
    version = parse_version(request.getfixturevalue("osmem_server").version)
    sent = [(method, url, body) for method, url, body in log if body is not None]
    validate_sent(sent, version=version, made=bool(log))
