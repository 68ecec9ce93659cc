"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis).

Against a live `evidence serve` (in-thread, loopback) with an embedded store in a temp
folder and the hashing test embedder. Every operation gets positive (schema-valid) and
negative (schema-violating) cases; index-scoped operations also get positive cases aimed
at an index that exists, so retrieval runs its whole pipeline on generated overrides.
Checks: no 5xx, documented status codes, content type and response schema conformance,
negative data rejected with 4xx, positive data accepted. Deterministic (derandomized).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence.api import runtime
from evidence.config import Settings
from evidence.server import ApiServer, make_server
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, load_event

MAX_EXAMPLES = int(os.environ.get("EVIDENCE_FUZZ_EXAMPLES", "50"))
INDEX = "vendor-acme"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    store = Path(tmp_path_factory.mktemp("fuzz")) / "store"
    settings = Settings(store_dir=store)
    service = EvidenceService(settings, embedder=HashingEmbedder())
    runtime.configure(service=service, settings=settings)
    from evidence.model import IndexDocumentRequest

    # A knowledge graph too, so that coach requests run their whole pipeline.
    for name in ("index_document", "index_followup", "index_graph"):
        service.index_document(
            INDEX, IndexDocumentRequest.model_validate_json(load_event(f"apigw/{name}")["body"])
        )
    srv = make_server("127.0.0.1", 0, max_body_bytes=settings.max_body_bytes)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    runtime.close()


def _run(op: Any, mode: Any, base: str, pin: bool, counts: dict[str, int]) -> list[str]:
    from hypothesis import HealthCheck, Phase, given, settings

    strategy = op.as_strategy(mode, path_parameters={"index": INDEX}) if pin else op.as_strategy(mode)
    label = f"{op.method.upper()} {op.path} [{mode.value}{', existing index' if pin else ''}]"
    failures: list[str] = []

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=strategy)
    def check(case: Any) -> None:
        counts[label] = counts.get(label, 0) + 1
        case.call_and_validate(base_url=base, timeout=30, excluded_checks=excluded)

    excluded = []
    if op.path.endswith("/documents") and op.method.lower() == "post":
        from schemathesis.specs.openapi.checks import positive_data_acceptance

        # Schema-valid is not content-valid: an empty text or random base64 bytes under a
        # ".pdf" name are documented 422s (unparseable_document), not server errors.
        excluded.append(positive_data_acceptance)
    if op.path.endswith("/evaluate"):
        from schemathesis.specs.openapi.checks import positive_data_acceptance

        # Schema-valid text is rarely a QA or qrels set: a documented 422 naming the line.
        excluded.append(positive_data_acceptance)
    if op.path.endswith("/assessments"):
        from schemathesis.specs.openapi.checks import positive_data_acceptance

        # Criterion ids must be unique within a batch (each names its result), a rule JSON Schema
        # cannot state: a schema-valid body with a repeated id is a documented 422.
        excluded.append(positive_data_acceptance)
    try:
        check()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise  # collect every operation's failure, then report them all
        failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:1500]}")
    return failures


@pytest.mark.slow
def test_fuzz_api_from_openapi(live: ApiServer) -> None:
    import schemathesis
    from schemathesis.generation.modes import GenerationMode

    base = live.url
    schema = schemathesis.openapi.from_url(f"{base}/v1/openapi.json")
    counts: dict[str, int] = {}
    failures: list[str] = []
    started = time.perf_counter()
    for result in schema.get_all_operations():
        op = result.ok()  # type: ignore[union-attr]
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and not (op.body or op.path_parameters):
                continue  # nothing to negate on GET /v1/health and /v1/openapi.json
            failures += _run(op, mode, base, pin=False, counts=counts)
            if mode is GenerationMode.POSITIVE and "{index}" in op.path:
                failures += _run(op, mode, base, pin=True, counts=counts)
    seconds = time.perf_counter() - started
    summary = {
        "examples": sum(counts.values()),
        "seconds": round(seconds, 1),
        "per_run": counts,
        "failures": len(failures),
    }
    print("\nFUZZ " + json.dumps(summary, indent=1))
    assert not failures, "\n\n".join(failures)
