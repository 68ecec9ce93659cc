"""What each built-in profile's plug-in owns that the service used to decide by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence.config import Settings
from evidence.ids import criterion_hash
from evidence.model import Plan, PlanRequest
from evidence.profiles import PipelinePlugin, ProfileEnv, get_plugin, profile_names
from evidence.rank.pipeline import Profile
from tests.unit.rank.rankkit import INDEX, new_backend

QUESTION = "Is customer data encrypted at rest?"


@pytest.fixture
def env(tmp_path: Path) -> ProfileEnv:
    return ProfileEnv(new_backend(tmp_path), Settings(store_dir=tmp_path), index=INDEX)


def test_every_registered_profile_has_stages_named_after_it() -> None:
    for name in profile_names():
        plugin = get_plugin(name)
        assert plugin.name == name and isinstance(plugin.pipeline(), Profile)
        assert plugin.pipeline().name == name and plugin.pipeline().stages


@pytest.mark.parametrize(("name", "own_criterion"), [("default", False), ("vrm", True), ("coach", False)])
def test_only_vrm_takes_the_question_as_its_criterion(
    env: ProfileEnv, name: str, own_criterion: bool
) -> None:
    plan, degraded = get_plugin(name).plan(PlanRequest(query=QUESTION, profile=name), env)
    assert plan.profile == name and plan.planner == "rules" and degraded == []
    assert plan.criterion_hash == (criterion_hash(QUESTION) if own_criterion else None)


def test_the_verbatim_plan_is_the_cascade_planner(env: ProfileEnv) -> None:
    plan, _ = get_plugin("verbatim").plan(
        PlanRequest(query="What is the half-life?", profile="verbatim"), env
    )
    assert plan.profile == "verbatim" and plan.query_mode == "ATTRIBUTE" and plan.attribute == "half_life"


@pytest.mark.parametrize(
    ("name", "scopes"), [("default", True), ("verbatim", True), ("vrm", False), ("coach", False)]
)
def test_which_profiles_scope_to_a_named_document(name: str, scopes: bool) -> None:
    plugin = get_plugin(name)
    assert isinstance(plugin, PipelinePlugin) and plugin.scopes is scopes


def test_a_callers_document_filter_is_never_rescoped(env: ProfileEnv) -> None:
    plan = Plan(query=QUESTION, normalized_query=QUESTION, profile="default", filters={"document_id": "mine"})
    assert get_plugin("default").scope(QUESTION, plan, env) is plan


@pytest.mark.parametrize(
    ("name", "grounded"), [("default", True), ("vrm", True), ("verbatim", False), ("coach", False)]
)
def test_which_profiles_apply_the_shared_grounding_check(name: str, grounded: bool) -> None:
    plugin = get_plugin(name)
    assert isinstance(plugin, PipelinePlugin) and plugin.grounded is grounded
