"""The package's version, as pyproject.toml declares it: one source for `/v1/health`, the OpenAPI
document and the CLI's `--version`."""

from __future__ import annotations

from functools import cache

DISTRIBUTION = "evidence"
#: What an interpreter that can see the source but not an installed distribution reports.
UNKNOWN = "unknown"


@cache
def package_version() -> str:
    """The installed distribution's version. `make setup` installs the project in the venv; the
    Lambda layer carries a minimal `evidence-<version>.dist-info` written by infra/bundle.py."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN
