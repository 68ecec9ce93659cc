"""What every subcommand shares: exit codes, the usage error, `--store`, and the service it names."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

    from evidence.config import Settings
    from evidence.service import EvidenceService

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure reported as one line, `evidence COMMAND: error: message`, and exit `code`."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Command:
    """One subcommand: its arguments and what runs it. Every subcommand takes `--store DIR`
    (`store_option`)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


def store_option() -> argparse.ArgumentParser:
    """The parent parser of every subcommand (each works on a store; `migrate` reads it)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        type=Path,
        metavar="DIR",
        help="store directory (default ./.evidence or EVIDENCE_STORE_DIR)",
    )
    return common


def settings_from_args(args: argparse.Namespace, **overrides: Any) -> Settings:
    """`Settings` from the environment, with `--store` (when given) and `overrides` on top.

    A bad or misspelt `EVIDENCE_*` variable is a usage error naming the variable and what it
    accepts, not a traceback."""
    from pydantic import ValidationError

    from evidence.config import Settings
    from evidence.errors import ConfigurationError

    store = getattr(args, "store", None)
    if store is not None:
        overrides.setdefault("store_dir", Path(store))
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise CliError(settings_error(exc)) from None
    except ConfigurationError as exc:  # a misspelt variable (config.unknown_environment)
        raise CliError(exc.message) from None


def settings_error(exc: ValidationError) -> str:
    """One line for every refused setting: the variable, its value, what it accepts.

    The options that become settings (`--store`, `migrate --endpoint`) take any string, so a
    refused value always comes from the environment."""
    from evidence.config import ENV_PREFIX

    parts = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        name = ENV_PREFIX + field.upper()
        value = err.get("input")
        shown = f"={value!r}" if isinstance(value, str | int | float) else ""
        parts.append(f"{name}{shown}: {_accepts(err['msg'])}")
    return "; ".join(parts)


def _accepts(message: str) -> str:
    # pydantic's wording ("Input should be 'none', 'cohere' or 'bedrock'") already lists the
    # allowed values or the range; only the subject changes, to the variable being read.
    return message.replace("Input should be", "should be", 1)


def service_from_args(args: argparse.Namespace) -> EvidenceService:
    """The one way a subcommand builds its service (tests replace it, e.g. with another embedder)."""
    from evidence.service import EvidenceService

    return EvidenceService(settings_from_args(args))


def request_error(exc: ValidationError) -> CliError:
    """The usage error for a request the options made invalid: its first refused field and why
    (`top_k: Input should be greater than or equal to 1`)."""
    err = exc.errors()[0]
    return CliError(f"{'.'.join(map(str, err['loc']))}: {err['msg']}")


@contextlib.contextmanager
def quiet_service(args: argparse.Namespace) -> Iterator[EvidenceService]:
    """The subcommand's service (`service_from_args`), closed after the block. Within it stdout
    goes to stderr: stdout carries only the answer printed after the block (`--json` its last
    line, `--format xml` bare XML), whatever the pipeline logs or prints on the way (a Powertools
    logger set up in this process, say)."""
    service = service_from_args(args)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield service
    finally:
        service.close()


def key_values(pairs: Sequence[str], option: str) -> list[tuple[str, str]]:
    """`KEY=VALUE` arguments of a repeatable option, in order; a usage error names the bad one."""
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} takes KEY=VALUE, got {pair!r}")
        out.append((key.strip(), value))
    return out


def shown_path(path: Path | str) -> str:
    """A path as error lines show it: below the working directory relative to it (as typed),
    else absolute, the way `evidence index` names its sources."""
    given = Path(path)
    # A symlink is named as the link (a refused link to /etc/passwd is the link's fault), not its target.
    resolved = given.parent.resolve() / given.name if given.is_symlink() else given.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()
