"""Names and limits every layer agrees on: the index-name rule, the default index, the query cap,
the local embedder's id, the characters read as a hyphen.

The one home of these values: the API models, settings, the backends and the CDK app
(`infra/`) import them from here instead of copying the pattern.
"""

from __future__ import annotations

import re
from typing import Any

#: Index names: OpenSearch's rules narrowed to what is also a safe folder name in the
#: embedded store (no '.', no '/', no upper case, at most 64 characters).
INDEX_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
INDEX_NAME_RE = re.compile(INDEX_NAME_PATTERN)
INDEX_NAME_RULE = "index names are 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit"
DEFAULT_INDEX = "documents"
#: A query, criterion question or conversation turn: a contract limit (docs/contracts.md#limits),
#: enforced by the API models and repeated by API Gateway's request model, so not a setting.
MAX_QUERY_CHARS = 4096
#: A request's `filters` (docs/contracts.md#limits): keys, values in all, and the length of each.
#: Past ~990 keys SQLite's expression tree overflowed and past 250,000 values its variables did.
MAX_FILTER_KEYS = 64
MAX_FILTER_VALUES = 4096
MAX_FILTER_KEY_CHARS = 256
MAX_FILTER_VALUE_CHARS = 1024
#: The bundled MiniLM embedder's id, recorded by the indexes it builds; the answerability
#: calibration (rank/confidence.py) is keyed by it.
MINILM_MODEL_ID = "minilm-l6-v2-int8"


def validate_index_name(name: str) -> str:
    """`name` unchanged, or ValueError stating the rule."""
    if not INDEX_NAME_RE.fullmatch(name):
        raise ValueError(INDEX_NAME_RULE)
    return name


#: C0 control characters other than tab, line feed and carriage return: no question contains
#: them, they are invisible in logs and invalid in XML 1.0, so request text refuses them.
CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
#: The same rule as a JSON Schema (ECMA) class, for the OpenAPI document.
TEXT_CHAR_CLASS = r"[^\u0000-\u0008\u000b\u000c\u000e-\u001f]"


def reject_blank(value: str) -> str:
    """`value` unchanged, or ValueError: whitespace alone would search for nothing."""
    if not value.strip():
        raise ValueError("must contain non-whitespace text")
    return value


def reject_control_characters(value: str | None) -> str | None:
    """`value` unchanged, or ValueError naming the first control character."""
    if value is not None:
        found = CONTROL_CHARS_RE.search(value)
        if found:
            raise ValueError(
                f"control character U+{ord(found.group()):04X} at position {found.start()}; remove it"
            )
    return value


def check_filters(filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """`filters` unchanged, or ValueError naming the limit it goes past (and the key, clipped)."""
    if filters is None:
        return None
    if len(filters) > MAX_FILTER_KEYS:
        raise ValueError(f"{len(filters):,} keys; at most {MAX_FILTER_KEYS} are accepted")
    total = 0
    for key, value in filters.items():
        shown = repr(key[:40] + ("\u2026" if len(key) > 40 else ""))
        if len(key) > MAX_FILTER_KEY_CHARS:
            raise ValueError(f"key {shown} is {len(key):,} characters; at most {MAX_FILTER_KEY_CHARS}")
        values = value if isinstance(value, list) else [value]
        total += len(values)
        if total > MAX_FILTER_VALUES:
            raise ValueError(f"more than {MAX_FILTER_VALUES:,} values in all (at key {shown})")
        for v in values:
            if isinstance(v, str) and len(v) > MAX_FILTER_VALUE_CHARS:
                raise ValueError(
                    f"a value of key {shown} is {len(v):,} characters; at most {MAX_FILTER_VALUE_CHARS:,}"
                )
    return filters


#: The hyphens a compound is written with, as a regex character class's body: hyphen-minus,
#: hyphen (U+2010) and non-breaking hyphen (U+2011), which PDFs and HTML write, and the soft
#: hyphen (U+00AD, an invisible break hint: "encryp\u00adtion" means "encryption"). The embedded
#: analyser splits a word at each of them alike; everything that reads a hyphenated word (the
#: joined query word, the refusal signal's and the planners' question words) takes this one set,
#: so it lives here where the planners, below the search layer, may read it.
HYPHENS = "\\-\u2010\u2011\u00ad"
