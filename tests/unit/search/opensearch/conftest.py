from __future__ import annotations

import pytest

from tests.prerequisites import missing
from tests.unit.search.opensearch.spec_cache import SPEC_HINT, load_spec
from tests.unit.search.opensearch.spec_validator import OpenSearchSpec


@pytest.fixture(scope="session")
def spec() -> OpenSearchSpec:
    """The official OpenSearch API spec, loaded once per session (~1 s)."""
    loaded = load_spec()
    if loaded is None:
        missing("opensearch-api-spec", SPEC_HINT)
    return loaded
