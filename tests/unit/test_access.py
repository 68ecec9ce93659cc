"""The access policy and the index-name rule, without AWS: pure checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence.access import Access, AccessDeniedError, AccessPolicy, Authorizer, parse_policy, principal_of
from evidence.errors import ConfigurationError
from evidence.names import validate_index_name
from evidence.search.embedded import EmbeddedBackend

POLICY = {
    "principals": {
        "arn:aws:iam::1:role/acme/*": {"read": ["acme-*"], "write": ["acme-docs"]},
        "apikey:k1": {"read": ["shared"]},
        "apikey:*": {"read": ["public-?"]},
    },
    "uploads": {"indexes/acme-": ["acme-*"], "": ["documents"]},
    "tokens": {"0123456789abcdef-token": "local"},
}


@pytest.fixture
def authz() -> Authorizer:
    return Authorizer(AccessPolicy.model_validate(POLICY))


@pytest.mark.parametrize(
    ("principal", "index", "access", "allowed"),
    [
        ("arn:aws:iam::1:role/acme/s1", "acme-x", Access.READ, True),
        ("arn:aws:iam::1:role/acme/s1", "acme-x", Access.WRITE, False),
        ("arn:aws:iam::1:role/acme/s1", "acme-docs", Access.WRITE, True),
        ("arn:aws:iam::1:role/acmeX/s1", "acme-x", Access.READ, False),
        ("apikey:k1", "shared", Access.READ, True),
        ("apikey:k1", "public-1", Access.READ, True),  # the union of every matching entry
        ("apikey:k2", "shared", Access.READ, False),
        ("apikey:k2", "public-12", Access.READ, False),
        (None, "shared", Access.READ, False),
        ("", "shared", Access.READ, False),
    ],
)
def test_grants(authz: Authorizer, principal: str | None, index: str, access: Access, allowed: bool) -> None:
    assert authz.allows(principal, index, access) is allowed


def test_open_mode_allows_everything() -> None:
    open_ = Authorizer(parse_policy(None))
    assert open_.open and open_.allows(None, "anything", Access.WRITE)
    open_.check_upload("x/y", "documents")
    assert open_.visible(None, ["a", "b"]) == ["a", "b"]


def test_denial_is_typed_and_says_nothing_about_the_index(authz: Authorizer) -> None:
    with pytest.raises(AccessDeniedError) as exc:
        authz.check("apikey:k2", "acme-secret", Access.READ)
    assert (exc.value.status, exc.value.code, exc.value.field) == (403, "forbidden", "index")
    assert "acme" not in exc.value.message


def test_uploads_by_prefix(authz: Authorizer) -> None:
    authz.check_upload("indexes/acme-docs/a.pdf", "acme-docs")
    authz.check_upload("loose.txt", "documents")
    for key, index in (("indexes/globex/a.pdf", "globex"), ("indexes/acme-docs/a.pdf", "shared")):
        with pytest.raises(AccessDeniedError):
            authz.check_upload(key, index)


def test_tokens(authz: Authorizer) -> None:
    assert authz.principal_for_token("0123456789abcdef-token") == "local"
    assert authz.principal_for_token("0123456789abcdef-toke") is None
    assert authz.principal_for_token(None) is None


def test_principal_from_the_request_context() -> None:
    ctx = {"identity": {"userArn": "arn:u", "caller": "AIDA:s", "apiKeyId": "k"}}
    assert principal_of({"requestContext": ctx}) == "arn:u"
    assert principal_of({"requestContext": {"identity": {"apiKeyId": "k"}}}) == "apikey:k"
    assert principal_of({"requestContext": {**ctx, "authorizer": {"principalId": "p"}}}) == "p"
    assert principal_of({"requestContext": {"identity": {"sourceIp": "1.2.3.4"}}}) is None
    assert principal_of({}) is None


@pytest.mark.parametrize(
    "bad",
    [
        '{"principals": {"x": {"read": ["Acme-*"]}}}',  # can match no valid name
        '{"principals": {"x": {"read": ["acme/*"]}}}',
        '{"principals": {"x": {"admin": ["*"]}}}',  # unknown direction
        '{"tokens": {"short": "x"}}',
        '{"principal": {}}',  # misspelt key
        "{not json",
        "/nonexistent/policy.json",
    ],
)
def test_bad_policies_are_configuration_errors(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_policy(bad)


def test_policy_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    policy = parse_policy(str(path))
    assert policy is not None and "apikey:k1" in policy.principals


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "..",
        ".",
        "a/b",
        "a\\b",
        "/abs",
        "A",
        "_x",
        "-x",
        "+x",
        "x" * 65,
        "x\n",
        "x\x00",
        "é",
        "a.b",
        "a b",
        "",
    ],
)
def test_index_names_that_could_escape_or_break_opensearch_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        validate_index_name(name)
    backend = EmbeddedBackend(tmp_path)
    with pytest.raises(ValueError):
        backend._root(name)
    assert not any(tmp_path.iterdir())
