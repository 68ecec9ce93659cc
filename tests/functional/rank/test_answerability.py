"""`can_answer` and `confidence` on a small real index (the demo's vendor documents, the real
MiniLM embedder), through the retriever handler: an in-domain question is answered, an unrelated
one is not, in every profile; hits are withheld only when `withhold_below` asks for it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence.api import runtime
from evidence.config import Settings
from evidence.format.evidence import NO_EVIDENCE_XML
from evidence.service import EvidenceService
from evidence.testing import LambdaContext, load_event
from functions.retriever.handler import handler
from tests.functional.conftest import body

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[3] / "shared" / "evidence" / "demo" / "data"
IN_DOMAIN = "Is customer data encrypted at rest?"
UNRELATED = "What is the capital of France?"


@pytest.fixture(scope="module")
def real_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvidenceService]:
    settings = Settings(store_dir=tmp_path_factory.mktemp("store"))
    service = EvidenceService(settings)  # the real MiniLM: the calibration is its own
    report = service.index_paths("vendor", [DEMO / "vendor"])
    assert not report.failed
    runtime.configure(service=service, settings=settings)
    yield service
    runtime.close()


def retrieve(context: LambdaContext, **request: Any) -> dict[str, Any]:
    event = load_event(
        "apigw/retrieve",
        path="/v1/indexes/vendor/retrieve",
        pathParameters={"index": "vendor"},
        body=json.dumps(request),
    )
    response = handler(event, context)
    assert response["statusCode"] == 200, response["body"]
    out: dict[str, Any] = body(response)
    return out


@pytest.mark.parametrize("profile", ["default", "vrm"])
def test_in_domain_is_answered_and_unrelated_is_not(
    real_service: EvidenceService, context: LambdaContext, profile: str
) -> None:
    yes = retrieve(context, query=IN_DOMAIN, profile=profile)
    no = retrieve(context, query=UNRELATED, profile=profile)
    assert yes["can_answer"] and yes["confidence"] >= 0.5
    assert not no["can_answer"] and no["confidence"] < 0.1
    if profile == "vrm":
        # vrm's relevancy cutoff reads a calibrated relevance without a reranker: nothing pads.
        assert no["hits"] == [] and no["telemetry"]["answer"]["basis"] == "none"
        assert no["evidence_xml"] == NO_EVIDENCE_XML
    for r in (yes, no) if profile == "default" else (yes,):
        answer = r["telemetry"]["answer"]
        assert answer["basis"] == "dense"
        assert set(answer["features"]) == {
            "cosine",
            "coverage",
            "grounding",
            "answer_probability",
            "agreement",
        }
        assert not answer["withheld"]
    if profile == "default":
        # The default policy flags: the hits stay, the verdict says what they are worth.
        assert no["hits"] and no["evidence_xml"] != NO_EVIDENCE_XML


def test_withhold_below_cuts_only_what_the_signal_rejects(
    real_service: EvidenceService, context: LambdaContext
) -> None:
    no = retrieve(context, query=UNRELATED, withhold_below=0.5)
    assert no["hits"] == [] and no["evidence_xml"] == NO_EVIDENCE_XML and no["valid_indexes"] == []
    assert no["telemetry"]["answer"]["withheld"] and not no["can_answer"]
    yes = retrieve(context, query=IN_DOMAIN, withhold_below=0.5)
    assert yes["hits"] and not yes["telemetry"]["answer"]["withheld"]


def test_withhold_below_is_range_checked(real_service: EvidenceService, context: LambdaContext) -> None:
    event = load_event(
        "apigw/retrieve",
        path="/v1/indexes/vendor/retrieve",
        pathParameters={"index": "vendor"},
        body=json.dumps({"query": IN_DOMAIN, "withhold_below": 1.5}),
    )
    response = handler(event, context)
    assert response["statusCode"] == 422 and "withhold_below" in response["body"]
