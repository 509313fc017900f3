"""Contract documents written as the YAML files the loader reads, and registered."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from streaming.contracts.evolution import ContractRegistry, check_contracts, register_contracts
from streaming.contracts.loader import ContractError, load_contract_file
from streaming.contracts.model import TableContract

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


def load_contract(path: Path) -> TableContract:
    """The one contract of a file describing one raw table (a DynamoDB table without
    entities): what most contract tests write. The product reads whole folders
    (`load_contracts`); this is the tests' shorthand over the same file loader."""
    contracts = load_contract_file(path)
    if len(contracts) != 1:
        raise ContractError(f"{path}: declares entities, so it describes {len(contracts)} raw tables")
    return contracts[0]


def checked_and_registered(
    registry: ContractRegistry,
    contracts: Mapping[str, TableContract],
    now: datetime,
    report: Callable[[str], None] = lambda _: None,
) -> dict[str, str]:
    """What a start does to the registry, both steps at once: check (step 1), then register
    (step 2, once Spark planned the tables; runtime/startup.py). Returns the versions."""
    check_contracts(registry, contracts, report=report)
    return register_contracts(registry, contracts, now)
