"""One loaded spec per test session, shared by the unit and contract tiers; URL -> spec path matching."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.prerequisites import missing
from tests.unit.search.opensearch.spec_validator import (
    OpenSearchSpec,
    find_spec_root,
    ndjson_lines,
    validate_msearch,
)

REPO = Path(__file__).resolve().parents[4]
SPEC_HINT = (
    "check out opensearch-project/opensearch-api-specification as ../shared/opensearch-api-spec "
    "(next to the repository)"
)


@lru_cache(maxsize=1)
def load_spec() -> OpenSearchSpec | None:
    """OPENSEARCH_API_SPEC names another checkout (or a missing one, to test the CI rule)."""
    override = os.environ.get("OPENSEARCH_API_SPEC")
    if override is None:
        root = find_spec_root(REPO)
    else:
        root = Path(override) if (Path(override) / "spec" / "namespaces" / "_core.yaml").exists() else None
    return None if root is None else OpenSearchSpec.load(root)


@cache
def _templates(spec_id: int, method: str) -> list[tuple[int, re.Pattern[str], str]]:
    spec = load_spec()
    assert spec is not None and id(spec) == spec_id
    out = []
    for uri, doc in spec.documents.items():
        if "/spec/namespaces/" not in uri:
            continue
        for path, ops in (doc.get("paths") or {}).items():
            op = ops.get(method)
            if op is None or "requestBody" not in op:
                continue
            literal = sum(1 for seg in path.split("/") if seg and not seg.startswith("{"))
            pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
            out.append((literal, pattern, path))
    out.sort(key=lambda t: -t[0])
    return out


def spec_path(spec: OpenSearchSpec, method: str, url: str) -> str | None:
    """`/idx/_search` -> `/{index}/_search`: the most literal template that matches."""
    path = urlsplit(url).path
    for _literal, pattern, template in _templates(id(spec), method.lower()):
        if pattern.match(path):
            return template
    return None


_VALID: set[tuple[str, str, str, tuple[int, ...] | None]] = set()


def validate_recorded(
    spec: OpenSearchSpec, method: str, url: str, body: Any, *, version: tuple[int, ...] | None = None
) -> str:
    """Validate one recorded request (against `version` when given); returns the spec path it
    was checked against.

    Bodies already found valid are remembered (the mappings take ~1 s to check and every
    contract test creates the same index).
    """
    template = spec_path(spec, method, url)
    if template is None:
        raise AssertionError(f"{method} {url}: no spec operation with a request body matches")
    if template.endswith("_msearch"):
        lines = ndjson_lines(body)
        key = (method.lower(), template, json.dumps(lines, sort_keys=True), version)
        if key not in _VALID:
            validate_msearch(spec, lines, version=version)
            _VALID.add(key)
        return template
    if template.endswith("_bulk"):
        body = ndjson_lines(body)
    elif isinstance(body, bytes | str):
        body = json.loads(body)
    key = (method.lower(), template, json.dumps(body, sort_keys=True), version)
    if key not in _VALID:
        spec.validate_request(method, template, body, version=version)
        _VALID.add(key)
    return template


def validate_sent(
    sent: Sequence[tuple[str, str, Any]], *, version: tuple[int, ...] | None, made: bool = True
) -> None:
    """After a test: each request body it sent (method, url, body) validated against the API spec
    at `version` (`validate_recorded`); fails when requests were `made` but no body was checked.
    The contract tests' fixtures share it; without the spec the test is skipped (failed in CI)."""
    spec = load_spec()
    if spec is None:  # pragma: no cover - the spec ships next to the repo
        missing("opensearch-api-spec", SPEC_HINT)
    for method, url, body in sent:
        validate_recorded(spec, method, url, body, version=version)
    assert sent or not made, "no request bodies were validated"
