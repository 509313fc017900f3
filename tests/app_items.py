"""Items and change records of the sample single-table design `app` (streaming/samples/contracts/app.yml),
written by hand in DynamoDB JSON for the operations tests: tenants, users, invoices, and
AUDIT# items, a kind no entity of the packaged contract matches (they land in app_unrouted)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from streaming.contracts.loader import load_contracts
from streaming.contracts.model import TableContract, contracts_of_table
from streaming.samples.export_writer import IncrementalChange, write_full_export, write_incremental_export

APP = "app"
Item = dict[str, dict[str, Any]]


def tenant(tenant_id: str, name: str = "Acme") -> Item:
    pk = f"TENANT#{tenant_id}"
    return {"pk": {"S": pk}, "sk": {"S": pk}, "name": {"S": name}, "plan": {"S": "TEAM"},
            "createdAt": {"S": "2026-10-01T08:00:00Z"}}


def user(tenant_id: str, user_id: str, role: str = "MEMBER") -> Item:
    return {"pk": {"S": f"TENANT#{tenant_id}"}, "sk": {"S": f"USER#{user_id}"},
            "gsi1pk": {"S": f"EMAIL#{user_id}@example.com"}, "gsi1sk": {"S": f"USER#{user_id}"},
            "email": {"S": f"{user_id}@example.com"}, "role": {"S": role}}


def invoice(tenant_id: str, invoice_id: str, amount: str = "12.50") -> Item:
    return {"pk": {"S": f"TENANT#{tenant_id}"}, "sk": {"S": f"INVOICE#{invoice_id}"},
            "amount": {"N": amount}, "currency": {"S": "EUR"}, "status": {"S": "ISSUED"},
            "issuedAt": {"S": "2026-10-31T12:00:00Z"},
            "lines": {"L": [{"M": {"sku": {"S": "SKU-1"}, "qty": {"N": "2"}}}]}}


def audit(tenant_id: str, audit_id: str, action: str = "LOGIN") -> Item:
    """An item of a kind the packaged contract does not know."""
    return {"pk": {"S": f"TENANT#{tenant_id}"}, "sk": {"S": f"AUDIT#{audit_id}"},
            "action": {"S": action}, "actor": {"S": "u1"}}


def keys_of(item: Mapping[str, Any]) -> Item:
    return {"pk": item["pk"], "sk": item["sk"]}


def app_contracts(contracts: Mapping[str, TableContract] | None = None) -> dict[str, TableContract]:
    """The raw tables of `app`, keyed by raw table."""
    return contracts_of_table(load_contracts() if contracts is None else contracts, APP)


def _export_writer_contracts() -> dict[str, TableContract]:
    # The export writer looks the key up by DynamoDB table name; any raw table of `app`
    # has its key.
    return {APP: app_contracts()["app_unrouted"]}


def write_app_full_export(out_dir: Path, items: list[Item], export_time: datetime) -> Path:
    return write_full_export(out_dir, APP, items, export_time, contracts=_export_writer_contracts())


def write_app_incremental_export(
    out_dir: Path, changes: list[IncrementalChange], start: datetime, end: datetime
) -> Path:
    return write_incremental_export(out_dir, APP, changes, start, end, contracts=_export_writer_contracts())


def change_record(event_id: str, event_name: str, seconds: int, new: Item | None = None,
                  old: Item | None = None) -> str:
    """A DynamoDB Streams record (NEW_AND_OLD_IMAGES) of table `app`, as JSON text."""
    image = new if new is not None else old
    assert image is not None
    dynamodb: dict[str, Any] = {"ApproximateCreationDateTime": seconds, "Keys": keys_of(image),
                                "SequenceNumber": f"{seconds}000", "StreamViewType": "NEW_AND_OLD_IMAGES"}
    if new is not None:
        dynamodb["NewImage"] = new
    if old is not None:
        dynamodb["OldImage"] = old
    return json.dumps({"eventID": event_id, "eventName": event_name, "eventSource": "aws:dynamodb",
                       "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{APP}/stream/2026",
                       "dynamodb": dynamodb}, separators=(",", ":"))
