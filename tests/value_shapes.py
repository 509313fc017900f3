"""Orders holding the values DynamoDB accepts that the Hudi sink once could not write:
landed beside the generator's mix by the sink differential (tests/dbt) and the Athena
tier (tests/athena), so that both sinks and Trino are compared on them.
tests/io/formats/hudi/interop/test_hudi_values.py has one test per shape."""
from __future__ import annotations

import json
from pathlib import Path

NULL = {"NULL": True}
LINE = {"M": {"sku": {"S": "SKU-1"}, "quantity": {"N": "2"}, "unitPrice": {"N": "9.99"}}}
# Orders' lineItems (L of M) and shippingAddress (M): NULL in lists and maps, empty lists
# and maps. The last, a list of mixed types, is quarantined by both sinks.
VALUE_SHAPES = {
    "null-line": {"lineItems": {"L": [LINE, NULL]}},
    "null-field-line": {"lineItems": {"L": [{"M": {"sku": NULL, "quantity": {"N": "1"}, "unitPrice": NULL}}]}},
    "no-lines": {"lineItems": {"L": []}, "shippingAddress": {"M": {}}},
    "empty-line": {"lineItems": {"L": [{"M": {}}, NULL, LINE]}, "shippingAddress": {"M": {"city": NULL}}},
    "mixed-lines": {"lineItems": {"L": [LINE, {"S": "SKU-2"}]}},
}


def write_value_shapes(landing: Path) -> None:
    """One order per VALUE_SHAPES entry, inserted within the generated records' time span."""
    first = min(path for path in landing.rglob("*.jsonl"))
    start_ms = int(json.loads(first.read_text().splitlines()[0])["dynamodb"]["ApproximateCreationDateTime"])
    start_ms = start_ms // 1000 if start_ms > 10**14 else start_ms
    records = []
    for number, (order_id, shape) in enumerate(VALUE_SHAPES.items()):
        keys = {"customerId": {"S": "cust-shapes"}, "orderId": {"S": order_id}}
        image = {**keys, "createdAt": {"S": "2026-11-01T00:00:00Z"}, "status": {"S": "PLACED"},
                 "amount": {"N": "19.98"}, "currency": {"S": "EUR"}, **shape}
        records.append({"eventID": f"shape-{number}", "eventName": "INSERT", "recordFormat": "application/json",
                        "tableName": "orders", "eventSource": "aws:dynamodb",
                        "dynamodb": {"ApproximateCreationDateTime": start_ms + number, "Keys": keys,
                                     "NewImage": image, "SizeBytes": len(json.dumps(image))}})
    (first.parent / "cdc-value-shapes.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
