"""Reading a synthesized template: CloudFormation intrinsics rendered as plain strings,
so tests can compare an IAM resource such as {"Fn::Join": ["", [{"Fn::GetAtt":
["LakeBucket1A2B", "Arn"]}, "/raw/*"]]} with the text `${LakeBucket1A2B.Arn}/raw/*`."""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


def render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return "${%s}" % argument
        if function == "Fn::GetAtt":
            return "${%s.%s}" % tuple(argument)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(render(part) for part in parts)
        if function == "Fn::Sub":
            return argument if isinstance(argument, str) else argument[0]
    raise ValueError(f"cannot render {value!r}")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def logical_id(prefix: str) -> str:
    """A regex for a CDK logical id: the construct path plus an 8-character hash."""
    return re.escape(prefix) + r"[0-9A-F]{8}"


def role_statements(template: dict, role_prefix: str) -> list[dict]:
    """Every statement of every policy attached to the role (inline or AWS::IAM::Policy)."""
    role_ids = [lid for lid in template["Resources"] if re.fullmatch(logical_id(role_prefix), lid)]
    assert len(role_ids) == 1, f"expected one role {role_prefix}, found {role_ids}"
    (role_id,) = role_ids
    found = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in props.get("Roles", []):
            found += props["PolicyDocument"]["Statement"]
    for policy in template["Resources"][role_id]["Properties"].get("Policies", []):
        found += policy["PolicyDocument"]["Statement"]
    return found


def identity_statements(template: dict) -> Iterator[tuple[str, dict]]:
    """(policy logical id, statement) for every identity policy in the template."""
    for lid, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy":
            for statement in props["PolicyDocument"]["Statement"]:
                yield lid, statement
        if resource["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                for statement in policy["PolicyDocument"]["Statement"]:
                    yield lid, statement


def grants(statements: list[dict], action: str) -> list[str]:
    """Rendered resources on which the statements allow `action` (exact or by wildcard)."""
    resources = []
    for statement in statements:
        if statement.get("Effect", "Allow") != "Allow":
            continue
        actions = as_list(statement["Action"])
        if any(re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), action) for pattern in actions):
            resources += [render(resource) for resource in as_list(statement["Resource"])]
    return resources
