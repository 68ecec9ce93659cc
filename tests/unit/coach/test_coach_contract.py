"""Seed 004's request and response shapes, with its defaults, field for field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evidence.coach.contract import CoachRequest, CoachResponse

SEED = next((Path(__file__).resolve().parents[4] / "shared" / "seeds").glob("004_*.txt"), None)


def _seed_json(label: str) -> dict:  # type: ignore[type-arg]
    """The request or response example of the seed's I/O contract."""
    if SEED is None:
        pytest.skip("seed 004 is not next to the repository")
    text = SEED.read_text(encoding="utf-8")
    block = text[text.index(f"- **{label}**") :]
    body = re.search(r"```json\s*(\{.*?\n\})\s*```", block, re.S)
    assert body is not None
    loaded: dict[Any, Any] = json.loads(body.group(1))
    return loaded


def _keys(obj: object, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= _keys(v, f"{prefix}{k}.")
    elif isinstance(obj, list) and obj:
        out |= _keys(obj[0], f"{prefix}[].")
    return out


def test_the_seeds_request_parses_as_written() -> None:
    req = CoachRequest.model_validate(_seed_json("Request"))
    assert req.constraints.top_k.lo == 5 and req.constraints.graph_depth.prereq == 1
    assert req.constraints.content_types == ["Example", "Exercise"]
    assert req.constraints.difficulties() == ["intro"]


def test_defaults_are_the_seeds() -> None:
    c = CoachRequest(query="explain chain rule").constraints
    assert (c.top_k.lo, c.top_k.content) == (6, 6)
    assert (c.graph_depth.prereq, c.graph_depth.content) == (1, 1)
    assert c.token_budget == 900 and c.timeout_ms == 1200
    assert c.content_types is None and c.difficulty is None


def test_response_has_every_field_of_the_seeds_example() -> None:
    example = _seed_json("Response")
    ours = CoachResponse.model_json_schema()

    def schema_keys(schema: dict, defs: dict, prefix: str = "") -> set[str]:  # type: ignore[type-arg]
        out: set[str] = set()
        for name, prop in schema.get("properties", {}).items():
            out.add(prefix + name)
            target = prop.get("items", prop)
            ref = target.get("$ref") or next(
                (a.get("$ref") for a in target.get("anyOf", []) if "$ref" in a), None
            )
            if ref:
                sub = defs[ref.split("/")[-1]]
                nested = f"{prefix}{name}.[]." if "items" in prop else f"{prefix}{name}."
                out |= schema_keys(sub, defs, nested)
        return out

    have = schema_keys(ours, ours.get("$defs", {}))
    want = {k for k in _keys(example) if not k.startswith("telemetry.stages.")}
    assert want <= have, f"missing: {sorted(want - have)}"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "intent": "chat"}, "intent"),
        ({"query": "x", "constraints": {"difficulty": "hard"}}, "constraints"),
        ({"query": "x", "constraints": {"top_k": {"lo": 0}}}, "constraints"),
        ({"query": "x", "constraints": {"top_k": 5}}, "constraints"),
        ({"query": "x", "constraints": {"graph_depth": {"prereq": 9}}}, "constraints"),
        ({"query": "x", "constraints": {"token_budget": 10}}, "constraints"),
        ({"query": "x", "constraints": {"content_types": [""]}}, "constraints"),
        ({"query": "x", "seek": True}, "seek"),
    ],
)
def test_bad_requests_name_the_field(body: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError) as info:
        CoachRequest.model_validate(body)
    assert info.value.errors()[0]["loc"][0] == field


def test_difficulty_is_one_level_or_a_list() -> None:
    c = CoachRequest.model_validate({"query": "x", "constraints": {"difficulty": ["core", "intro", "core"]}})
    assert c.constraints.difficulties() == ["core", "intro"]
