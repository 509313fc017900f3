"""Contract documents written as the YAML files the loader reads."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# A small valid contract of one table: a string key, a number with a cast, a partition.
EVENTS: dict[str, Any] = {
    "table": "events",
    "raw_table": "events",
    "description": "Things that happened.",
    "key": {"partition_key": "eventId"},
    "attributes": {"eventId": {"type": "S"}, "amount": {"type": "N", "cast": "decimal(18,2)"}},
    "partitioning": {"column": "event_bucket", "expression": "substring(event_id, -1, 1)"},
}


def write_contract(directory: Path, document: dict[str, Any], name: str = "contract.yml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path
