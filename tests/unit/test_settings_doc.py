"""docs/settings.md lists every `EVIDENCE_*` variable with the type and default `Settings` gives it.

On a mismatch the assertion prints the rows the code implies; copy them in and write the meaning.
"""

from __future__ import annotations

import re
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from evidence.config import ENV_PREFIX, Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
ROW = re.compile(r"^\| `(EVIDENCE_[A-Z0-9_]+)` \| (.*?) \| (.*?) \| (.*) \|$")


def _base(annotation: Any) -> tuple[Any, bool]:
    """The annotation without `| None`, and whether None was allowed."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(annotation))
    return annotation, False


def _literals(annotation: Any) -> list[str]:
    """The `Literal[...]` values beside the main type (`int | Literal["auto"]`)."""
    if not (isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union):
        return []
    return [
        f"`{v}`"
        for a in typing.get_args(annotation)[1:]
        if typing.get_origin(a) is Literal
        for v in typing.get_args(a)
    ]


def type_text(field: FieldInfo) -> str:
    base, _ = _base(field.annotation)
    metadata = list(field.metadata)
    if typing.get_origin(base) is Annotated:  # `Annotated[int, Field(ge=1)] | Literal["auto"]`
        base, *extra = typing.get_args(base)
        metadata += [m for info in extra for m in getattr(info, "metadata", [info])]
    if isinstance(base, type) and issubclass(base, Enum):
        text = " \\| ".join(f"`{m.value}`" for m in base)
    elif base is SecretStr:
        text = "secret"
    elif base is Path:
        text = "path"
    elif typing.get_origin(base) is dict:
        text = "JSON object"
    else:
        text = getattr(base, "__name__", str(base))
    lo = next((f"≥ {m.ge}" for m in metadata if isinstance(m, Ge)), None)
    lo = lo or next((f"> {m.gt}" for m in metadata if isinstance(m, Gt)), None)
    hi = next((f"≤ {m.le}" for m in metadata if isinstance(m, Le)), None)
    bounds = ", ".join(b for b in (lo, hi) if b)
    text = f"{text} ({bounds})" if bounds else text
    return " \\| ".join([text, *_literals(field.annotation)])


def default_text(field: FieldInfo) -> str:
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return "`{}`"
    return f"`{value}`"


def expected_rows() -> dict[str, tuple[str, str]]:
    return {
        ENV_PREFIX + name.upper(): (type_text(field), default_text(field))
        for name, field in Settings.model_fields.items()
    }


def documented_rows() -> dict[str, tuple[str, str, str]]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(4))
    return rows


def test_every_setting_is_documented_with_its_type_and_default() -> None:
    expected = expected_rows()
    documented = documented_rows()
    wrong = {
        name: f"| `{name}` | {kind} | {default} | … |"
        for name, (kind, default) in expected.items()
        if documented.get(name, ("", "", ""))[:2] != (kind, default)
    }
    assert not wrong, "docs/settings.md is out of date; expected rows:\n" + "\n".join(wrong.values())
    stale = sorted(set(documented) - set(expected))
    assert not stale, f"docs/settings.md documents variables that are no setting: {stale}"


def test_every_documented_setting_says_what_it_means() -> None:
    for name, (_, _, meaning) in documented_rows().items():
        text = meaning.strip()
        assert len(text) > 10 and text != "…", f"{name} has no meaning in docs/settings.md"
