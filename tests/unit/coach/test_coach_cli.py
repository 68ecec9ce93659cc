"""`evidence index --kind graph` and `evidence coach`: outputs, one-line errors, exit codes 0/1/2."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from evidence.cli import common, main
from evidence.coach.contract import CoachResponse
from evidence.config import Settings
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder
from tests.unit.graph.graphkit import SAMPLE, edge, small_obj


@pytest.fixture(autouse=True)
def fast_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's own service, with the hashing embedder instead of loading MiniLM."""

    def service(args: argparse.Namespace) -> EvidenceService:
        return EvidenceService(Settings(store_dir=Path(args.store)), embedder=HashingEmbedder())

    monkeypatch.setattr(common, "service_from_args", service)


def test_index_a_graph_then_coach(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    assert main(["index", str(SAMPLE), "--index", "tutor", "--kind", "graph", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "1 new" in out and "182 passages, 540 spans" in out
    assert (
        main(
            [
                "coach",
                "solve quadratic equations by factoring",
                "--index",
                "tutor",
                "--store",
                store,
                "--intent",
                "tutoring",
                "--json",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    response = CoachResponse.model_validate_json(lines[0])
    assert response.intent == "tutoring" and response.matched_los
    assert main(["coach", "solve quadratic equations", "--index", "tutor", "--store", store]) == 0
    text = capsys.readouterr().out
    assert text.startswith(("answer", "clarify", "out of scope")) and "tokens" in text


def test_request_file_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    assert main(["index", str(SAMPLE), "--index", "tutor", "--kind", "graph", "--store", store]) == 0
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps(
            {
                "query": "factoring trinomials",
                "subject": "calculus",
                "constraints": {"content_types": ["Exercise"], "token_budget": 300},
            }
        )
    )
    capsys.readouterr()
    # The line's options win over the file's: subject algebra, intent practice.
    assert (
        main(
            [
                "coach",
                "--request",
                str(request),
                "--subject",
                "algebra",
                "--intent",
                "practice",
                "--index",
                "tutor",
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    r = CoachResponse.model_validate_json(capsys.readouterr().out)
    assert r.telemetry.applied_filters == ["subject:algebra", "types:Exercise"]
    assert r.intent == "practice" and r.telemetry.tokens <= 300
    assert all(c.type == "Exercise" for c in r.content_items)


def test_errors_are_one_line_with_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "store")
    bad = tmp_path / "bad.json"
    obj = small_obj()
    obj["edges"].append(edge("LO-C", "LO-A"))
    bad.write_text(json.dumps(obj))
    assert main(["index", str(bad), "--index", "tutor", "--kind", "graph", "--store", store]) == 2
    err = capsys.readouterr().err
    assert "PREREQUISITE_OF cycle: LO-A -> LO-B -> LO-C -> LO-A" in err and "nothing indexed" in err
    # Nothing of the refused file was written: the index does not even exist.
    assert main(["coach", "anything", "--index", "tutor", "--store", store]) == 1
    assert "index 'tutor' does not exist" in capsys.readouterr().err
    assert (
        main(["index", str(bad), "--index", "tutor", "--kind", "graph", "--type", "x", "--store", store]) == 2
    )
    missing = tmp_path / "nope.json"
    assert main(["coach", "--request", str(missing), "--index", "tutor", "--store", store]) == 2
    assert "cannot read" in capsys.readouterr().err
    garbage = tmp_path / "g.json"
    garbage.write_text("[1, 2]")
    assert main(["coach", "--request", str(garbage), "--index", "tutor", "--store", store]) == 2
    assert main(["coach", "   ", "--index", "tutor", "--store", store]) == 2
    request = tmp_path / "r.json"
    request.write_text(json.dumps({"query": "x", "constraints": {"top_k": {"lo": 0}}}))
    assert main(["coach", "--request", str(request), "--index", "tutor", "--store", store]) == 2
    assert "constraints.top_k.lo" in capsys.readouterr().err


def test_the_demo_shows_a_coach_exchange(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evidence.cli.demo import coach_demo
    from evidence.demo import COACH_REQUESTS

    service = EvidenceService(Settings(store_dir=tmp_path / "store"), embedder=HashingEmbedder())
    assert coach_demo(service) == 0
    out = capsys.readouterr().out
    assert "profile 'coach' (retrieve over graph nodes)" in out
    for fields in COACH_REQUESTS:
        assert f"== coach: {fields['query']}" in out
    assert out.count(" tokens, ") == len(COACH_REQUESTS)
