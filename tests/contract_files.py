"""Contract documents written as the YAML files the loader reads."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def write_contract(directory: Path, document: dict[str, Any], name: str = "contract.yml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path
