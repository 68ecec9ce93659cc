"""Settings refuse an EVIDENCE_ variable that names no setting instead of ignoring it."""

from __future__ import annotations

from typing import Any

import pytest

from evidence.config import Settings, environment_names, unknown_environment
from evidence.errors import ConfigurationError


def test_a_misspelt_variable_is_refused_with_the_closest_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENCE_RERANKR", "cohere")
    with pytest.raises(ConfigurationError) as raised:
        Settings()
    message = raised.value.message
    assert "EVIDENCE_RERANKR is not a setting" in message
    assert "did you mean EVIDENCE_RERANKER?" in message


def test_every_unknown_name_is_listed_and_case_does_not_hide_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("evidence_store_dri", "/tmp/x")
    monkeypatch.setenv("EVIDENCE_ZZZ", "1")
    with pytest.raises(ConfigurationError) as raised:
        Settings()
    assert "evidence_store_dri is not a setting (did you mean EVIDENCE_STORE_DIR?)" in raised.value.message
    assert "EVIDENCE_ZZZ is not a setting;" in raised.value.message


def test_valid_names_any_case_and_other_prefixes_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDENCE_RERANKER", "none")
    monkeypatch.setenv("evidence_passage_tokens", "128")
    monkeypatch.setenv("EVIDENCEX_OTHER", "1")
    monkeypatch.setenv("EVIDENCE_FUZZ_EXAMPLES", "5")  # the fuzz test's knob, not a setting
    assert Settings().passage_tokens == 128


def test_unknown_environment_is_pure() -> None:
    assert unknown_environment({"EVIDENCE_BACKEND": "embedded", "PATH": "/bin"}) == []
    assert unknown_environment({"EVIDENCE_BACKND": "x"}) == [("EVIDENCE_BACKND", "EVIDENCE_BACKEND")]
    assert "EVIDENCE_DEFAULT_INDEX" in environment_names()


def test_min_similarity_has_one_range_everywhere() -> None:
    """Seed 003's floor is 0-1 in the settings, in a request's override (and so in
    EVIDENCE_PROFILE_DEFAULTS, validated by the same model) and in the OpenAPI document."""
    from pydantic import ValidationError

    from evidence.api.openapi import openapi_document
    from evidence.model import Overrides

    schema = openapi_document()["components"]["schemas"]["RetrieveRequest"]["properties"]["min_similarity"]
    branch = next(b for b in schema.get("anyOf", [schema]) if b.get("type") == "number")
    assert (branch["minimum"], branch["maximum"]) == (0.0, 1.0)
    assert "0-1" in schema["description"]
    for value in (-0.5, 1.5):
        with pytest.raises(ValidationError):
            Settings(min_similarity=value)
        with pytest.raises(ValidationError) as err:
            Overrides(min_similarity=value)
        assert err.value.errors()[0]["loc"] == ("min_similarity",)
    assert Settings(min_similarity=0.3).min_similarity == Overrides(min_similarity=0.3).min_similarity


@pytest.mark.parametrize("name", ["max_body_bytes", "max_document_bytes"])
def test_a_size_limit_is_at_least_a_byte(name: str) -> None:
    """0 or a negative limit would refuse every body or document as too large (413) instead of
    naming the setting (docs/settings.md)."""
    from pydantic import ValidationError

    for value in (0, -1, 1):
        given: dict[str, Any] = {name: value}
        if value < 1:
            with pytest.raises(ValidationError):
                Settings(**given)
        else:
            assert getattr(Settings(**given), name) == 1


def test_the_default_refusal_floor_is_the_fitted_one() -> None:
    """`EVIDENCE_ANSWER_MIN_GROUNDING`'s default and `verbatim.grounding.HITS_REFUSAL_FLOOR` are
    one fitted value written in two places (config may not import the verbatim layer);
    `make refusal-fit` prints it for both, and this holds a refit that pastes one of them."""
    from evidence.verbatim.grounding import HITS_REFUSAL_FLOOR

    assert Settings.model_fields["answer_min_grounding"].default == HITS_REFUSAL_FLOOR
