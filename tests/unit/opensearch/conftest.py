from __future__ import annotations

import pytest

from tests.unit.opensearch.spec_cache import load_spec
from tests.unit.opensearch.spec_validator import OpenSearchSpec


@pytest.fixture(scope="session")
def spec() -> OpenSearchSpec:
    """The official OpenSearch API spec, loaded once per session (~1 s)."""
    loaded = load_spec()
    if loaded is None:  # pragma: no cover - the spec ships next to the repo
        pytest.skip("opensearch-api-spec not found next to the repo")
    return loaded
