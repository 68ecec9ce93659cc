"""Helpers for the infra tests: one synth per flag set, template queries.

Synth once per test session (per xdist worker; the tier is grouped onto one worker).

Unit synths use placeholder Lambda assets (`evidence:assets=placeholder`): they test the
template, not the code. The real bundle is built and import-tested in test_bundle.py, and
`infra/app.py` (what `make synth` runs) is synthesized with it in test_app_synth.py.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass
class Synth:
    stack: Any
    template: Any  # aws_cdk.assertions.Template
    json: dict[str, Any]
    report: Any  # cdk-nag PolicyValidationPluginReport

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}

    def one(self, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(type_)
        assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
        return next(iter(found.items()))


def synth(context: dict[str, Any], stack_name: str = "Evidence") -> Synth:
    from aws_cdk import App
    from aws_cdk.assertions import Template
    from cdk_nag import AwsSolutionsChecks

    from infra.evidence_infra.stack import EvidenceStack

    app = App(context={"evidence:assets": "placeholder", **context})
    stack = EvidenceStack(app, stack_name)
    report = AwsSolutionsChecks().validate_scope(stack)
    template = Template.from_stack(stack)
    return Synth(stack=stack, template=template, json=dict(template.to_json()), report=report)


@functools.cache
def default_synth() -> Synth:
    """The default flags, synthesized once per process: the infra tier and the batch state
    machine's local executions (tests/functional/assess/test_asl.py) share it."""
    return synth({})


def resolve_join(value: Any) -> str:
    """Flatten an Fn::Join (a state machine definition) to text, each token as "TOKEN"."""
    if isinstance(value, str):
        return value
    sep, parts = value["Fn::Join"]
    return str(sep).join(p if isinstance(p, str) else "TOKEN" for p in parts)


def statements(synth: Synth, role_logical_id_prefix: str) -> list[dict[str, Any]]:
    """Every statement of every IAM policy attached to the role whose logical id starts with the prefix."""
    roles = [k for k in synth.resources("AWS::IAM::Role") if k.startswith(role_logical_id_prefix)]
    assert len(roles) == 1, roles
    out: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": roles[0]} in policy["Properties"].get("Roles", []):
            out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return out


def actions(stmts: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for s in stmts:
        a = s["Action"]
        found.update([a] if isinstance(a, str) else a)
    return found
