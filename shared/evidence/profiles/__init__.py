"""The profile registry: one line per profile, each a module with a `plugin()` factory.

A profile owns its whole behaviour behind `evidence.profiles.base.ProfilePlugin` (plan, stages,
answer signal, evidence bundle, response extras); the service calls only that protocol. To add a
profile, add a module beside these and a line below, or call `register_profile` (a plug-in, or a
bare `rank.pipeline.Profile`, which gets the shared behaviour). CONTRIBUTING.md, "Adding a profile".
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from evidence.errors import RequestValidationError
from evidence.profiles.base import Extras, PipelinePlugin, ProfileEnv, ProfilePlugin, ProfileServices
from evidence.rank.pipeline import Profile

Factory = Callable[[], "ProfilePlugin | Profile"]


def _module(name: str) -> Factory:
    """The `plugin()` of module `name`, imported on first use (a profile's dependencies load
    only when it runs)."""

    def build() -> ProfilePlugin:
        plugin: ProfilePlugin = import_module(name).plugin()
        return plugin

    return build


_FACTORIES: dict[str, Factory] = {
    "default": _module("evidence.profiles.default"),
    "vrm": _module("evidence.profiles.vrm"),
    "verbatim": _module("evidence.profiles.verbatim"),
    "coach": _module("evidence.profiles.coach"),
}
_CACHE: dict[str, ProfilePlugin] = {}


def register_profile(name: str, factory: Factory) -> None:
    """Add (or replace) a profile; it is built on first use."""
    _FACTORIES[name] = factory
    _CACHE.pop(name, None)


def unregister_profile(name: str) -> None:
    _FACTORIES.pop(name, None)
    _CACHE.pop(name, None)


def profile_names() -> list[str]:
    return sorted(_FACTORIES)


def unknown_profile(name: str) -> str | None:
    """Why `name` is not a profile (naming the valid ones), or None if it is one."""
    if name in _FACTORIES:
        return None
    return f"unknown profile {name!r}; valid profiles: {', '.join(profile_names())}"


def get_plugin(name: str) -> ProfilePlugin:
    if why := unknown_profile(name):
        raise RequestValidationError(why, field="profile")
    if name not in _CACHE:
        built = _FACTORIES[name]()
        _CACHE[name] = PipelinePlugin(built) if isinstance(built, Profile) else built
    return _CACHE[name]


def get_profile(name: str) -> Profile:
    """The stages and defaults of profile `name` (for tools and tests that run them directly)."""
    return get_plugin(name).pipeline()


__all__ = [
    "Extras",
    "PipelinePlugin",
    "ProfileEnv",
    "ProfilePlugin",
    "ProfileServices",
    "get_plugin",
    "get_profile",
    "profile_names",
    "register_profile",
    "unknown_profile",
    "unregister_profile",
]
