"""Who may read or write which index: one policy, one check (docs/api.md, "Access control").

`EVIDENCE_ACCESS_POLICY` holds the policy as JSON, or the path of a JSON file:

```json
{
  "principals": {
    "arn:aws:sts::123456789012:assumed-role/acme-backend/*": {"read": ["acme-*"], "write": ["acme-*"]},
    "apikey:a1b2c3d4e5": {"read": ["acme-*", "shared-*"]}
  },
  "uploads": {"indexes/acme-": ["acme-*"]},
  "tokens": {"<a long random string>": "local-dev"}
}
```

* ``principals``: principal pattern → index-name patterns it may ``read`` (retrieve, coach,
  list, batch assessments) and ``write`` (index, delete). Patterns are shell globs (``*``, ``?``);
  a principal matched by several entries gets the union of their grants.
* ``uploads``: S3 key prefix → index patterns an object under that prefix may index into (or be
  deleted from). A key under no prefix, or aimed at an index its prefixes do not grant, fails.
* ``tokens``: bearer token → principal, for `evidence serve` only (API Gateway authenticates in
  the cloud). The file is then a secret: keep it out of version control.

No policy (the default) is **open**: every caller may touch every index, as before this
component existed. That keeps the CLI, `evidence demo` and a loopback `evidence serve` working
with nothing to configure; in the cloud API Gateway's IAM or API-key authentication still decides
who reaches the API at all. Once a policy is set, anything it does not grant is denied.

The principal of an API request comes from API Gateway's request context, which callers cannot
forge: a Lambda authorizer's ``principalId`` (also what `evidence serve` sets from a bearer
token), else the IAM ``userArn`` (or ``caller``), else ``apikey:<apiKeyId>``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evidence.errors import ConfigurationError, EvidenceError
from evidence.names import INDEX_NAME_RE

API_KEY_PREFIX = "apikey:"


class Access(StrEnum):
    READ = "read"
    WRITE = "write"


class AccessDeniedError(EvidenceError):
    """The caller may not do this to this index.

    The message never depends on whether the index exists: the check runs before anything
    looks at the store, so "not yours" and "does not exist" are the same answer.
    """

    status = 403
    code = "forbidden"

    def __init__(self, access: Access, *, field: str = "index") -> None:
        super().__init__(f"access denied: this caller may not {access.value} this index", field=field)
        self.access = access


def _check_index_patterns(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        # A pattern that no valid name can match is a typo ("Acme-*"), not a grant.
        probe = pattern.replace("*", "a").replace("?", "a")
        if not INDEX_NAME_RE.fullmatch(probe[:64]):
            raise ValueError(f"index pattern {pattern!r} can match no valid index name")
    return patterns


class Grant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)

    @field_validator("read", "write")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        return _check_index_patterns(v)

    def patterns(self, access: Access) -> list[str]:
        return self.read if access is Access.READ else self.write


class AccessPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    principals: dict[str, Grant] = Field(default_factory=dict)
    uploads: dict[str, list[str]] = Field(default_factory=dict)
    tokens: dict[str, str] = Field(default_factory=dict)

    @field_validator("uploads")
    @classmethod
    def _uploads(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for patterns in v.values():
            _check_index_patterns(patterns)
        return v

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, v: dict[str, str]) -> dict[str, str]:
        for token, principal in v.items():
            # Short tokens are guessable; an empty principal would match nothing anyway.
            if len(token) < 16 or not principal:
                raise ValueError("tokens must be at least 16 characters and map to a principal")
        return v


class Authorizer:
    """The one access check. ``policy=None`` is the open mode (everything allowed)."""

    def __init__(self, policy: AccessPolicy | None = None) -> None:
        self.policy = policy

    @property
    def open(self) -> bool:
        return self.policy is None

    def allows(self, principal: str | None, index: str, access: Access) -> bool:
        if self.policy is None:
            return True
        if not principal:
            return False
        return any(
            fnmatchcase(principal, who) and any(fnmatchcase(index, p) for p in grant.patterns(access))
            for who, grant in self.policy.principals.items()
        )

    def check(self, principal: str | None, index: str, access: Access) -> None:
        if not self.allows(principal, index, access):
            raise AccessDeniedError(access)

    def visible(self, principal: str | None, names: Iterable[str]) -> list[str]:
        """The names the caller may read or write (what listing indexes shows it)."""
        return [
            n
            for n in names
            if self.allows(principal, n, Access.READ) or self.allows(principal, n, Access.WRITE)
        ]

    def check_upload(self, key: str, index: str) -> None:
        """An S3 object under `key` may write to `index` only if a granted key prefix says so."""
        if self.policy is None:
            return
        for prefix, patterns in self.policy.uploads.items():
            if key.startswith(prefix) and any(fnmatchcase(index, p) for p in patterns):
                return
        raise AccessDeniedError(Access.WRITE, field="key")

    def principal_for_token(self, token: str | None) -> str | None:
        if self.policy is None or not token:
            return None
        found = None
        for known, principal in self.policy.tokens.items():
            # Compare every token in constant time: the loop's duration says nothing either.
            if hmac.compare_digest(known.encode(), token.encode()):
                found = principal
        return found


def principal_of(event: Mapping[str, Any]) -> str | None:
    """The caller of an API Gateway REST proxy event, from what API Gateway itself filled in."""
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") or {}
    if isinstance(authorizer, Mapping) and authorizer.get("principalId"):
        return str(authorizer["principalId"])
    identity = context.get("identity") or {}
    if not isinstance(identity, Mapping):
        return None
    for key in ("userArn", "caller"):
        if identity.get(key):
            return str(identity[key])
    if identity.get("apiKeyId"):
        return API_KEY_PREFIX + str(identity["apiKeyId"])
    return None


def parse_policy(raw: str | None) -> AccessPolicy | None:
    """The setting's value (JSON, or the path of a JSON file) → the policy; None = open."""
    if raw is None or not raw.strip():
        return None
    text = raw
    if not raw.lstrip().startswith("{"):
        try:
            text = Path(raw).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"EVIDENCE_ACCESS_POLICY: cannot read {raw!r}: {exc}") from exc
    try:
        return AccessPolicy.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise ConfigurationError(f"EVIDENCE_ACCESS_POLICY is not a valid access policy: {exc}") from exc
