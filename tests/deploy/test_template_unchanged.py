"""The synthesized templates equal the golden ones in golden/, so a change to the stack's
Python code that is meant to keep the deployed resources (a refactoring) is shown to
keep them. A logical id that changes makes CloudFormation replace the resource: a new,
empty bucket, key or stream.

The golden files are normalised (sorted keys) with every asset hash masked. An asset
hash is the SHA-256 of the files the asset packages (the streaming package, the job
script, the job keeper's code, the dbt image's build context), not of the stack code,
and streaming/ and dbt_project/ change it on their own; each hash becomes a label
numbered by where it first occurs, so the test still sees which asset each resource uses.

After a change to the template that is meant, rewrite the golden files and commit them
with the change:
    LAKEHOUSE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/deploy/test_template_unchanged.py -p no:xdist
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
# SHA-256 in hex: in a template, only asset hashes look like this.
ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
SHOWN_DIFFERENCES = 12


def normalised(template: dict) -> dict:
    labels: dict[str, str] = {}

    def label(match: re.Match) -> str:
        return labels.setdefault(match.group(), f"<asset {len(labels) + 1}>")

    return json.loads(ASSET_HASH.sub(label, json.dumps(template, sort_keys=True)))


def brief(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 100 else text[:97] + "..."


def differences(golden: Any, current: Any, path: str = "") -> Iterator[str]:
    """Where `current` departs from `golden`, one line per differing path, in order."""
    if isinstance(golden, dict) and isinstance(current, dict):
        for key in sorted(golden.keys() | current.keys()):
            where = f"{path}.{key}" if path else key
            if key not in current:
                yield f"{where}: removed, was {brief(golden[key])}"
            elif key not in golden:
                yield f"{where}: added, {brief(current[key])}"
            else:
                yield from differences(golden[key], current[key], where)
    elif isinstance(golden, list) and isinstance(current, list) and len(golden) == len(current):
        for index, (was, now) in enumerate(zip(golden, current)):
            yield from differences(was, now, f"{path}[{index}]")
    elif golden != current:
        yield f"{path}: was {brief(golden)}, now {brief(current)}"


@pytest.mark.parametrize("name, fixture", [("example", "synthesized"), ("variant", "variant_synthesized")])
def test_the_template_is_the_golden_one(name, fixture, request):
    template = normalised(request.getfixturevalue(fixture).template)
    golden_path = GOLDEN / f"{name}.template.json"
    if os.environ.get("LAKEHOUSE_UPDATE_GOLDEN") == "1":
        golden_path.write_text(json.dumps(template, sort_keys=True, indent=1) + "\n")
    assert golden_path.exists(), f"no {golden_path}: create it with LAKEHOUSE_UPDATE_GOLDEN=1 (see this module's docstring)"
    found = list(islice(differences(json.loads(golden_path.read_text()), template), SHOWN_DIFFERENCES + 1))
    assert not found, (
        f"the {name} template departs from {golden_path.name} (first {SHOWN_DIFFERENCES} paths shown):\n  "
        + "\n  ".join(found[:SHOWN_DIFFERENCES])
        + "\nIf the change is meant, refresh the golden files (this module's docstring says how)."
    )
